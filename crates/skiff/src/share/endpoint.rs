//! What a client needs to reach one user of one inbound: read from the validated plan, so a
//! link is only ever made from a config `skiff run` would accept.

use std::net::IpAddr;

use skiff_config::{
    InboundPlan, InboundProtocol, Plan, StreamNetwork, StreamPlan, StreamSecurity, VlessFlow,
    XhttpMode,
};

/// One user of one inbound, as a client dials it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The inbound's tag ("" when it has none).
    pub tag: String,
    /// The user's `email`, when the config gives one.
    pub email: Option<String>,
    /// What the client dials: `--address`, else the inbound's own listen address.
    pub address: String,
    pub port: u16,
    pub credential: Credential,
    pub transport: Transport,
    pub security: Security,
}

impl Endpoint {
    /// The name a client shows for this server: the user's email, else the inbound's tag.
    pub fn remark(&self) -> String {
        match (&self.email, self.tag.is_empty()) {
            (Some(email), _) => email.clone(),
            (None, false) => self.tag.clone(),
            (None, true) => "skiff".into(),
        }
    }
}

/// The protocol and the user's secret in it.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    Vless {
        id: String,
        flow: Option<&'static str>,
    },
    Vmess {
        id: String,
    },
    Trojan {
        password: String,
    },
    Shadowsocks {
        method: &'static str,
        password: String,
    },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a secret, even in a debug dump.
        f.write_str(match self {
            Credential::Vless { .. } => "Vless(<id>)",
            Credential::Vmess { .. } => "Vmess(<id>)",
            Credential::Trojan { .. } => "Trojan(<password>)",
            Credential::Shadowsocks { .. } => "Shadowsocks(<password>)",
        })
    }
}

/// `streamSettings.network` and what a client must send for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transport {
    /// Share-link `type`: `tcp`, `ws`, `httpupgrade`, `kcp`.
    pub network: &'static str,
    /// `headerType`: `http` for raw TCP's HTTP header obfuscation.
    pub header_type: Option<&'static str>,
    pub host: Option<String>,
    pub path: Option<String>,
    /// `serviceName` (gRPC).
    pub service_name: Option<String>,
    /// `mode`: gRPC's `gun` or `multi`, XHTTP's `auto`, `packet-up`, `stream-up`, `stream-one`.
    pub mode: Option<&'static str>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Security {
    #[default]
    None,
    Tls {
        /// `sni`: the inbound's `serverName`, else the address when it is a name.
        server_name: Option<String>,
        alpn: Vec<String>,
        /// `pcs`: the SHA-256 of the server's certificate, hex, when `--pin` asks for it.
        pinned_sha256: Option<String>,
    },
    Reality {
        /// `sni`: the first of the server's `serverNames`.
        server_name: String,
        /// `pbk`: the server's public key, base64url as `xray x25519` prints it.
        public_key: String,
        /// `sid`: the first short id, hex ("" when the server allows an empty one).
        short_id: String,
    },
}

/// What `skiff share` was asked for.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub inbound: Option<String>,
    pub user: Option<String>,
    pub address: Option<String>,
    pub pin: bool,
}

/// Every endpoint the selection names with a line for each selected inbound that has none,
/// or why there is nothing at all.
pub fn endpoints(
    plan: &Plan,
    selection: &Selection,
) -> Result<(Vec<Endpoint>, Vec<String>), String> {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for inbound in &plan.inbounds {
        if selection
            .inbound
            .as_ref()
            .is_some_and(|t| *t != inbound.tag)
        {
            continue;
        }
        match of_inbound(inbound, selection) {
            Ok(list) => found.extend(list),
            Err(why) => skipped.push(format!("inbound `{}`: {why}", inbound.tag)),
        }
    }
    if let Some(email) = &selection.user {
        found.retain(|e| e.email.as_deref() == Some(email.as_str()));
    }
    if found.is_empty() {
        let mut message = String::from("nothing to share");
        if let Some(tag) = &selection.inbound {
            message.push_str(&format!(" in inbound `{tag}`"));
        }
        if let Some(email) = &selection.user {
            message.push_str(&format!(" for user `{email}`"));
        }
        for line in skipped {
            message.push_str(&format!("\n  {line}"));
        }
        return Err(message);
    }
    Ok((found, skipped))
}

fn of_inbound(inbound: &InboundPlan, selection: &Selection) -> Result<Vec<Endpoint>, String> {
    let credentials: Vec<(Credential, Option<String>)> = match &inbound.protocol {
        InboundProtocol::Vless(v) => v
            .clients
            .iter()
            .map(|c| {
                let flow = match c.flow {
                    VlessFlow::None => None,
                    VlessFlow::Vision | VlessFlow::VisionUdp443 => Some("xtls-rprx-vision"),
                };
                let id = uuid_text(&c.id);
                (Credential::Vless { id, flow }, c.email.clone())
            })
            .collect(),
        InboundProtocol::Vmess(v) => v
            .clients
            .iter()
            .map(|c| {
                let id = uuid_text(&c.id);
                (Credential::Vmess { id }, c.email.clone())
            })
            .collect(),
        InboundProtocol::Trojan(t) => t
            .clients
            .iter()
            .map(|c| {
                let password = c.password.clone();
                (Credential::Trojan { password }, c.email.clone())
            })
            .collect(),
        InboundProtocol::Shadowsocks(s) => {
            // Multi-user 2022: a client sends the server's key, then its own (SIP023).
            let server_key = s.identity_key.as_ref().map(|k| base64_std(&k.0));
            s.users
                .iter()
                .map(|u| {
                    let password = match &server_key {
                        Some(server) => format!("{server}:{}", u.password.0),
                        None => u.password.0.clone(),
                    };
                    let method = u.method.name();
                    (
                        Credential::Shadowsocks { method, password },
                        u.email.clone(),
                    )
                })
                .collect()
        }
        _ => return Err("its protocol has no share link".into()),
    };
    let address = match &selection.address {
        Some(address) => address.clone(),
        None if inbound.listen.is_unspecified() => {
            return Err(format!(
                "it listens on every address ({}); say which one clients dial with --address",
                inbound.listen
            ));
        }
        None => inbound.listen.to_string(),
    };
    let port = inbound
        .ports
        .first()
        .map(|r| r.first)
        .ok_or("it has no port")?;
    let transport = transport(&inbound.stream)?;
    let security = security(&inbound.stream, &address, selection.pin)?;
    if matches!(security, Security::Reality { .. })
        && matches!(
            inbound.protocol,
            InboundProtocol::Vmess(_) | InboundProtocol::Shadowsocks(_)
        )
    {
        return Err("vmess:// and ss:// links have no REALITY fields".into());
    }
    Ok(credentials
        .into_iter()
        .map(|(credential, email)| Endpoint {
            tag: inbound.tag.clone(),
            email,
            address: address.clone(),
            port,
            credential,
            transport: transport.clone(),
            security: security.clone(),
        })
        .collect())
}

fn transport(stream: &StreamPlan) -> Result<Transport, String> {
    Ok(match &stream.network {
        StreamNetwork::Tcp => Transport {
            network: "tcp",
            ..Transport::default()
        },
        StreamNetwork::HttpHeader(h) => Transport {
            network: "tcp",
            header_type: Some("http"),
            host: h.request.headers.as_ref().and_then(|headers| {
                headers
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case("host"))
                    .and_then(|(_, values)| values.first().cloned())
            }),
            path: h.request.paths.first().cloned(),
            ..Transport::default()
        },
        StreamNetwork::Ws(w) => Transport {
            network: "ws",
            host: w.host.clone(),
            path: Some(w.path.clone()),
            ..Transport::default()
        },
        StreamNetwork::HttpUpgrade(h) => Transport {
            network: "httpupgrade",
            host: h.host.clone(),
            path: Some(h.path.clone()),
            ..Transport::default()
        },
        StreamNetwork::Grpc(g) => Transport {
            network: "grpc",
            service_name: Some(g.service_name.clone()),
            mode: Some(if g.multi_mode { "multi" } else { "gun" }),
            ..Transport::default()
        },
        StreamNetwork::Xhttp(x) => Transport {
            network: "xhttp",
            host: x.host.clone(),
            path: Some(x.path.clone()),
            mode: Some(match x.mode {
                XhttpMode::Auto => "auto",
                XhttpMode::PacketUp => "packet-up",
                XhttpMode::StreamUp => "stream-up",
                XhttpMode::StreamOne => "stream-one",
            }),
            ..Transport::default()
        },
        StreamNetwork::Mkcp(_) => Transport {
            network: "kcp",
            ..Transport::default()
        },
        StreamNetwork::Kcptun(_) => {
            return Err("the kcptun network has no share-link form".into());
        }
    })
}

fn security(stream: &StreamPlan, address: &str, pin: bool) -> Result<Security, String> {
    Ok(match &stream.security {
        StreamSecurity::None => Security::None,
        StreamSecurity::Tls(t) => {
            let server_name = t.server_name.clone().or_else(|| {
                address
                    .parse::<IpAddr>()
                    .is_err()
                    .then(|| address.to_string())
            });
            let pinned_sha256 = match pin {
                false => None,
                true => {
                    let pem = &t
                        .certificates
                        .first()
                        .ok_or("--pin: the inbound has no certificate")?
                        .certificate_pem;
                    Some(certificate_sha256(pem)?)
                }
            };
            Security::Tls {
                server_name,
                alpn: t.alpn.clone(),
                pinned_sha256,
            }
        }
        StreamSecurity::Reality(r) => {
            let server = r
                .server
                .as_ref()
                .ok_or("its REALITY settings are a client's")?;
            let server_name = server
                .server_names
                .first()
                .cloned()
                .ok_or("its REALITY settings list no serverNames")?;
            let public_key = {
                use base64::Engine;
                let public = skiff_crypto::x25519::public_key(&server.private_key);
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(public)
            };
            // Stored zero-padded to 8 bytes; trailing zero bytes authenticate the same either
            // way, so the shortest form is given.
            let short_id = server
                .short_ids
                .first()
                .map(|id| {
                    let len = id.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
                    id[..len].iter().map(|b| format!("{b:02x}")).collect()
                })
                .unwrap_or_default();
            Security::Reality {
                server_name,
                public_key,
                short_id,
            }
        }
    })
}

/// The SHA-256 of the first certificate in a PEM text, as hex (what Xray's
/// `pinnedPeerCertSha256` takes).
fn certificate_sha256(pem: &str) -> Result<String, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let der = CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .ok_or("--pin: no certificate in the inbound's PEM")?
        .map_err(|e| format!("--pin: the inbound's certificate: {e}"))?;
    Ok(skiff_crypto::hash::sha256(&[der.as_ref()])
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn uuid_text(id: &[u8; 16]) -> String {
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

fn base64_std(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
