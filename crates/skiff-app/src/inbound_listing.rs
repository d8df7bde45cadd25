//! An inbound as Xray's ListInbounds reports it (`xray api lsi`): where it listens, its
//! stream settings as the config wrote them, its sniffing, and its protocol's settings with
//! its users. Xray answers with the protobufs its config loader built; this builds the same
//! messages from Skiff's plan, so that the CLI prints the same JSON for the same config.
//!
//! Not listed (each is a difference from Xray, named in the README's API section): the
//! settings of transports other than the one in use, xhttp's and mKCP's settings (their
//! protocol name is), and sniffing's excluded domains and IPs. The raw transport's HTTP
//! header lists the defaults Skiff filled in where Xray leaves unwritten ones out.

use std::net::IpAddr;

use skiff_api::handler_service::{Account, ApiUser, typed_message, user_to_proto, vmess_security};
use skiff_api::proto::core::InboundHandlerConfig;
use skiff_api::proto::net::{IpOrDomain, Network, PortList, PortRange, ip_or_domain};
use skiff_api::proto::protocol::User;
use skiff_api::proto::proxy::{
    DokodemoConfig, Fallback, HttpServerConfig, Shadowsocks2022MultiUserServerConfig,
    Shadowsocks2022ServerConfig, ShadowsocksServerConfig, SocksServerConfig, TrojanServerConfig,
    VlessInboundConfig, VmessInboundConfig,
};
use skiff_api::proto::receiver::{ReceiverConfig, SniffingConfig};
use skiff_api::proto::serial::TypedMessage;
use skiff_api::proto::stream::headers::http as http_header;
use skiff_api::proto::stream::{
    StreamConfig, TransportConfig, grpc, httpupgrade, reality, tcp, tls, websocket,
};
use skiff_config::{
    FallbackDest, FallbackPlan, HttpHeaderPlan, InboundPlan, InboundProtocol, RealityPlan,
    RealityTarget, ShadowsocksInbound, SniffProtocol, SniffingPlan, StreamNetwork, StreamPlan,
    StreamSecurity, TlsPlan,
};

use crate::inbound::InboundHandler;

/// `plan` as ListInbounds reports it, with the users `handler` has now. `receiver`: the
/// receiver settings an AddInbound request gave, which Xray lists as given.
pub fn inbound_config(
    plan: &InboundPlan,
    handler: &InboundHandler,
    receiver: Option<TypedMessage>,
) -> InboundHandlerConfig {
    InboundHandlerConfig {
        tag: plan.tag.clone(),
        receiver_settings: Some(receiver.unwrap_or_else(|| {
            typed_message("xray.app.proxyman.ReceiverConfig", &receiver_config(plan))
        })),
        proxy_settings: Some(proxy_settings(plan, handler)),
    }
}

fn receiver_config(plan: &InboundPlan) -> ReceiverConfig {
    ReceiverConfig {
        port_list: Some(PortList {
            range: plan
                .ports
                .iter()
                .map(|r| PortRange {
                    from: u32::from(r.first),
                    to: u32::from(r.last),
                })
                .collect(),
        }),
        listen: Some(ip_or_domain_of(plan.listen)),
        stream_settings: plan
            .stream
            .written
            .stream_settings
            .then(|| stream_config(&plan.stream)),
        receive_original_destination: matches!(&plan.protocol, InboundProtocol::Tunnel(t) if t.follow_redirect),
        sniffing_settings: plan.sniffing.as_ref().map(sniffing_config),
    }
}

fn ip_or_domain_of(ip: IpAddr) -> IpOrDomain {
    IpOrDomain {
        address: Some(ip_or_domain::Address::Ip(match ip {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        })),
    }
}

fn networks(n: &skiff_core::Networks) -> Vec<i32> {
    let mut list = Vec::new();
    if n.tcp {
        list.push(Network::Tcp as i32);
    }
    if n.udp {
        list.push(Network::Udp as i32);
    }
    list
}

fn sniffing_config(s: &SniffingPlan) -> SniffingConfig {
    SniffingConfig {
        enabled: true,
        destination_override: s
            .dest_override
            .iter()
            .map(|p| {
                match p {
                    SniffProtocol::Http => "http",
                    SniffProtocol::Tls => "tls",
                    SniffProtocol::Quic => "quic",
                }
                .to_string()
            })
            .collect(),
        metadata_only: s.metadata_only,
        route_only: s.route_only,
        ..SniffingConfig::default()
    }
}

/// `streamSettings` as Xray's loader builds it: the network by Xray's protocol name, the
/// settings object of the transport in use when the config wrote one, then the security.
fn stream_config(stream: &StreamPlan) -> StreamConfig {
    let written = stream.written.transport_settings;
    let (name, settings) = match &stream.network {
        StreamNetwork::Tcp => (
            "tcp",
            written.then(|| {
                typed_message(
                    "xray.transport.internet.tcp.Config",
                    &tcp::Config {
                        header_settings: stream.written.raw_header.then(|| {
                            typed_message(
                                "xray.transport.internet.headers.noop.ConnectionConfig",
                                &(),
                            )
                        }),
                        accept_proxy_protocol: false,
                    },
                )
            }),
        ),
        StreamNetwork::HttpHeader(header) => (
            "tcp",
            Some(typed_message(
                "xray.transport.internet.tcp.Config",
                &tcp::Config {
                    header_settings: Some(typed_message(
                        "xray.transport.internet.headers.http.Config",
                        &http_header_config(header),
                    )),
                    accept_proxy_protocol: false,
                },
            )),
        ),
        StreamNetwork::Ws(ws) => (
            "websocket",
            written.then(|| {
                let (path, ed) = path_and_early_data(&ws.path);
                typed_message(
                    "xray.transport.internet.websocket.Config",
                    &websocket::Config {
                        host: ws.host.clone().unwrap_or_default(),
                        path,
                        header: ws.headers.iter().cloned().collect(),
                        accept_proxy_protocol: ws.accept_proxy_protocol,
                        ed,
                        heartbeat_period: 0,
                    },
                )
            }),
        ),
        StreamNetwork::HttpUpgrade(h) => (
            "httpupgrade",
            written.then(|| {
                let (path, ed) = path_and_early_data(&h.path);
                typed_message(
                    "xray.transport.internet.httpupgrade.Config",
                    &httpupgrade::Config {
                        host: h.host.clone().unwrap_or_default(),
                        path,
                        header: h.headers.iter().cloned().collect(),
                        accept_proxy_protocol: false,
                        ed,
                    },
                )
            }),
        ),
        StreamNetwork::Grpc(g) => (
            "grpc",
            written.then(|| {
                typed_message(
                    "xray.transport.internet.grpc.encoding.Config",
                    &grpc::encoding::Config {
                        authority: g.authority.clone().unwrap_or_default(),
                        service_name: g.service_name.clone(),
                        multi_mode: g.multi_mode,
                        idle_timeout: clamp_i32(g.idle_timeout),
                        health_check_timeout: clamp_i32(g.health_check_timeout),
                        permit_without_stream: g.permit_without_stream,
                        initial_windows_size: clamp_i32(g.initial_windows_size),
                        user_agent: g.user_agent.clone(),
                    },
                )
            }),
        ),
        // Listed by name only (see the module's note).
        StreamNetwork::Xhttp(_) => ("splithttp", None),
        StreamNetwork::Mkcp(_) => ("mkcp", None),
        StreamNetwork::Kcptun(_) => ("kcptun", None),
    };
    let (security_type, security_settings) = match &stream.security {
        StreamSecurity::None => (String::new(), Vec::new()),
        StreamSecurity::Tls(t) => {
            let name = "xray.transport.internet.tls.Config";
            (name.to_string(), vec![typed_message(name, &tls_config(t))])
        }
        StreamSecurity::Reality(r) => {
            let name = "xray.transport.internet.reality.Config";
            (
                name.to_string(),
                vec![typed_message(name, &reality_config(r))],
            )
        }
    };
    StreamConfig {
        protocol_name: name.into(),
        transport_settings: settings
            .map(|settings| TransportConfig {
                protocol_name: name.into(),
                settings: Some(settings),
            })
            .into_iter()
            .collect(),
        security_type,
        security_settings,
        ..StreamConfig::default()
    }
}

fn clamp_i32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// A path as Xray's loader splits it: the `ed` query parameter (early data) taken out into
/// its own number, the rest of the query kept (Go re-encodes it sorted by key).
fn path_and_early_data(path: &str) -> (String, u32) {
    let Some((base, query)) = path.split_once('?') else {
        return (path.to_string(), 0);
    };
    let mut pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    let Some(ed) = pairs
        .iter()
        .find(|(k, _)| *k == "ed")
        .map(|(_, v)| *v)
        .filter(|v| !v.is_empty())
    else {
        return (path.to_string(), 0);
    };
    let ed = ed.parse().unwrap_or(0);
    pairs.retain(|(k, _)| *k != "ed");
    pairs.sort_by_key(|(k, _)| *k);
    let rest: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if rest.is_empty() {
        (base.to_string(), ed)
    } else {
        (format!("{base}?{}", rest.join("&")), ed)
    }
}

fn http_header_config(plan: &HttpHeaderPlan) -> http_header::Config {
    let headers = |list: &[(String, Vec<String>)]| -> Vec<http_header::Header> {
        list.iter()
            .map(|(name, value)| http_header::Header {
                name: name.clone(),
                value: value.clone(),
            })
            .collect()
    };
    let request = &plan.request;
    let response = &plan.response;
    http_header::Config {
        request: Some(http_header::RequestConfig {
            version: Some(http_header::Version {
                value: request.version.clone(),
            }),
            method: Some(http_header::Method {
                value: request.method.clone(),
            }),
            uri: request.paths.clone(),
            header: headers(
                request
                    .headers
                    .as_deref()
                    .unwrap_or(&skiff_transport::http_header::defaults::request_headers()),
            ),
        }),
        response: Some(http_header::ResponseConfig {
            version: Some(http_header::Version {
                value: response.version.clone(),
            }),
            status: Some(http_header::Status {
                code: response.status.clone(),
                reason: response.reason.clone(),
            }),
            header: headers(
                response
                    .headers
                    .as_deref()
                    .unwrap_or(&skiff_transport::http_header::defaults::response_headers()),
            ),
        }),
    }
}

/// `tlsSettings` as Xray's loader builds it: each certificate's PEM (read from its files, as
/// Xray reads them) with the files' names, or marked one-time when given inline.
fn tls_config(t: &TlsPlan) -> tls::Config {
    tls::Config {
        certificate: t
            .certificates
            .iter()
            .map(|c| tls::Certificate {
                certificate: c.certificate_pem.as_bytes().to_vec(),
                key: c.key_pem.as_bytes().to_vec(),
                certificate_path: c.certificate_file.clone().unwrap_or_default(),
                key_path: c.key_file.clone().unwrap_or_default(),
                one_time_loading: c.certificate_file.is_none() && c.key_file.is_none(),
                ..tls::Certificate::default()
            })
            .collect(),
        server_name: t.server_name.clone().unwrap_or_default(),
        next_protocol: t.alpn.clone(),
        min_version: t.min_version.clone().unwrap_or_default(),
        max_version: t.max_version.clone().unwrap_or_default(),
        fingerprint: t.fingerprint.clone().unwrap_or_default(),
        reject_unknown_sni: t.reject_unknown_sni,
        pinned_peer_cert_sha256: t
            .pinned_peer_cert_sha256
            .iter()
            .map(|d| d.to_vec())
            .collect(),
        ..tls::Config::default()
    }
}

/// An inbound's `realitySettings` as Xray's loader builds it (the target's forms as a
/// fallback's, both rate limits always present).
fn reality_config(r: &RealityPlan) -> reality::Config {
    let Some(server) = &r.server else {
        return reality::Config {
            show: r.show,
            ..reality::Config::default()
        };
    };
    let (kind, dest) = match &server.target {
        RealityTarget::Tcp { host, port } => ("tcp", host_port(host, *port)),
        RealityTarget::Unix(path) => ("unix", unix_dest(path)),
    };
    let limit = |l: &skiff_config::RealityLimitPlan| reality::LimitFallback {
        after_bytes: l.after_bytes,
        bytes_per_sec: l.bytes_per_sec,
        burst_bytes_per_sec: l.burst_bytes_per_sec,
    };
    reality::Config {
        show: r.show,
        dest,
        r#type: kind.into(),
        xver: u64::from(server.xver),
        server_names: server.server_names.clone(),
        private_key: server.private_key.to_vec(),
        min_client_ver: server.min_client_ver.to_vec(),
        max_client_ver: server
            .max_client_ver
            .map(|v| v.to_vec())
            .unwrap_or_default(),
        max_time_diff: server.max_time_diff_ms,
        short_ids: server.short_ids.iter().map(|id| id.to_vec()).collect(),
        limit_fallback_upload: Some(limit(&server.limit_fallback_upload)),
        limit_fallback_download: Some(limit(&server.limit_fallback_download)),
        ..reality::Config::default()
    }
}

/// `host:port` as Go joins them (an IPv6 host in brackets).
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A unix socket destination as Xray stores it: "@@name" is the name without its first "@",
/// padded with zero bytes to the length of sockaddr_un's path (for HAProxy).
fn unix_dest(name: &str) -> String {
    match name.strip_prefix('@') {
        Some(rest) if rest.starts_with('@') => {
            let mut padded = rest.to_string();
            while padded.len() < 108 {
                padded.push('\0');
            }
            padded
        }
        _ => name.to_string(),
    }
}

/// A fallback as Xray's loader stores it: a bare port becomes `localhost:PORT`, and the type
/// is derived from the destination.
fn fallback(f: &FallbackPlan) -> Fallback {
    let (kind, dest) = match &f.dest {
        FallbackDest::Port(port) => ("tcp", format!("localhost:{port}")),
        FallbackDest::Addr(host, port) => ("tcp", host_port(host, *port)),
        FallbackDest::Unix(path) => ("unix", path.display().to_string()),
        FallbackDest::AbstractUnix(name) => ("unix", unix_dest(name)),
    };
    Fallback {
        name: f.name.clone().unwrap_or_default(),
        alpn: f.alpn.clone().unwrap_or_default(),
        path: f.path.clone().unwrap_or_default(),
        r#type: kind.into(),
        dest,
        xver: u64::from(f.xver),
    }
}

fn shadowsocks_settings(ss: &ShadowsocksInbound, users: Vec<ApiUser>) -> TypedMessage {
    let method = ss
        .users
        .first()
        .map(|u| u.method.name())
        .unwrap_or_default();
    if let Some(identity) = &ss.identity_key {
        return typed_message(
            "xray.proxy.shadowsocks_2022.MultiUserServerConfig",
            &Shadowsocks2022MultiUserServerConfig {
                method: method.into(),
                key: skiff_transport::base64::encode_std(&identity.0),
                users: users.iter().map(user_to_proto).collect(),
                network: networks(&ss.network),
            },
        );
    }
    if method.starts_with("2022-") {
        let user = ss.users.first();
        return typed_message(
            "xray.proxy.shadowsocks_2022.ServerConfig",
            &Shadowsocks2022ServerConfig {
                method: method.into(),
                key: user.map(|u| u.password.0.clone()).unwrap_or_default(),
                email: user.and_then(|u| u.email.clone()).unwrap_or_default(),
                level: 0,
                network: networks(&ss.network),
            },
        );
    }
    typed_message(
        "xray.proxy.shadowsocks.ServerConfig",
        &ShadowsocksServerConfig {
            users: users.iter().map(user_to_proto).collect(),
            network: networks(&ss.network),
        },
    )
}

fn proxy_settings(plan: &InboundPlan, handler: &InboundHandler) -> TypedMessage {
    let users = || -> Vec<ApiUser> {
        handler
            .users
            .as_ref()
            .map(|u| u.list(None))
            .unwrap_or_default()
    };
    let protos = |users: Vec<ApiUser>| -> Vec<User> { users.iter().map(user_to_proto).collect() };
    let accounts = |list: &[skiff_config::Account]| {
        list.iter()
            .map(|a| (a.user.clone(), a.pass.clone()))
            .collect()
    };
    match &plan.protocol {
        InboundProtocol::Vless(v) => typed_message(
            "xray.proxy.vless.inbound.Config",
            &VlessInboundConfig {
                users: protos(users()),
                fallbacks: v.fallbacks.iter().map(fallback).collect(),
                decryption: "none".into(),
                ..VlessInboundConfig::default()
            },
        ),
        InboundProtocol::Vmess(v) => typed_message(
            "xray.proxy.vmess.inbound.Config",
            &VmessInboundConfig {
                // The config's security, not the one it resolves to (which GetInboundUsers
                // reports): a user without one says auto.
                user: users()
                    .into_iter()
                    .zip(&v.clients)
                    .map(|(mut user, client)| {
                        if let Account::Vmess { security, .. } = &mut user.account {
                            *security =
                                vmess_security(client.security.as_deref().unwrap_or("auto"));
                        }
                        user_to_proto(&user)
                    })
                    .collect(),
                default: None,
            },
        ),
        InboundProtocol::Trojan(t) => typed_message(
            "xray.proxy.trojan.ServerConfig",
            &TrojanServerConfig {
                users: protos(users()),
                fallbacks: t.fallbacks.iter().map(fallback).collect(),
            },
        ),
        InboundProtocol::Shadowsocks(ss) => shadowsocks_settings(ss, users()),
        InboundProtocol::Socks(s) => typed_message(
            "xray.proxy.socks.ServerConfig",
            &SocksServerConfig {
                auth_type: i32::from(!s.accounts.is_empty()),
                accounts: accounts(&s.accounts),
                address: s.announce_ip.map(ip_or_domain_of),
                udp_enabled: s.udp,
                user_level: s.user_level,
            },
        ),
        InboundProtocol::Http(h) => typed_message(
            "xray.proxy.http.ServerConfig",
            &HttpServerConfig {
                accounts: accounts(&h.accounts),
                allow_transparent: h.allow_transparent,
                user_level: h.user_level,
            },
        ),
        InboundProtocol::Tunnel(t) => typed_message(
            "xray.proxy.dokodemo.Config",
            &DokodemoConfig {
                rewrite_address: t.address.as_deref().map(|a| match a.parse::<IpAddr>() {
                    Ok(ip) => ip_or_domain_of(ip),
                    Err(_) => IpOrDomain {
                        address: Some(ip_or_domain::Address::Domain(a.to_string())),
                    },
                }),
                rewrite_port: u32::from(t.port),
                follow_redirect: t.follow_redirect,
                user_level: t.user_level,
                allowed_networks: networks(&t.network),
                ..DokodemoConfig::default()
            },
        ),
        // Skiff's own protocols have no Xray message: listed by a type name of Skiff's.
        InboundProtocol::Kcptun(_) => typed_message("skiff.proxy.kcptun.Config", &()),
        InboundProtocol::Udpspeeder(_) => typed_message("skiff.proxy.udpspeeder.Config", &()),
        InboundProtocol::Udp2raw(_) => typed_message("skiff.proxy.udp2raw.Config", &()),
    }
}

#[cfg(test)]
mod tests {
    use super::path_and_early_data;

    #[test]
    fn early_data_leaves_the_path_as_xray_splits_it() {
        assert_eq!(path_and_early_data("/w"), ("/w".into(), 0));
        assert_eq!(path_and_early_data("/w?ed=2048"), ("/w".into(), 2048));
        assert_eq!(
            path_and_early_data("/w?x=1&ed=9&a=2"),
            ("/w?a=2&x=1".into(), 9)
        );
        assert_eq!(path_and_early_data("/w?ed="), ("/w?ed=".into(), 0));
        assert_eq!(path_and_early_data("/w?ed=no"), ("/w".into(), 0));
    }
}
