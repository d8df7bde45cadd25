//! A whole handler as AddInbound and AddOutbound carry it (`xray.core.InboundHandlerConfig`,
//! `xray.core.OutboundHandlerConfig`: Xray's CLI builds them from a config file's `inbounds`
//! and `outbounds`) turned back into the JSON object of Xray's config that says the same, so
//! the app builds it with the same code, and the same checks, as an inbound or outbound of
//! the config file. Sans-IO: bytes in, JSON out.
//!
//! What Skiff does not run is refused here by name ([`ConfigError::Unsupported`]), never
//! dropped: a field this module does not translate is either refused or one Xray itself
//! ignores for this handler. Values the JSON form can carry but Skiff refuses (a
//! certificate usage other than encipherment, say) are left to the config's own checks.

use std::net::IpAddr;

use prost::Message;
use serde_json::{Map, Value, json};

use crate::proto::core::{InboundHandlerConfig, OutboundHandlerConfig};
use crate::proto::net::{IpOrDomain, Network, PortList, ip_or_domain};
use crate::proto::protocol::{ServerEndpoint, User};
use crate::proto::proxy::{
    BlackholeConfig, DokodemoConfig, Fallback, FreedomConfig, HttpServerConfig, ServerClientConfig,
    Shadowsocks2022ClientConfig, Shadowsocks2022MultiUserServerConfig, Shadowsocks2022ServerConfig,
    ShadowsocksAccount, ShadowsocksServerConfig, SocksAccount, SocksServerConfig, TrojanAccount,
    TrojanServerConfig, VlessAccount, VlessInboundConfig, VlessOutboundConfig, VmessAccount,
    VmessInboundConfig, VmessOutboundConfig,
};
use crate::proto::receiver::{ReceiverConfig, SenderConfig, SniffingConfig};
use crate::proto::serial::TypedMessage;
use crate::proto::stream::{StreamConfig, tcp, tls, websocket};

/// Why a handler config cannot be started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// Something Skiff does not run (yet), named as Xray's config names it.
    Unsupported(String),
    /// Bytes that are not the message their type names, or a required part missing.
    Malformed(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Unsupported(what) => {
                write!(f, "{what} is not supported by this version of skiff yet")
            }
            ConfigError::Malformed(why) => f.write_str(why),
        }
    }
}

fn unsupported(what: impl Into<String>) -> ConfigError {
    ConfigError::Unsupported(what.into())
}

fn malformed(why: impl Into<String>) -> ConfigError {
    ConfigError::Malformed(why.into())
}

/// Xray's type names of the messages read here.
mod ty {
    pub const RECEIVER: &str = "xray.app.proxyman.ReceiverConfig";
    pub const SENDER: &str = "xray.app.proxyman.SenderConfig";
    pub const TLS: &str = "xray.transport.internet.tls.Config";
    pub const REALITY: &str = "xray.transport.internet.reality.Config";
    pub const TCP: &str = "xray.transport.internet.tcp.Config";
    pub const WEBSOCKET: &str = "xray.transport.internet.websocket.Config";
    pub const NOOP_HEADER: &str = "xray.transport.internet.headers.noop.ConnectionConfig";
    pub const NOOP_HEADER_OLD: &str = "xray.transport.internet.headers.noop.Config";
    pub const VLESS_IN: &str = "xray.proxy.vless.inbound.Config";
    pub const VLESS_OUT: &str = "xray.proxy.vless.outbound.Config";
    pub const VMESS_IN: &str = "xray.proxy.vmess.inbound.Config";
    pub const VMESS_OUT: &str = "xray.proxy.vmess.outbound.Config";
    pub const TROJAN_IN: &str = "xray.proxy.trojan.ServerConfig";
    pub const TROJAN_OUT: &str = "xray.proxy.trojan.ClientConfig";
    pub const SS_IN: &str = "xray.proxy.shadowsocks.ServerConfig";
    pub const SS_OUT: &str = "xray.proxy.shadowsocks.ClientConfig";
    pub const SS2022_IN: &str = "xray.proxy.shadowsocks_2022.ServerConfig";
    pub const SS2022_MULTI_IN: &str = "xray.proxy.shadowsocks_2022.MultiUserServerConfig";
    pub const SS2022_OUT: &str = "xray.proxy.shadowsocks_2022.ClientConfig";
    pub const SOCKS_IN: &str = "xray.proxy.socks.ServerConfig";
    pub const SOCKS_OUT: &str = "xray.proxy.socks.ClientConfig";
    pub const HTTP_IN: &str = "xray.proxy.http.ServerConfig";
    pub const DOKODEMO: &str = "xray.proxy.dokodemo.Config";
    pub const FREEDOM: &str = "xray.proxy.freedom.Config";
    pub const BLACKHOLE: &str = "xray.proxy.blackhole.Config";
    pub const BLACKHOLE_HTTP: &str = "xray.proxy.blackhole.HTTPResponse";
    pub const VLESS_ACCOUNT: &str = "xray.proxy.vless.Account";
    pub const VMESS_ACCOUNT: &str = "xray.proxy.vmess.Account";
    pub const TROJAN_ACCOUNT: &str = "xray.proxy.trojan.Account";
    pub const SS_ACCOUNT: &str = "xray.proxy.shadowsocks.Account";
    pub const SS2022_ACCOUNT: &str = "xray.proxy.shadowsocks_2022.Account";
    pub const SOCKS_ACCOUNT: &str = "xray.proxy.socks.Account";
}

/// Decodes `message` as `M`, which Xray names `name`.
fn decode<M: Message + Default>(message: &TypedMessage) -> Result<M, ConfigError> {
    M::decode(message.value.as_slice())
        .map_err(|e| malformed(format!("{} does not decode: {e}", message.r#type)))
}

/// The inbound as the JSON object of Xray's `inbounds` array.
pub fn inbound_json(config: &InboundHandlerConfig) -> Result<Value, ConfigError> {
    let mut out = Map::new();
    out.insert("tag".into(), config.tag.clone().into());
    let receiver = config
        .receiver_settings
        .as_ref()
        .ok_or_else(|| malformed("the inbound has no receiver_settings"))?;
    if receiver.r#type != ty::RECEIVER {
        return Err(malformed(format!(
            "receiver_settings is {}, not {}",
            receiver.r#type,
            ty::RECEIVER
        )));
    }
    let receiver: ReceiverConfig = decode(receiver)?;
    if let Some(listen) = &receiver.listen {
        match address(listen)? {
            Address::Ip(ip) => out.insert("listen".into(), ip.to_string().into()),
            Address::Domain(name) => {
                return Err(unsupported(format!(
                    "listening on `{name}` (a name or a Unix socket)"
                )));
            }
        };
    }
    out.insert("port".into(), ports(receiver.port_list.as_ref())?);
    if let Some(stream) = &receiver.stream_settings {
        out.insert("streamSettings".into(), stream_json(stream)?);
    }
    if let Some(sniffing) = &receiver.sniffing_settings {
        out.insert("sniffing".into(), sniffing_json(sniffing)?);
    }
    let proxy = config
        .proxy_settings
        .as_ref()
        .ok_or_else(|| malformed("the inbound has no proxy_settings"))?;
    let (protocol, settings) = inbound_settings(proxy)?;
    out.insert("protocol".into(), protocol.into());
    out.insert("settings".into(), settings);
    Ok(Value::Object(out))
}

/// The outbound as the JSON object of Xray's `outbounds` array.
pub fn outbound_json(config: &OutboundHandlerConfig) -> Result<Value, ConfigError> {
    let mut out = Map::new();
    out.insert("tag".into(), config.tag.clone().into());
    if config.expire != 0 {
        return Err(unsupported("an outbound's expire"));
    }
    if let Some(sender) = &config.sender_settings {
        if sender.r#type != ty::SENDER {
            return Err(malformed(format!(
                "sender_settings is {}, not {}",
                sender.r#type,
                ty::SENDER
            )));
        }
        let sender: SenderConfig = decode(sender)?;
        if sender.via.is_some() || !sender.via_cidr.is_empty() {
            return Err(unsupported("sendThrough on an added outbound"));
        }
        if sender.target_strategy != 0 {
            return Err(unsupported("targetStrategy"));
        }
        if let Some(stream) = &sender.stream_settings {
            out.insert("streamSettings".into(), stream_json(stream)?);
        }
        if sender.proxy_settings.is_some_and(|p| !p.tag.is_empty()) {
            // The config checks a chain against the outbounds beside it in the file.
            return Err(unsupported(
                "proxySettings (a chain through another outbound) on an added outbound",
            ));
        }
        if let Some(mux) = sender.multiplex_settings.filter(|m| m.enabled) {
            let mut m = Map::new();
            m.insert("enabled".into(), true.into());
            m.insert("concurrency".into(), mux.concurrency.into());
            m.insert("xudpConcurrency".into(), mux.xudp_concurrency.into());
            if !mux.xudp_proxy_udp443.is_empty() {
                m.insert("xudpProxyUDP443".into(), mux.xudp_proxy_udp443.into());
            }
            out.insert("mux".into(), Value::Object(m));
        }
    }
    let proxy = config
        .proxy_settings
        .as_ref()
        .ok_or_else(|| malformed("the outbound has no proxy_settings"))?;
    let (protocol, settings) = outbound_settings(proxy)?;
    out.insert("protocol".into(), protocol.into());
    out.insert("settings".into(), settings);
    Ok(Value::Object(out))
}

enum Address {
    Ip(IpAddr),
    Domain(String),
}

fn address(a: &IpOrDomain) -> Result<Address, ConfigError> {
    match &a.address {
        Some(ip_or_domain::Address::Ip(bytes)) => match bytes.len() {
            4 => Ok(Address::Ip(IpAddr::from(
                <[u8; 4]>::try_from(bytes.as_slice()).unwrap_or_default(),
            ))),
            16 => Ok(Address::Ip(IpAddr::from(
                <[u8; 16]>::try_from(bytes.as_slice()).unwrap_or_default(),
            ))),
            n => Err(malformed(format!("an IP address of {n} bytes"))),
        },
        Some(ip_or_domain::Address::Domain(name)) => Ok(Address::Domain(name.clone())),
        None => Err(malformed("an empty address")),
    }
}

fn address_text(a: Option<&IpOrDomain>) -> Result<String, ConfigError> {
    match address(a.ok_or_else(|| malformed("a server without an address"))?)? {
        Address::Ip(ip) => Ok(ip.to_string()),
        Address::Domain(name) => Ok(name),
    }
}

/// The port list as Xray's `port` value: a number, or "a-b,c".
fn ports(list: Option<&PortList>) -> Result<Value, ConfigError> {
    let ranges = list.map(|l| l.range.as_slice()).unwrap_or_default();
    if ranges.is_empty() {
        return Err(malformed("the inbound has no port"));
    }
    let mut parts = Vec::new();
    for r in ranges {
        let (from, to) = (r.from, r.to);
        if from > 65_535 || to > 65_535 || from > to {
            return Err(malformed(format!("port range {from}-{to}")));
        }
        parts.push(if from == to {
            from.to_string()
        } else {
            format!("{from}-{to}")
        });
    }
    if let [single] = ranges
        && single.from == single.to
    {
        return Ok(single.from.into());
    }
    Ok(parts.join(",").into())
}

fn networks(list: &[i32]) -> Result<Value, ConfigError> {
    let mut names = Vec::new();
    for n in list {
        names.push(match Network::try_from(*n) {
            Ok(Network::Tcp) => "tcp",
            Ok(Network::Udp) => "udp",
            Ok(Network::Unix) => return Err(unsupported("the unix network")),
            _ => return Err(malformed(format!("network {n}"))),
        });
    }
    Ok(names.join(",").into())
}

fn sniffing_json(s: &SniffingConfig) -> Result<Value, ConfigError> {
    if !s.domains_excluded.is_empty() {
        return Err(unsupported("sniffing.domainsExcluded on an added inbound"));
    }
    if !s.ips_excluded.is_empty() {
        return Err(unsupported("sniffing.ipsExcluded on an added inbound"));
    }
    Ok(json!({
        "enabled": s.enabled,
        "destOverride": s.destination_override,
        "metadataOnly": s.metadata_only,
        "routeOnly": s.route_only,
    }))
}

/// `streamSettings`: raw TCP or WebSocket, with TLS or none.
fn stream_json(s: &StreamConfig) -> Result<Value, ConfigError> {
    if !s.socket_settings.is_empty() {
        return Err(unsupported("sockopt on an added handler"));
    }
    if !s.udpmasks.is_empty() || !s.tcpmasks.is_empty() {
        return Err(unsupported("finalmask (udpmasks, tcpmasks)"));
    }
    if !s.quic_params.is_empty() {
        return Err(unsupported("quicParams"));
    }
    if s.address.is_some() || s.port != 0 {
        return Err(unsupported("streamSettings.address and port"));
    }
    let mut out = Map::new();
    let network = match s.protocol_name.as_str() {
        "" | "tcp" => "raw",
        "websocket" => "ws",
        "splithttp" => return Err(unsupported("the xhttp transport on an added handler")),
        other => {
            return Err(unsupported(format!(
                "the {other} transport on an added handler"
            )));
        }
    };
    out.insert("network".into(), network.into());
    for transport in &s.transport_settings {
        let wanted = match transport.protocol_name.as_str() {
            "tcp" => network == "raw",
            "websocket" => network == "ws",
            // Settings of a transport not in use: Xray ignores them too.
            _ => false,
        };
        let Some(settings) = transport.settings.as_ref().filter(|_| wanted) else {
            continue;
        };
        match settings.r#type.as_str() {
            ty::TCP => {
                out.insert("rawSettings".into(), raw_json(&decode(settings)?)?);
            }
            ty::WEBSOCKET => {
                out.insert("wsSettings".into(), ws_json(&decode(settings)?));
            }
            other => return Err(malformed(format!("{other} as a transport's settings"))),
        }
    }
    match s.security_type.as_str() {
        "" => {
            out.insert("security".into(), "none".into());
        }
        ty::TLS => {
            let settings = s
                .security_settings
                .iter()
                .find(|m| m.r#type == ty::TLS)
                .ok_or_else(|| malformed("security is TLS without TLS settings"))?;
            out.insert("security".into(), "tls".into());
            out.insert("tlsSettings".into(), tls_json(&decode(settings)?)?);
        }
        ty::REALITY => return Err(unsupported("REALITY on an added handler")),
        other => return Err(unsupported(format!("security {other}"))),
    }
    Ok(Value::Object(out))
}

fn raw_json(c: &tcp::Config) -> Result<Value, ConfigError> {
    if let Some(header) = &c.header_settings
        && header.r#type != ty::NOOP_HEADER
        && header.r#type != ty::NOOP_HEADER_OLD
    {
        return Err(unsupported(format!(
            "the raw transport's header {} on an added handler",
            header.r#type
        )));
    }
    Ok(json!({ "acceptProxyProtocol": c.accept_proxy_protocol }))
}

fn ws_json(c: &websocket::Config) -> Value {
    let mut path = c.path.clone();
    if c.ed > 0 {
        // Xray's CLI takes `ed` out of the path; the config form carries it there.
        let sep = if path.contains('?') { '&' } else { '?' };
        path = format!("{path}{sep}ed={}", c.ed);
    }
    let mut out = Map::new();
    out.insert("path".into(), path.into());
    if !c.host.is_empty() {
        out.insert("host".into(), c.host.clone().into());
    }
    if !c.header.is_empty() {
        let mut headers: Vec<(&String, &String)> = c.header.iter().collect();
        headers.sort();
        let headers: Map<String, Value> = headers
            .into_iter()
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect();
        out.insert("headers".into(), Value::Object(headers));
    }
    out.insert("acceptProxyProtocol".into(), c.accept_proxy_protocol.into());
    if c.heartbeat_period != 0 {
        out.insert("heartbeatPeriod".into(), c.heartbeat_period.into());
    }
    Value::Object(out)
}

/// PEM bytes as the config's inline form: an array of lines.
fn pem_lines(bytes: &[u8], what: &str) -> Result<Value, ConfigError> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| malformed(format!("the {what} is not PEM text")))?;
    Ok(text
        .lines()
        .map(|l| Value::from(l.trim_end_matches('\r')))
        .collect())
}

fn tls_json(c: &tls::Config) -> Result<Value, ConfigError> {
    if !c.ech_server_keys.is_empty()
        || !c.ech_config_list.is_empty()
        || !c.ech_socket_settings.is_empty()
    {
        return Err(unsupported("ECH"));
    }
    if !c.master_key_log.is_empty() {
        return Err(unsupported("masterKeyLog"));
    }
    let mut out = Map::new();
    let mut certificates = Vec::new();
    for cert in &c.certificate {
        let mut o = Map::new();
        // Xray's CLI reads the files and sends their contents (with the paths): the
        // contents are what it asked to serve.
        if !cert.certificate.is_empty() {
            o.insert(
                "certificate".into(),
                pem_lines(&cert.certificate, "certificate")?,
            );
        } else if !cert.certificate_path.is_empty() {
            o.insert(
                "certificateFile".into(),
                cert.certificate_path.clone().into(),
            );
        }
        if !cert.key.is_empty() {
            o.insert("key".into(), pem_lines(&cert.key, "key")?);
        } else if !cert.key_path.is_empty() {
            o.insert("keyFile".into(), cert.key_path.clone().into());
        }
        match cert.usage {
            0 => {}
            1 => {
                o.insert("usage".into(), "verify".into());
            }
            2 => {
                o.insert("usage".into(), "issue".into());
            }
            n => return Err(malformed(format!("certificate usage {n}"))),
        }
        if cert.ocsp_stapling != 0 {
            o.insert("ocspStapling".into(), cert.ocsp_stapling.into());
        }
        if cert.build_chain {
            o.insert("buildChain".into(), true.into());
        }
        certificates.push(Value::Object(o));
    }
    if !certificates.is_empty() {
        out.insert("certificates".into(), certificates.into());
    }
    let strings = [
        ("serverName", &c.server_name),
        ("minVersion", &c.min_version),
        ("maxVersion", &c.max_version),
        ("cipherSuites", &c.cipher_suites),
        ("fingerprint", &c.fingerprint),
    ];
    for (key, value) in strings {
        if !value.is_empty() {
            out.insert(key.into(), value.clone().into());
        }
    }
    let lists = [
        ("alpn", &c.next_protocol),
        ("curvePreferences", &c.curve_preferences),
    ];
    for (key, value) in lists {
        if !value.is_empty() {
            out.insert(key.into(), value.clone().into());
        }
    }
    if !c.verify_peer_cert_by_name.is_empty() {
        out.insert(
            "verifyPeerCertByName".into(),
            c.verify_peer_cert_by_name.join(",").into(),
        );
    }
    if !c.pinned_peer_cert_sha256.is_empty() {
        let hex: Vec<String> = c
            .pinned_peer_cert_sha256
            .iter()
            .map(|h| h.iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        out.insert("pinnedPeerCertSha256".into(), hex.join(",").into());
    }
    let flags = [
        ("rejectUnknownSni", c.reject_unknown_sni),
        ("enableSessionResumption", c.enable_session_resumption),
        ("disableSystemRoot", c.disable_system_root),
    ];
    for (key, value) in flags {
        if value {
            out.insert(key.into(), true.into());
        }
    }
    Ok(Value::Object(out))
}

/// A user's account, checked to be of the type the protocol takes.
fn account<'a>(
    user: &'a User,
    protocol: &str,
    wanted: &str,
) -> Result<&'a TypedMessage, ConfigError> {
    let account = user
        .account
        .as_ref()
        .ok_or_else(|| malformed(format!("a {protocol} user without an account")))?;
    if account.r#type != wanted {
        return Err(malformed(format!(
            "a {protocol} user's account is {}, not {wanted}",
            account.r#type
        )));
    }
    Ok(account)
}

/// `email` and `level` of a user, when set.
fn identity(o: &mut Map<String, Value>, user: &User) {
    if !user.email.is_empty() {
        o.insert("email".into(), user.email.clone().into());
    }
    o.insert("level".into(), user.level.into());
}

fn vless_user(user: &User) -> Result<Value, ConfigError> {
    let a: VlessAccount = decode(account(user, "VLESS", ty::VLESS_ACCOUNT)?)?;
    if !a.encryption.is_empty() && a.encryption != "none" {
        return Err(unsupported("VLESS encryption"));
    }
    let mut o = Map::new();
    o.insert("id".into(), a.id.into());
    if !a.flow.is_empty() {
        o.insert("flow".into(), a.flow.into());
    }
    identity(&mut o, user);
    Ok(Value::Object(o))
}

/// Xray's VMess security enum by its config names.
fn vmess_security_name(t: i32) -> Result<&'static str, ConfigError> {
    Ok(match t {
        0 | 2 => "auto",
        1 => "legacy",
        3 => "aes-128-gcm",
        4 => "chacha20-poly1305",
        5 => "none",
        6 => "zero",
        n => return Err(malformed(format!("VMess security {n}"))),
    })
}

fn vmess_user(user: &User) -> Result<Value, ConfigError> {
    let a: VmessAccount = decode(account(user, "VMess", ty::VMESS_ACCOUNT)?)?;
    if !a.tests_enabled.is_empty() {
        return Err(unsupported("VMess experiments"));
    }
    let mut o = Map::new();
    o.insert("id".into(), a.id.into());
    let security = a.security_settings.map_or(0, |s| s.r#type);
    o.insert("security".into(), vmess_security_name(security)?.into());
    identity(&mut o, user);
    Ok(Value::Object(o))
}

fn trojan_user(user: &User) -> Result<Value, ConfigError> {
    let a: TrojanAccount = decode(account(user, "Trojan", ty::TROJAN_ACCOUNT)?)?;
    let mut o = Map::new();
    o.insert("password".into(), a.password.into());
    identity(&mut o, user);
    Ok(Value::Object(o))
}

/// Xray's Shadowsocks (2017) cipher enum by its config names.
fn ss_cipher(t: i32) -> Result<&'static str, ConfigError> {
    Ok(match t {
        5 => "aes-128-gcm",
        6 => "aes-256-gcm",
        7 => "chacha20-poly1305",
        8 => "xchacha20-poly1305",
        1 | 9 => "none",
        n => return Err(unsupported(format!("Shadowsocks cipher {n}"))),
    })
}

fn ss_user(user: &User) -> Result<Value, ConfigError> {
    let a: ShadowsocksAccount = decode(account(user, "Shadowsocks", ty::SS_ACCOUNT)?)?;
    if a.iv_check {
        return Err(unsupported("Shadowsocks ivCheck"));
    }
    let mut o = Map::new();
    o.insert("method".into(), ss_cipher(a.cipher_type)?.into());
    o.insert("password".into(), a.password.into());
    identity(&mut o, user);
    Ok(Value::Object(o))
}

fn fallbacks(list: &[Fallback]) -> Result<Value, ConfigError> {
    let mut out = Vec::new();
    for f in list {
        if !f.r#type.is_empty() && f.r#type != "tcp" {
            return Err(unsupported(format!("a fallback of type {}", f.r#type)));
        }
        out.push(json!({
            "name": f.name,
            "alpn": f.alpn,
            "path": f.path,
            "dest": f.dest,
            "xver": f.xver,
        }));
    }
    Ok(out.into())
}

/// The inbound's protocol name and `settings`, from its server config.
fn inbound_settings(proxy: &TypedMessage) -> Result<(&'static str, Value), ConfigError> {
    let collect = |users: &[User], f: fn(&User) -> Result<Value, ConfigError>| {
        users.iter().map(f).collect::<Result<Vec<Value>, _>>()
    };
    Ok(match proxy.r#type.as_str() {
        ty::VLESS_IN => {
            let c: VlessInboundConfig = decode(proxy)?;
            if !c.decryption.is_empty() && c.decryption != "none" {
                return Err(unsupported("VLESS encryption (decryption other than none)"));
            }
            let mut s = Map::new();
            s.insert("clients".into(), collect(&c.users, vless_user)?.into());
            s.insert("decryption".into(), "none".into());
            if !c.fallbacks.is_empty() {
                s.insert("fallbacks".into(), fallbacks(&c.fallbacks)?);
            }
            ("vless", Value::Object(s))
        }
        ty::VMESS_IN => {
            let c: VmessInboundConfig = decode(proxy)?;
            let mut s = Map::new();
            s.insert("clients".into(), collect(&c.user, vmess_user)?.into());
            if let Some(d) = c.default {
                s.insert("default".into(), json!({ "level": d.level }));
            }
            ("vmess", Value::Object(s))
        }
        ty::TROJAN_IN => {
            let c: TrojanServerConfig = decode(proxy)?;
            let mut s = Map::new();
            s.insert("clients".into(), collect(&c.users, trojan_user)?.into());
            if !c.fallbacks.is_empty() {
                s.insert("fallbacks".into(), fallbacks(&c.fallbacks)?);
            }
            ("trojan", Value::Object(s))
        }
        ty::SS_IN => {
            let c: ShadowsocksServerConfig = decode(proxy)?;
            let network = networks(&c.network)?;
            let mut s = match c.users.as_slice() {
                [] => return Err(malformed("a Shadowsocks inbound without users")),
                // One user is the config's single-user form, as Xray's CLI built it.
                [one] => match ss_user(one)? {
                    Value::Object(o) => o,
                    _ => Map::new(),
                },
                many => {
                    let mut s = Map::new();
                    s.insert("clients".into(), collect(many, ss_user)?.into());
                    s
                }
            };
            s.insert("network".into(), network);
            ("shadowsocks", Value::Object(s))
        }
        ty::SS2022_IN => {
            let c: Shadowsocks2022ServerConfig = decode(proxy)?;
            let mut s = Map::new();
            s.insert("method".into(), c.method.into());
            s.insert("password".into(), c.key.into());
            if !c.email.is_empty() {
                s.insert("email".into(), c.email.into());
            }
            s.insert("level".into(), c.level.into());
            s.insert("network".into(), networks(&c.network)?);
            ("shadowsocks", Value::Object(s))
        }
        ty::SS2022_MULTI_IN => {
            let c: Shadowsocks2022MultiUserServerConfig = decode(proxy)?;
            let mut clients = Vec::new();
            for user in &c.users {
                let a: crate::proto::proxy::Shadowsocks2022Account =
                    decode(account(user, "Shadowsocks 2022", ty::SS2022_ACCOUNT)?)?;
                let mut o = Map::new();
                o.insert("password".into(), a.key.into());
                identity(&mut o, user);
                clients.push(Value::Object(o));
            }
            let mut s = Map::new();
            s.insert("method".into(), c.method.into());
            s.insert("password".into(), c.key.into());
            s.insert("clients".into(), clients.into());
            s.insert("network".into(), networks(&c.network)?);
            ("shadowsocks", Value::Object(s))
        }
        ty::SOCKS_IN => {
            let c: SocksServerConfig = decode(proxy)?;
            let mut s = Map::new();
            s.insert(
                "auth".into(),
                match c.auth_type {
                    0 => "noauth",
                    1 => "password",
                    n => return Err(malformed(format!("SOCKS auth type {n}"))),
                }
                .into(),
            );
            s.insert("accounts".into(), accounts(&c.accounts));
            s.insert("udp".into(), c.udp_enabled.into());
            if let Some(ip) = &c.address {
                s.insert("ip".into(), address_text(Some(ip))?.into());
            }
            s.insert("userLevel".into(), c.user_level.into());
            ("socks", Value::Object(s))
        }
        ty::HTTP_IN => {
            let c: HttpServerConfig = decode(proxy)?;
            let s = json!({
                "accounts": accounts(&c.accounts),
                "allowTransparent": c.allow_transparent,
                "userLevel": c.user_level,
            });
            ("http", s)
        }
        ty::DOKODEMO => {
            let c: DokodemoConfig = decode(proxy)?;
            if !c.port_map.is_empty() {
                return Err(unsupported("the tunnel's portMap on an added inbound"));
            }
            let mut s = Map::new();
            if let Some(a) = &c.rewrite_address {
                s.insert("address".into(), address_text(Some(a))?.into());
            }
            if c.rewrite_port != 0 {
                s.insert("port".into(), c.rewrite_port.into());
            }
            s.insert("network".into(), networks(&c.allowed_networks)?);
            s.insert("followRedirect".into(), c.follow_redirect.into());
            s.insert("userLevel".into(), c.user_level.into());
            ("dokodemo-door", Value::Object(s))
        }
        other => return Err(unsupported(format!("the inbound {other}"))),
    })
}

/// Username → password, as the config's `accounts` list (sorted, so the order is stable).
fn accounts(map: &std::collections::HashMap<String, String>) -> Value {
    let mut list: Vec<(&String, &String)> = map.iter().collect();
    list.sort();
    list.into_iter()
        .map(|(user, pass)| json!({ "user": user, "pass": pass }))
        .collect()
}

fn endpoint(
    e: Option<&ServerEndpoint>,
    protocol: &str,
) -> Result<(String, u32, User), ConfigError> {
    let e = e.ok_or_else(|| malformed(format!("a {protocol} outbound without a server")))?;
    if e.port == 0 || e.port > 65_535 {
        return Err(malformed(format!("{protocol} server port {}", e.port)));
    }
    Ok((
        address_text(e.address.as_ref())?,
        e.port,
        e.user.clone().unwrap_or_default(),
    ))
}

/// Xray's DomainStrategy enum by freedom's config names.
fn domain_strategy(n: i32) -> Result<&'static str, ConfigError> {
    Ok(match n {
        0 => "AsIs",
        1 => "UseIP",
        2 => "UseIPv4",
        3 => "UseIPv6",
        4 => "UseIPv4v6",
        5 => "UseIPv6v4",
        6 => "ForceIP",
        7 => "ForceIPv4",
        8 => "ForceIPv6",
        9 => "ForceIPv4v6",
        10 => "ForceIPv6v4",
        n => return Err(malformed(format!("domain strategy {n}"))),
    })
}

/// The outbound's protocol name and `settings`, from its client config.
fn outbound_settings(proxy: &TypedMessage) -> Result<(&'static str, Value), ConfigError> {
    let with_server = |address: String, port: u32, mut user: Map<String, Value>| {
        user.insert("address".into(), address.into());
        user.insert("port".into(), port.into());
        Value::Object(user)
    };
    let object = |v: Value| match v {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    Ok(match proxy.r#type.as_str() {
        ty::FREEDOM => {
            let c: FreedomConfig = decode(proxy)?;
            if !c.destination_override.is_empty() {
                return Err(unsupported("freedom's redirect on an added outbound"));
            }
            if !c.fragment.is_empty() {
                return Err(unsupported("freedom's fragment"));
            }
            if !c.noises.is_empty() {
                return Err(unsupported("freedom's noises"));
            }
            if !c.final_rules.is_empty() {
                return Err(unsupported("freedom's finalRules on an added outbound"));
            }
            let mut s = Map::new();
            s.insert(
                "domainStrategy".into(),
                domain_strategy(c.domain_strategy)?.into(),
            );
            s.insert("userLevel".into(), c.user_level.into());
            if c.proxy_protocol != 0 {
                s.insert("proxyProtocol".into(), c.proxy_protocol.into());
            }
            ("freedom", Value::Object(s))
        }
        ty::BLACKHOLE => {
            let c: BlackholeConfig = decode(proxy)?;
            let kind = match c.response.as_ref().map(|r| r.r#type.as_str()) {
                Some(ty::BLACKHOLE_HTTP) => "http",
                _ => "none",
            };
            ("blackhole", json!({ "response": { "type": kind } }))
        }
        ty::VLESS_OUT => {
            let c: VlessOutboundConfig = decode(proxy)?;
            let (address, port, user) = endpoint(c.vnext.as_ref(), "VLESS")?;
            let mut u = object(vless_user(&user)?);
            u.insert("encryption".into(), "none".into());
            let server = json!({ "address": address, "port": port, "users": [u] });
            ("vless", json!({ "vnext": [server] }))
        }
        ty::VMESS_OUT => {
            let c: VmessOutboundConfig = decode(proxy)?;
            let (address, port, user) = endpoint(c.receiver.as_ref(), "VMess")?;
            let server = json!({ "address": address, "port": port, "users": [vmess_user(&user)?] });
            ("vmess", json!({ "vnext": [server] }))
        }
        ty::TROJAN_OUT => {
            let c: ServerClientConfig = decode(proxy)?;
            let (address, port, user) = endpoint(c.server.as_ref(), "Trojan")?;
            let server = with_server(address, port, object(trojan_user(&user)?));
            ("trojan", json!({ "servers": [server] }))
        }
        ty::SS_OUT => {
            let c: ServerClientConfig = decode(proxy)?;
            let (address, port, user) = endpoint(c.server.as_ref(), "Shadowsocks")?;
            let server = with_server(address, port, object(ss_user(&user)?));
            ("shadowsocks", json!({ "servers": [server] }))
        }
        ty::SS2022_OUT => {
            let c: Shadowsocks2022ClientConfig = decode(proxy)?;
            if c.port == 0 || c.port > 65_535 {
                return Err(malformed(format!("Shadowsocks server port {}", c.port)));
            }
            let server = json!({
                "address": address_text(c.address.as_ref())?,
                "port": c.port,
                "method": c.method,
                "password": c.key,
            });
            ("shadowsocks", json!({ "servers": [server] }))
        }
        ty::SOCKS_OUT => {
            let c: ServerClientConfig = decode(proxy)?;
            let (address, port, user) = endpoint(c.server.as_ref(), "SOCKS")?;
            let mut server = Map::new();
            server.insert("address".into(), address.into());
            server.insert("port".into(), port.into());
            if user.account.is_some() {
                let a: SocksAccount = decode(account(&user, "SOCKS", ty::SOCKS_ACCOUNT)?)?;
                let mut u = Map::new();
                u.insert("user".into(), a.username.into());
                u.insert("pass".into(), a.password.into());
                identity(&mut u, &user);
                server.insert("users".into(), vec![Value::Object(u)].into());
            }
            ("socks", json!({ "servers": [server] }))
        }
        other => return Err(unsupported(format!("the outbound {other}"))),
    })
}

#[cfg(test)]
#[path = "handler_config_tests.rs"]
mod tests;
