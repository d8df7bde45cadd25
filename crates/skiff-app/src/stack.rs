//! The transport layers under a protocol, built once per inbound and outbound from its
//! streamSettings: raw TCP, then TLS if configured, then WebSocket if configured. The same
//! layer code serves every protocol, on both sides.

use std::io;

use skiff_config::{StreamNetwork, StreamPlan, StreamSecurity, TlsPlan};
use skiff_core::BoxStream;
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

pub enum Layered {
    /// The layers accepted the connection: the protocol speaks on `stream`.
    Ready(BoxStream),
    /// Not a WebSocket request for us: `stream` replays what was read, for a fallback.
    NotForUs(BoxStream),
}

pub struct InboundLayers {
    tls: Option<TlsServer>,
    ws: Option<WsServerOptions>,
}

impl InboundLayers {
    pub fn build(plan: &StreamPlan) -> Result<InboundLayers, String> {
        let tls = match &plan.security {
            StreamSecurity::None => None,
            StreamSecurity::Tls(t) => Some(TlsServer::new(&server_options(t))?),
        };
        let ws = match &plan.network {
            StreamNetwork::Tcp => None,
            StreamNetwork::Ws(w) => Some(WsServerOptions {
                path: w.path.clone(),
                host: w.host.clone(),
                early_data_header: None,
            }),
        };
        Ok(InboundLayers { tls, ws })
    }

    pub fn is_empty(&self) -> bool {
        self.tls.is_none() && self.ws.is_none()
    }

    /// Runs the layers' server side over an accepted connection.
    pub async fn accept(
        &self,
        stream: BoxStream,
        session: &mut LayerSession,
    ) -> io::Result<Layered> {
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
            None => Ok(Layered::Ready(stream)),
            Some(options) => match ws::accept(stream, options).await? {
                WsAccepted::Upgraded { stream, .. } => Ok(Layered::Ready(stream)),
                WsAccepted::NotWebSocket { stream, .. } => Ok(Layered::NotForUs(stream)),
            },
        }
    }
}

#[derive(Clone)]
pub struct OutboundLayers {
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
        let ws = match &plan.network {
            StreamNetwork::Tcp => None,
            StreamNetwork::Ws(w) => Some(WsClientOptions {
                path: w.path.clone(),
                host: w.host.clone().unwrap_or_else(|| server_name.clone()),
                headers: w.headers.clone(),
                early_data_header: None,
            }),
        };
        Ok(OutboundLayers { tls, ws })
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
