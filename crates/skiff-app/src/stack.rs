//! The transport layers under a protocol, built once per inbound and outbound from its
//! streamSettings: the base (raw TCP, or mKCP over UDP), then TLS if configured, then
//! WebSocket if configured. The same layer code serves every protocol, on both sides.

use std::io;
use std::sync::Arc;

use skiff_config::{StreamNetwork, StreamPlan, StreamSecurity, TlsPlan};
use skiff_core::tcp_tuning::TcpTuning;
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata, Outbound};
use skiff_kcp::mkcp::MkcpConfig;

use skiff_transport::kcp::TunnelParams;
use skiff_transport::kcp::client::KcpClient;
use skiff_transport::tls::{TlsClient, TlsClientOptions, TlsServer, TlsServerOptions, TlsVersion};
use skiff_transport::ws::{self, WsAccepted, WsClientOptions, WsServerOptions};

/// What the layers learned about a connection: what fallbacks select on.
#[derive(Clone, Debug, Default)]
pub struct LayerSession {
    /// SNI the client sent in TLS, lower-cased.
    pub sni: Option<String>,
    /// ALPN protocol negotiated in TLS, lower-cased.
    pub alpn: Option<String>,
}

pub struct InboundLayers {
    tls: Option<TlsServer>,
    ws: Option<WsServerOptions>,
    /// mKCP base: the inbound listens on UDP and accepts mKCP connections.
    mkcp: Option<MkcpConfig>,
    /// kcptun base: the inbound listens on UDP; every smux stream is a connection.
    kcptun: Option<TunnelParams>,
}

impl InboundLayers {
    pub fn build(plan: &StreamPlan) -> Result<InboundLayers, String> {
        let tls = match &plan.security {
            StreamSecurity::None => None,
            StreamSecurity::Tls(t) => Some(TlsServer::new(&server_options(t))?),
        };
        let (mut ws, mut mkcp, mut kcptun) = (None, None, None);
        match &plan.network {
            StreamNetwork::Tcp => {}
            StreamNetwork::Ws(w) => {
                ws = Some(WsServerOptions {
                    path: w.path.clone(),
                    host: w.host.clone(),
                    early_data_header: None,
                })
            }
            StreamNetwork::Mkcp(k) => mkcp = Some(k.clone()),
            StreamNetwork::Kcptun(k) => kcptun = Some(crate::kcp_params::for_network(&k.tuning)),
        }
        Ok(InboundLayers {
            tls,
            ws,
            mkcp,
            kcptun,
        })
    }

    /// No layer runs over the accepted stream (it goes straight to the protocol).
    pub fn is_empty(&self) -> bool {
        self.tls.is_none() && self.ws.is_none()
    }

    /// The protocol speaks directly on a TCP socket.
    pub fn is_raw_tcp(&self) -> bool {
        self.is_empty() && self.mkcp.is_none() && self.kcptun.is_none()
    }

    /// The kcptun tunnel parameters when this inbound takes kcptun sessions instead of TCP.
    pub fn kcptun(&self) -> Option<&TunnelParams> {
        self.kcptun.as_ref()
    }

    /// The mKCP settings when this inbound listens for mKCP instead of TCP.
    pub fn mkcp(&self) -> Option<&MkcpConfig> {
        self.mkcp.as_ref()
    }

    /// Runs the layers' server side over an accepted connection: the protocol speaks on the
    /// stream returned.
    pub async fn accept(
        &self,
        stream: BoxStream,
        session: &mut LayerSession,
    ) -> io::Result<BoxStream> {
        let stream = match &self.tls {
            None => stream,
            Some(tls) => {
                let (stream, s) = tls.accept(stream).await?;
                session.sni = s.sni.map(|n| n.to_ascii_lowercase());
                session.alpn = s.alpn.map(|a| a.to_ascii_lowercase());
                stream
            }
        };
        match &self.ws {
            None => Ok(stream),
            Some(options) => match ws::accept(stream, options).await? {
                WsAccepted::Upgraded { stream, .. } => Ok(stream),
                WsAccepted::NotWebSocket { stream, .. } => {
                    // A WebSocket inbound has no fallbacks (they need raw TCP): answer as
                    // Xray's listener does, so a prober meets an ordinary Go web server.
                    ws::refuse(stream, options).await?;
                    Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "not a WebSocket upgrade for this inbound; answered as Xray does",
                    ))
                }
            },
        }
    }
}

/// An outbound's way to its server: its layers, directly or through a chained outbound.
pub struct ServerDialer {
    pub layers: OutboundLayers,
    /// Chained outbound (`proxySettings.tag`): reach the server through it.
    pub via: Option<Arc<dyn Outbound>>,
}

impl Dialer for ServerDialer {
    fn dial<'a>(
        &'a self,
        server: &'a Address,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(self.layers.connect(server, self.via.as_ref(), meta))
    }

    fn bind_via<'a>(
        &'a self,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
        Box::pin(async move {
            match &self.via {
                Some(via) => via.bind(meta).await.map(Some),
                None => Ok(None),
            }
        })
    }
}

/// What an outbound's connection to its server starts as.
#[derive(Clone)]
enum Base {
    Tcp(TcpTuning),
    Mkcp(Arc<skiff_transport::mkcp::dial::MkcpDialer>),
    /// One kcptun client (KCP sessions + smux) per outbound, made on first use for the
    /// outbound's server; each connection is one smux stream.
    Kcptun(Arc<KcptunBase>),
}

struct KcptunBase {
    params: TunnelParams,
    conn: usize,
    client: std::sync::OnceLock<KcpClient>,
}

#[derive(Clone)]
pub struct OutboundLayers {
    base: Base,
    tls: Option<TlsClient>,
    ws: Option<WsClientOptions>,
}

impl OutboundLayers {
    /// `server` is the address the outbound dials: the default TLS server name and WS host.
    pub fn build(plan: &StreamPlan, server: &str) -> Result<OutboundLayers, String> {
        let server_name = match &plan.security {
            StreamSecurity::Tls(t) => t.server_name.clone().unwrap_or_else(|| server.to_string()),
            StreamSecurity::None => server.to_string(),
        };
        let tls = match &plan.security {
            StreamSecurity::None => None,
            StreamSecurity::Tls(t) => Some(TlsClient::new(&client_options(t, &server_name))?),
        };
        let (ws, base) = match &plan.network {
            StreamNetwork::Tcp => (None, Base::Tcp(tcp_tuning(plan))),
            StreamNetwork::Ws(w) => (
                Some(WsClientOptions {
                    path: w.path.clone(),
                    host: w.host.clone().unwrap_or_else(|| server_name.clone()),
                    headers: w.headers.clone(),
                    early_data_header: None,
                }),
                Base::Tcp(tcp_tuning(plan)),
            ),
            StreamNetwork::Mkcp(k) => (
                None,
                Base::Mkcp(Arc::new(skiff_transport::mkcp::dial::MkcpDialer::new(
                    k.clone(),
                ))),
            ),
            StreamNetwork::Kcptun(k) => (
                None,
                Base::Kcptun(Arc::new(KcptunBase {
                    params: crate::kcp_params::for_network(&k.tuning),
                    conn: k.conn,
                    client: std::sync::OnceLock::new(),
                })),
            ),
        };
        Ok(OutboundLayers { base, tls, ws })
    }

    /// Opens the base connection to `server` (TCP directly or through `via`, or mKCP), then
    /// runs the layers over it.
    pub async fn connect(
        &self,
        server: &Address,
        via: Option<&Arc<dyn Outbound>>,
        meta: &Metadata,
    ) -> io::Result<BoxStream> {
        let stream: BoxStream = match &self.base {
            Base::Tcp(tuning) => crate::dial::dial(server, via, meta, tuning).await?,
            Base::Mkcp(dialer) => {
                if via.is_some() {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "mKCP runs over UDP and cannot be chained through proxySettings",
                    ));
                }
                let addr = crate::dial::resolve(server).await?;
                Box::new(dialer.connect(addr).await?)
            }
            Base::Kcptun(base) => {
                if via.is_some() {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "kcptun runs over UDP and cannot be chained through proxySettings",
                    ));
                }
                let client = base
                    .client
                    .get_or_init(|| KcpClient::new(base.params.clone(), server.clone(), base.conn));
                Box::new(client.open().await?)
            }
        };
        self.wrap(stream).await
    }

    /// Runs the layers' client side over a connection to the server.
    pub async fn wrap(&self, stream: BoxStream) -> io::Result<BoxStream> {
        let stream = match &self.tls {
            None => stream,
            Some(tls) => tls.connect(stream).await?,
        };
        match &self.ws {
            None => Ok(stream),
            Some(options) => ws::connect(stream, options).await,
        }
    }
}

fn version(v: &Option<String>) -> Option<TlsVersion> {
    match v.as_deref() {
        Some("1.2") => Some(TlsVersion::V1_2),
        Some("1.3") => Some(TlsVersion::V1_3),
        _ => None,
    }
}

fn server_options(t: &TlsPlan) -> TlsServerOptions {
    TlsServerOptions {
        certificates: t
            .certificates
            .iter()
            .map(|c| (c.certificate_pem.clone(), c.key_pem.clone()))
            .collect(),
        alpn: if t.alpn.is_empty() {
            // Xray's server default (transport/internet/tls/config.go `GetTLSConfig`): a server
            // that never negotiates ALPN would stand out from Xray and from web servers.
            vec!["h2".into(), "http/1.1".into()]
        } else {
            t.alpn.clone()
        },
        min_version: version(&t.min_version),
        max_version: version(&t.max_version),
        reject_unknown_sni: t.reject_unknown_sni,
    }
}

fn client_options(t: &TlsPlan, server_name: &str) -> TlsClientOptions {
    TlsClientOptions {
        server_name: server_name.to_string(),
        alpn: t.alpn.clone(),
        allow_insecure: t.allow_insecure,
        pinned_sha256: t.pinned_peer_cert_sha256.clone(),
        min_version: version(&t.min_version),
        max_version: version(&t.max_version),
    }
}

/// The TCP tuning a `streamSettings` asks for (`sockopt.tcpCongestion`).
pub fn tcp_tuning(plan: &StreamPlan) -> TcpTuning {
    TcpTuning {
        congestion: plan.tcp_congestion.as_deref().map(Arc::from),
    }
}
