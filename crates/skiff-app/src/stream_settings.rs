//! `streamSettings` → the transport's runtime stack, for an inbound (a [`ServerStack`]) and
//! an outbound (a [`Dialer`]). The one place a transport is registered: adding one is a module
//! in skiff-transport plus an arm in `server_stack` and `client_dialer` below.

use std::sync::Arc;

use skiff_config::{
    GrpcPlan, HttpHeaderPlan, RealityPlan, StreamNetwork, StreamPlan, StreamSecurity, TlsPlan,
    XhttpPlan,
};
use skiff_core::tcp_tuning::TcpTuning;
use skiff_core::{
    Address, ClientLayer, Dialer, MultiplexServer, Outbound, OutboundDialer, ServerLayer,
};
use skiff_transport::grpc::{GrpcClientOptions, GrpcDialer, GrpcServer, Keepalive, Windows};
use skiff_transport::http_header::{
    HttpHeaderClient, HttpHeaderServer, RequestTemplate, ResponseTemplate, defaults,
};
use skiff_transport::httpupgrade::{HttpUpgradeClient, HttpUpgradeServer};
use skiff_transport::kcp::dial::KcptunDialer;
use skiff_transport::mkcp::dial::MkcpDialer;
use skiff_transport::reality::client::{RealityClient, RealityClientOptions};
use skiff_transport::stack::{LayeredDialer, ServerBase, ServerStack, Unchainable};
use skiff_transport::tcp::TcpDialer;
use skiff_transport::tls::{TlsClient, TlsClientOptions, TlsServer, TlsServerOptions, TlsVersion};
use skiff_transport::ws::{WsClientOptions, WsServerOptions};
use skiff_transport::xhttp::XhttpDialer;
use skiff_transport::xhttp::XhttpServer;

/// An inbound's base and layers: TLS if configured, then the network's own layer, or the
/// network's multiplexing server ending the stack.
pub fn server_stack(plan: &StreamPlan) -> Result<ServerStack, String> {
    let mut layers: Vec<Arc<dyn ServerLayer>> = Vec::new();
    let mut multiplex: Option<Arc<dyn MultiplexServer>> = None;
    if let StreamSecurity::Tls(t) = &plan.security {
        layers.push(Arc::new(TlsServer::new(&server_tls(t))?));
    }
    if let StreamSecurity::Reality(r) = &plan.security {
        let server = r
            .server
            .as_ref()
            .ok_or("realitySettings of an inbound without its server keys")?;
        layers.push(Arc::new(crate::reality_target::server(server, r.show)?));
    }
    let base = match &plan.network {
        StreamNetwork::Tcp => ServerBase::Tcp,
        StreamNetwork::HttpHeader(h) => {
            let (request, response) = http_header(h);
            layers.push(Arc::new(HttpHeaderServer::new(request.paths, response)));
            ServerBase::Tcp
        }
        StreamNetwork::Ws(w) => {
            layers.push(Arc::new(WsServerOptions {
                path: w.path.clone(),
                host: w.host.clone(),
                early_data_header: None,
            }));
            ServerBase::Tcp
        }
        StreamNetwork::HttpUpgrade(h) => {
            layers.push(Arc::new(HttpUpgradeServer::new(&h.path, h.host.clone())));
            ServerBase::Tcp
        }
        StreamNetwork::Grpc(g) => {
            multiplex = Some(Arc::new(GrpcServer::new(
                &g.service_name,
                Windows::new(g.initial_windows_size),
                Keepalive::server(g.idle_timeout, g.health_check_timeout),
            )));
            ServerBase::Tcp
        }
        StreamNetwork::Mkcp(k) => ServerBase::Mkcp(k.clone()),
        StreamNetwork::Kcptun(k) => ServerBase::Kcptun(crate::kcp_params::for_network(&k.tuning)),
        StreamNetwork::Xhttp(x) => {
            multiplex = Some(Arc::new(XhttpServer::new(crate::xhttp::options(x))));
            ServerBase::Tcp
        }
    };
    Ok(ServerStack {
        base,
        layers,
        multiplex,
    })
}

/// How an outbound reaches `server` (the address it dials: the default TLS server name and
/// HTTP host): the network's base, directly or through the chained outbound `via`, then TLS
/// if configured, then the network's own layer.
pub fn client_dialer(
    plan: &StreamPlan,
    server: &str,
    via: Option<Arc<dyn Outbound>>,
) -> Result<Arc<dyn Dialer>, String> {
    match client_stack(plan, server, via.clone())? {
        ClientStack::Xhttp(mut dialer, x) => {
            if let Some(d) = &x.download {
                let ClientStack::Xhttp(download, _) = client_stack(&d.stream, &d.address, via)?
                else {
                    return Err("xhttp downloadSettings must use the xhttp network".into());
                };
                dialer = dialer.download_from(download, Address::from_host(&d.address, d.port));
            }
            Ok(Arc::new(dialer))
        }
        ClientStack::Other(dialer) => Ok(dialer),
    }
}

/// What [`client_stack`] builds: XHTTP's dialer is kept concrete, so that a
/// `downloadSettings` dialer can be joined to it.
enum ClientStack<'a> {
    Xhttp(XhttpDialer, &'a XhttpPlan),
    Other(Arc<dyn Dialer>),
}

fn client_stack<'a>(
    plan: &'a StreamPlan,
    server: &str,
    via: Option<Arc<dyn Outbound>>,
) -> Result<ClientStack<'a>, String> {
    let server_name = match &plan.security {
        StreamSecurity::Tls(t) => t.server_name.clone().unwrap_or_else(|| server.to_string()),
        StreamSecurity::None => server.to_string(),
        StreamSecurity::Reality(r) => r
            .client
            .as_ref()
            .and_then(|c| c.server_name.clone())
            .unwrap_or_else(|| server.to_string()),
    };
    let mut layers: Vec<Arc<dyn ClientLayer>> = Vec::new();
    if let StreamSecurity::Tls(t) = &plan.security {
        let mut options = client_tls(t, &server_name);
        if matches!(plan.network, StreamNetwork::Grpc(_)) && options.alpn.is_empty() {
            // Xray's client default, which lets the server pick HTTP/2.
            options.alpn = vec!["h2".into(), "http/1.1".into()];
        }
        if matches!(plan.network, StreamNetwork::Xhttp(_)) {
            crate::xhttp::client_alpn(&mut options);
        }
        layers.push(Arc::new(TlsClient::new(&options)?));
    }
    if let StreamSecurity::Reality(r) = &plan.security {
        layers.push(Arc::new(reality_client(r, &server_name)?));
    }
    let chained = via.map(|via| Arc::new(OutboundDialer(via)) as Arc<dyn Dialer>);
    let tcp = || -> Arc<dyn Dialer> {
        match &chained {
            Some(chained) => chained.clone(),
            None => Arc::new(TcpDialer {
                tuning: tcp_tuning(plan),
            }),
        }
    };
    let udp = |reason: &'static str, direct: Arc<dyn Dialer>| -> Arc<dyn Dialer> {
        match &chained {
            Some(chained) => Arc::new(Unchainable {
                reason,
                chained: chained.clone(),
            }),
            None => direct,
        }
    };
    // udp2rawSettings: the UDP transport's datagrams through an in-process udp2raw client.
    let layered = |direct: Arc<dyn Dialer>| -> Result<Arc<dyn Dialer>, String> {
        Ok(match &plan.udp2raw {
            None => direct,
            Some(tuning) => Arc::new(crate::udp2raw_layer::LayerDialer {
                layer: crate::udp2raw_layer::ClientLayer::new(tuning.clone())
                    .map_err(|e| format!("udp2rawSettings: {e}"))?,
                inner: direct,
            }),
        })
    };
    let base = match &plan.network {
        StreamNetwork::Tcp => tcp(),
        StreamNetwork::HttpHeader(h) => {
            layers.push(Arc::new(HttpHeaderClient::new(http_header(h).0)));
            tcp()
        }
        StreamNetwork::Ws(w) => {
            layers.push(Arc::new(WsClientOptions {
                path: w.path.clone(),
                host: w.host.clone().unwrap_or_else(|| server_name.clone()),
                headers: w.headers.clone(),
                early_data_header: None,
            }));
            tcp()
        }
        StreamNetwork::HttpUpgrade(h) => {
            layers.push(Arc::new(HttpUpgradeClient::new(
                &h.path,
                h.host.clone().unwrap_or_else(|| server_name.clone()),
                h.headers.clone(),
            )));
            tcp()
        }
        StreamNetwork::Grpc(g) => {
            // The calls' dialer holds the connection's: TCP (or the chain), then TLS.
            let lower = Arc::new(LayeredDialer {
                base: tcp(),
                layers,
            });
            // Xray sends the TLS serverName as the authority; under REALITY, never its name.
            let explicit_name = match &plan.security {
                StreamSecurity::Tls(t) => t.server_name.clone(),
                StreamSecurity::None | StreamSecurity::Reality(_) => None,
            };
            return Ok(ClientStack::Other(Arc::new(GrpcDialer::new(
                lower,
                grpc_client(g, explicit_name),
            ))));
        }
        StreamNetwork::Mkcp(k) => udp(
            "mKCP runs over UDP and cannot be chained through proxySettings",
            layered(Arc::new(MkcpDialer::new(k.clone())))?,
        ),
        StreamNetwork::Kcptun(k) => udp(
            "kcptun runs over UDP and cannot be chained through proxySettings",
            layered(Arc::new(KcptunDialer::new(
                crate::kcp_params::for_network(&k.tuning),
                k.conn,
            )))?,
        ),
        StreamNetwork::Xhttp(x) => {
            // XHTTP is not a layer: its dialer opens HTTP connections through TCP (+ TLS).
            let lower = Arc::new(LayeredDialer {
                base: tcp(),
                layers,
            });
            return Ok(ClientStack::Xhttp(
                crate::xhttp::dialer(x, lower, &plan.security, &server_name),
                x,
            ));
        }
    };
    Ok(ClientStack::Other(Arc::new(LayeredDialer { base, layers })))
}

/// A gRPC client's options; `tls_server_name` is the configured `serverName`, which Xray
/// sends as the authority when `authority` is not set.
fn grpc_client(g: &GrpcPlan, tls_server_name: Option<String>) -> GrpcClientOptions {
    let paths = skiff_transport::grpc::names::ServicePaths::new(&g.service_name);
    GrpcClientOptions {
        path: paths.for_client(g.multi_mode).to_owned(),
        multi_mode: g.multi_mode,
        authority: g.authority.clone().or(tls_server_name),
        user_agent: skiff_transport::grpc::user_agent::user_agent(&g.user_agent),
        windows: Windows::new(g.initial_windows_size),
        keepalive: Keepalive::client(g.idle_timeout, g.health_check_timeout),
        permit_without_stream: g.permit_without_stream,
    }
}

/// The header's templates, Xray's default header lists where none are configured.
fn http_header(h: &HttpHeaderPlan) -> (RequestTemplate, ResponseTemplate) {
    let request = RequestTemplate {
        method: h.request.method.clone(),
        version: h.request.version.clone(),
        paths: h.request.paths.clone(),
        headers: h
            .request
            .headers
            .clone()
            .unwrap_or_else(defaults::request_headers),
    };
    let response = ResponseTemplate {
        version: h.response.version.clone(),
        status: h.response.status.clone(),
        reason: h.response.reason.clone(),
        headers: h
            .response
            .headers
            .clone()
            .unwrap_or_else(defaults::response_headers),
    };
    (request, response)
}

/// The plain TCP dialer freedom uses, tuned as its stream settings say, or the chained
/// outbound `via`.
pub fn direct_dialer(plan: &StreamPlan, via: Option<Arc<dyn Outbound>>) -> Arc<dyn Dialer> {
    match via {
        Some(via) => Arc::new(OutboundDialer(via)),
        None => Arc::new(TcpDialer {
            tuning: tcp_tuning(plan),
        }),
    }
}

/// The TCP tuning a `streamSettings` asks for (`sockopt.tcpCongestion`).
pub fn tcp_tuning(plan: &StreamPlan) -> TcpTuning {
    TcpTuning {
        congestion: plan.tcp_congestion.as_deref().map(Arc::from),
    }
}

fn version(v: &Option<String>) -> Option<TlsVersion> {
    match v.as_deref() {
        Some("1.2") => Some(TlsVersion::V1_2),
        Some("1.3") => Some(TlsVersion::V1_3),
        _ => None,
    }
}

fn server_tls(t: &TlsPlan) -> TlsServerOptions {
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

fn client_tls(t: &TlsPlan, server_name: &str) -> TlsClientOptions {
    TlsClientOptions {
        server_name: server_name.to_string(),
        alpn: t.alpn.clone(),
        allow_insecure: t.allow_insecure,
        pinned_sha256: t.pinned_peer_cert_sha256.clone(),
        min_version: version(&t.min_version),
        max_version: version(&t.max_version),
        // Names were checked against Xray's list when the config was built.
        fingerprint: t
            .fingerprint
            .as_deref()
            .and_then(|name| skiff_transport::fingerprint::Fingerprint::from_xray_name(name).ok()),
    }
}

/// An outbound's `realitySettings` as the REALITY client layer.
fn reality_client(plan: &RealityPlan, server_name: &str) -> Result<RealityClient, String> {
    let client = plan
        .client
        .as_ref()
        .ok_or("realitySettings of an outbound without publicKey")?;
    if client.mldsa65_verify.is_some() {
        return Err("REALITY mldsa65Verify is not supported by skiff's client yet".into());
    }
    let fingerprint =
        skiff_transport::fingerprint::Fingerprint::from_xray_name(&client.fingerprint)?;
    RealityClient::new(RealityClientOptions {
        server_name: server_name.to_string(),
        public_key: client.public_key,
        short_id: client.short_id.to_vec(),
        spider_x: client.spider_x.clone(),
        spider_y: client.spider_y,
        fingerprint,
    })
}
