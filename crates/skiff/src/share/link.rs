//! The share links clients import: `vless://` as in XTLS's share-link proposal (the query keys
//! v2rayN and its kin read), `vmess://` as v2rayN's base64 JSON, `trojan://`, and `ss://` as
//! SIP002 (base64 user info for AEAD-2017, percent-encoded for 2022, as SIP002 asks).

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::endpoint::{Credential, Endpoint, Security, Transport};

/// RFC 3986's unreserved characters stay as they are; everything else is escaped.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn escape(text: &str) -> String {
    utf8_percent_encode(text, COMPONENT).to_string()
}

/// The link for one endpoint.
pub fn link(e: &Endpoint) -> String {
    match &e.credential {
        Credential::Vless { id, flow } => {
            let mut query = vec![("encryption", "none".to_string())];
            if let Some(flow) = flow {
                query.push(("flow", flow.to_string()));
            }
            query.extend(security_query(&e.security));
            query.extend(transport_query(&e.transport));
            url("vless", id, e, &query)
        }
        Credential::Trojan { password } => {
            let mut query = security_query(&e.security);
            query.extend(transport_query(&e.transport));
            url("trojan", password, e, &query)
        }
        Credential::Vmess { id } => format!("vmess://{}", STANDARD.encode(vmess_json(e, id))),
        Credential::Shadowsocks { method, password } => {
            let user_info = if method.starts_with("2022-") {
                format!("{}:{}", escape(method), escape(password))
            } else {
                URL_SAFE_NO_PAD.encode(format!("{method}:{password}"))
            };
            format!(
                "ss://{user_info}@{}:{}#{}",
                host(&e.address),
                e.port,
                escape(&e.remark())
            )
        }
    }
}

fn url(scheme: &str, user: &str, e: &Endpoint, query: &[(&str, String)]) -> String {
    let query: Vec<String> = query
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| format!("{key}={}", escape(value)))
        .collect();
    format!(
        "{scheme}://{}@{}:{}?{}#{}",
        escape(user),
        host(&e.address),
        e.port,
        query.join("&"),
        escape(&e.remark())
    )
}

/// An IPv6 literal goes in brackets.
fn host(address: &str) -> String {
    if address.contains(':') {
        format!("[{address}]")
    } else {
        address.to_string()
    }
}

fn security_query(security: &Security) -> Vec<(&'static str, String)> {
    match security {
        Security::None => vec![("security", "none".into())],
        Security::Tls {
            server_name,
            alpn,
            pinned_sha256,
        } => vec![
            ("security", "tls".into()),
            ("sni", server_name.clone().unwrap_or_default()),
            ("alpn", alpn.join(",")),
            ("pcs", pinned_sha256.clone().unwrap_or_default()),
        ],
        Security::Reality {
            server_name,
            public_key,
            short_id,
        } => vec![
            ("security", "reality".into()),
            ("sni", server_name.clone()),
            // REALITY only works with a browser's ClientHello; Chrome's is Xray's default.
            ("fp", "chrome".into()),
            ("pbk", public_key.clone()),
            ("sid", short_id.clone()),
            ("spx", "/".into()),
        ],
    }
}

fn transport_query(t: &Transport) -> Vec<(&'static str, String)> {
    vec![
        ("type", t.network.to_string()),
        ("headerType", t.header_type.unwrap_or_default().to_string()),
        ("host", t.host.clone().unwrap_or_default()),
        ("path", t.path.clone().unwrap_or_default()),
        ("serviceName", t.service_name.clone().unwrap_or_default()),
        ("mode", t.mode.unwrap_or_default().to_string()),
    ]
}

/// v2rayN's VMess JSON: every value a string, as v2rayN writes it.
fn vmess_json(e: &Endpoint, id: &str) -> String {
    let (tls, sni, alpn) = match &e.security {
        // v2rayN's VMess JSON has no REALITY fields (REALITY is a VLESS setup).
        Security::None | Security::Reality { .. } => ("", String::new(), String::new()),
        Security::Tls {
            server_name, alpn, ..
        } => (
            "tls",
            server_name.clone().unwrap_or_default(),
            alpn.join(","),
        ),
    };
    serde_json::json!({
        "v": "2",
        "ps": e.remark(),
        "add": e.address,
        "port": e.port.to_string(),
        "id": id,
        "aid": "0",
        "scy": "auto",
        "net": e.transport.network,
        "type": e.transport.header_type.unwrap_or("none"),
        "host": e.transport.host.clone().unwrap_or_default(),
        "path": e.transport.path.clone().unwrap_or_default(),
        "tls": tls,
        "sni": sni,
        "alpn": alpn,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(credential: Credential) -> Endpoint {
        Endpoint {
            tag: "in".into(),
            email: Some("a@b c".into()),
            address: "example.com".into(),
            port: 443,
            credential,
            transport: Transport {
                network: "ws",
                header_type: None,
                host: Some("h.example".into()),
                path: Some("/p?ed=2048".into()),
                ..Transport::default()
            },
            security: Security::Tls {
                server_name: Some("example.com".into()),
                alpn: vec!["h2".into(), "http/1.1".into()],
                pinned_sha256: None,
            },
        }
    }

    #[test]
    fn vless_link_escapes_every_value() {
        let e = endpoint(Credential::Vless {
            id: "b831381d-6324-4d53-ad4f-8cda48b30811".into(),
            flow: None,
        });
        assert_eq!(
            link(&e),
            "vless://b831381d-6324-4d53-ad4f-8cda48b30811@example.com:443?encryption=none&security=tls&sni=example.com&alpn=h2%2Chttp%2F1.1&type=ws&host=h.example&path=%2Fp%3Fed%3D2048#a%40b%20c"
        );
    }

    #[test]
    fn ss_2017_is_base64_and_2022_is_percent_encoded() {
        let mut e = endpoint(Credential::Shadowsocks {
            method: "aes-128-gcm",
            password: "pass:word".into(),
        });
        e.address = "::1".into();
        assert_eq!(
            link(&e),
            format!(
                "ss://{}@[::1]:443#a%40b%20c",
                URL_SAFE_NO_PAD.encode("aes-128-gcm:pass:word")
            )
        );
        e.credential = Credential::Shadowsocks {
            method: "2022-blake3-aes-128-gcm",
            password: "AAAA+/==:BBBB".into(),
        };
        assert_eq!(
            link(&e),
            "ss://2022-blake3-aes-128-gcm:AAAA%2B%2F%3D%3D%3ABBBB@[::1]:443#a%40b%20c"
        );
    }

    #[test]
    fn vless_reality_link_has_the_share_proposals_fields() {
        let mut e = endpoint(Credential::Vless {
            id: "b831381d-6324-4d53-ad4f-8cda48b30811".into(),
            flow: Some("xtls-rprx-vision"),
        });
        e.transport = Transport {
            network: "tcp",
            ..Transport::default()
        };
        e.security = Security::Reality {
            server_name: "www.example.com".into(),
            public_key: "PUB_key-0".into(),
            short_id: "6ba8".into(),
        };
        assert_eq!(
            link(&e),
            "vless://b831381d-6324-4d53-ad4f-8cda48b30811@example.com:443?encryption=none&flow=xtls-rprx-vision&security=reality&sni=www.example.com&fp=chrome&pbk=PUB_key-0&sid=6ba8&spx=%2F&type=tcp#a%40b%20c"
        );
    }

    #[test]
    fn vmess_link_is_v2rayn_json() {
        let e = endpoint(Credential::Vmess {
            id: "b831381d-6324-4d53-ad4f-8cda48b30811".into(),
        });
        let text = link(&e);
        let json = STANDARD
            .decode(text.strip_prefix("vmess://").unwrap())
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["port"], "443");
        assert_eq!(v["net"], "ws");
        assert_eq!(v["tls"], "tls");
        assert_eq!(v["path"], "/p?ed=2048");
        assert_eq!(v["ps"], "a@b c");
    }
}
