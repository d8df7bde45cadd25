//! `Display for Plan`: the readable summary `skiff check` prints. One line per inbound,
//! outbound and rule, then the policy levels that differ from the defaults. Passwords are
//! never printed (only how many accounts there are and their user names), VLESS and VMess ids only by their
//! first 8 hex digits, and no key material at all.

use std::fmt::{self, Display, Formatter};
use std::net::IpAddr;

use skiff_core::{Networks, PortRange};

use crate::plan::{
    Account, BalancerStrategy, BlackholeResponse, DomainEntry, DomainKind, FreedomDomainStrategy,
    InboundPlan, InboundProtocol, IpEntry, LevelPolicy, LogLevel, LogTarget, OutboundPlan,
    OutboundProtocol, Plan, RoutingDomainStrategy, RulePlan, RuleTarget, SniffProtocol,
    SniffingPlan, StreamNetwork, StreamPlan, StreamSecurity, VmessSecurity, short_id,
};

impl Display for Plan {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "log: level {}, access log {}, error log {}",
            level_name(self.log.level),
            Target(&self.log.access),
            Target(&self.log.error)
        )?;
        for inbound in &self.inbounds {
            writeln!(f, "{}", Inbound(inbound))?;
        }
        for (i, outbound) in self.outbounds.iter().enumerate() {
            write!(f, "{}", Outbound(outbound))?;
            if i == 0 {
                f.write_str(" (default route)")?;
            }
            writeln!(f)?;
        }
        let strategy = match self.routing.domain_strategy {
            RoutingDomainStrategy::AsIs => "AsIs",
            RoutingDomainStrategy::IpIfNonMatch => "IPIfNonMatch",
            RoutingDomainStrategy::IpOnDemand => "IPOnDemand",
        };
        let default = self
            .outbounds
            .first()
            .map(|o| o.tag.as_str())
            .unwrap_or_default();
        match self.routing.rules.len() {
            0 => writeln!(
                f,
                "routing: domainStrategy {strategy}, no rules: everything goes to \"{default}\""
            )?,
            n => writeln!(
                f,
                "routing: domainStrategy {strategy}, {n} rule(s), unmatched traffic goes to \"{default}\""
            )?,
        }
        for (i, rule) in self.routing.rules.iter().enumerate() {
            writeln!(f, "  rule {}: {}", i + 1, Rule(rule))?;
        }
        for b in &self.routing.balancers {
            let strategy = match b.strategy {
                BalancerStrategy::Random => "random",
                BalancerStrategy::RoundRobin => "roundRobin",
            };
            let fallback = b
                .fallback_tag
                .as_ref()
                .map(|t| format!(", else \"{t}\""))
                .unwrap_or_default();
            writeln!(
                f,
                "  balancer \"{}\": {strategy} over outbounds tagged {}*{fallback}",
                b.tag,
                b.selectors.join("*, ")
            )?;
        }
        if let Some(dns) = &self.dns {
            // Counts only: server addresses and hosts can be private.
            writeln!(
                f,
                "dns: {} server(s) ({}), {} hosts entr{}, cache {}",
                dns.servers.len(),
                if dns.servers.is_empty() {
                    "the system resolver"
                } else {
                    "queried directly"
                },
                dns.hosts.len(),
                if dns.hosts.len() == 1 { "y" } else { "ies" },
                if dns.disable_cache { "off" } else { "on" }
            )?;
        }
        let mut levels: Vec<(&u32, &LevelPolicy)> = self.policy.levels.iter().collect();
        levels.sort_by_key(|(n, _)| **n);
        for (n, level) in levels {
            let changes = level_changes(level);
            if !changes.is_empty() {
                writeln!(f, "policy level {n}: {}", changes.join(", "))?;
            }
        }
        let s = &self.policy.system;
        let stats: Vec<&str> = [
            (s.stats_inbound_uplink, "inbound uplink"),
            (s.stats_inbound_downlink, "inbound downlink"),
            (s.stats_outbound_uplink, "outbound uplink"),
            (s.stats_outbound_downlink, "outbound downlink"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        if !stats.is_empty() {
            writeln!(f, "policy system stats: {}", stats.join(", "))?;
        }
        Ok(())
    }
}

fn level_name(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Warning => "warning",
        LogLevel::Error => "error",
        LogLevel::None => "none",
    }
}

struct Target<'a>(&'a LogTarget);

impl Display for Target<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            LogTarget::Stderr => f.write_str("stderr"),
            LogTarget::Off => f.write_str("off"),
            LogTarget::File(path) => write!(f, "{}", path.display()),
        }
    }
}

fn tag_name(tag: &str) -> String {
    if tag.is_empty() {
        "(untagged)".to_owned()
    } else {
        format!("\"{tag}\"")
    }
}

fn networks(n: Networks) -> &'static str {
    match (n.tcp, n.udp) {
        (true, true) => "tcp,udp",
        (false, true) => "udp",
        _ => "tcp",
    }
}

fn ports(ranges: &[PortRange]) -> String {
    ranges
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// "2 accounts (alice, bob)": user names only, never passwords.
fn accounts(list: &[Account]) -> String {
    let names: Vec<&str> = list.iter().map(|a| a.user.as_str()).collect();
    let noun = if list.len() == 1 {
        "account"
    } else {
        "accounts"
    };
    format!("{} {noun} ({})", list.len(), names.join(", "))
}

struct Inbound<'a>(&'a InboundPlan);

impl Display for Inbound<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let ib = self.0;
        let (name, mut notes) = match &ib.protocol {
            InboundProtocol::Socks(s) => {
                let mut notes = vec![if s.accounts.is_empty() {
                    "no auth".to_owned()
                } else {
                    format!("password auth, {}", accounts(&s.accounts))
                }];
                notes.push(if s.udp {
                    "udp on".into()
                } else {
                    "udp off".into()
                });
                if let Some(ip) = s.announce_ip {
                    notes.push(format!("announces {ip} for udp"));
                }
                if s.user_level != 0 {
                    notes.push(format!("level {}", s.user_level));
                }
                ("socks", notes)
            }
            InboundProtocol::Http(h) => {
                let mut notes = vec![if h.accounts.is_empty() {
                    "no auth".to_owned()
                } else {
                    format!("basic auth, {}", accounts(&h.accounts))
                }];
                if h.allow_transparent {
                    notes.push("transparent requests allowed".into());
                }
                if h.user_level != 0 {
                    notes.push(format!("level {}", h.user_level));
                }
                ("http", notes)
            }
            InboundProtocol::Tunnel(t) => {
                let mut notes = vec![match &t.address {
                    Some(a) if a.contains(':') => format!("to [{a}]:{}", t.port),
                    Some(a) => format!("to {a}:{}", t.port),
                    None => "to the original destination (followRedirect)".into(),
                }];
                if t.follow_redirect && t.address.is_some() {
                    notes.push("followRedirect".into());
                }
                notes.push(networks(t.network).to_owned());
                if t.user_level != 0 {
                    notes.push(format!("level {}", t.user_level));
                }
                ("dokodemo-door", notes)
            }
            InboundProtocol::Vless(v) => {
                let list: Vec<_> = v
                    .clients
                    .iter()
                    .map(|c| (&c.id, c.email.as_deref(), c.level))
                    .collect();
                let mut notes = vec![clients(&list)];
                for fb in &v.fallbacks {
                    notes.push(fallback(fb));
                }
                ("vless", notes)
            }
            InboundProtocol::Trojan(t) => {
                let mut notes = vec![trojan_clients(&t.clients)];
                for fb in &t.fallbacks {
                    notes.push(fallback(fb));
                }
                ("trojan", notes)
            }
            InboundProtocol::Shadowsocks(ss) => {
                let mut notes = vec![ss_users(ss)];
                notes.push(networks(ss.network).to_owned());
                ("shadowsocks", notes)
            }
            InboundProtocol::Vmess(v) => {
                let list: Vec<_> = v
                    .clients
                    .iter()
                    .map(|c| (&c.id, c.email.as_deref(), c.level))
                    .collect();
                let mut notes = vec![clients(&list)];
                if v.disable_insecure_encryption {
                    notes.push("refuses security none/zero".into());
                }
                ("vmess", notes)
            }
            InboundProtocol::Udpspeeder(u) => (
                "udpspeeder",
                vec![
                    format!("to {}:{}", u.target_host, u.target_port),
                    udpspeeder_tuning(&u.tuning),
                ],
            ),
            InboundProtocol::Udp2raw(u) => (
                "udp2raw",
                vec![
                    if u.target_host.contains(':') {
                        format!("to [{}]:{}", u.target_host, u.target_port)
                    } else {
                        format!("to {}:{}", u.target_host, u.target_port)
                    },
                    udp2raw_tuning(&u.tuning),
                ],
            ),
            InboundProtocol::Kcptun(k) => {
                let host = if k.target_host.contains(':') {
                    format!("[{}]", k.target_host)
                } else {
                    k.target_host.clone()
                };
                (
                    "kcptun",
                    vec![
                        format!("to {host}:{}", k.target_port),
                        kcptun_tuning(&k.tuning),
                    ],
                )
            }
        };
        notes.extend(stream(&ib.stream));
        if let Some(sniffing) = &ib.sniffing {
            notes.push(sniffing_note(sniffing));
        }
        write!(
            f,
            "inbound {}: {name} on {}:{}, {}",
            tag_name(&ib.tag),
            host(ib.listen),
            ports(&ib.ports),
            notes.join(", ")
        )
    }
}

fn ss_users(ss: &crate::plan::ShadowsocksInbound) -> String {
    let shown: Vec<String> = ss
        .users
        .iter()
        .map(|u| {
            let mut s = u.method.name().to_owned();
            if let Some(email) = &u.email {
                s.push_str(&format!(" {email}"));
            }
            if u.level != 0 {
                s.push_str(&format!(" level {}", u.level));
            }
            s
        })
        .collect();
    let noun = if shown.len() == 1 { "user" } else { "users" };
    let identity = if ss.identity_key.is_some() {
        ", identity headers"
    } else {
        ""
    };
    format!("{} {noun} ({}){identity}", shown.len(), shown.join(", "))
}

/// VLESS and VMess clients: (id, email, level) each.
fn clients(list: &[(&[u8; 16], Option<&str>, u32)]) -> String {
    if list.is_empty() {
        return "no clients".to_owned();
    }
    let shown: Vec<String> = list
        .iter()
        .map(|&(id, email, level)| {
            let mut s = format!("{}…", short_id(id));
            if let Some(email) = email {
                s.push_str(&format!(" {email}"));
            }
            if level != 0 {
                s.push_str(&format!(" level {level}"));
            }
            s
        })
        .collect();
    let noun = if list.len() == 1 { "client" } else { "clients" };
    format!("{} {noun} ({})", list.len(), shown.join(", "))
}

/// Trojan clients by email and level; passwords are never shown.
fn trojan_clients(list: &[crate::plan::TrojanClient]) -> String {
    if list.is_empty() {
        return "no clients".to_owned();
    }
    let shown: Vec<String> = list
        .iter()
        .map(|c| {
            let mut s = c.email.clone().unwrap_or_else(|| "(no email)".to_owned());
            if c.level != 0 {
                s.push_str(&format!(" level {}", c.level));
            }
            s
        })
        .collect();
    let noun = if list.len() == 1 { "client" } else { "clients" };
    format!("{} {noun} ({})", list.len(), shown.join(", "))
}

fn fallback(fb: &crate::plan::FallbackPlan) -> String {
    use crate::plan::FallbackDest;
    let mut when = Vec::new();
    if let Some(name) = &fb.name {
        when.push(format!("sni {name}"));
    }
    if let Some(alpn) = &fb.alpn {
        when.push(format!("alpn {alpn}"));
    }
    if let Some(path) = &fb.path {
        when.push(format!("path {path}"));
    }
    let dest = match &fb.dest {
        FallbackDest::Port(p) => format!("127.0.0.1:{p}"),
        FallbackDest::Addr(h, p) if h.contains(':') => format!("[{h}]:{p}"),
        FallbackDest::Addr(h, p) => format!("{h}:{p}"),
        FallbackDest::Unix(path) => format!("unix:{}", path.display()),
        FallbackDest::AbstractUnix(name) => format!("unix:{name}"),
    };
    let when = if when.is_empty() {
        String::new()
    } else {
        format!(" ({})", when.join(", "))
    };
    let xver = if fb.xver == 0 {
        String::new()
    } else {
        format!(" with PROXY v{}", fb.xver)
    };
    format!("fallback{when} to {dest}{xver}")
}

/// The transport and security notes; nothing for plain TCP.
fn stream(plan: &StreamPlan) -> Vec<String> {
    let mut notes = Vec::new();
    if let StreamNetwork::Mkcp(k) = &plan.network {
        let mut s = format!("over mKCP (UDP, mtu {}, tti {} ms", k.mtu, k.tti);
        if k.header != skiff_kcp::mkcp::HeaderKind::None {
            s.push_str(&format!(", header {}", k.header.name()));
        }
        if k.seed.is_some() {
            s.push_str(", seed");
        }
        s.push(')');
        notes.push(s);
    }
    if let StreamNetwork::Kcptun(k) = &plan.network {
        notes.push(format!(
            "over kcptun (UDP, crypt {}, smux v{}{})",
            k.tuning.crypt_name,
            k.tuning.smux_version,
            if k.tuning.compress { ", snappy" } else { "" }
        ));
    }
    if let Some(t) = &plan.udp2raw {
        notes.push(format!("over udp2raw ({})", udp2raw_tuning(t)));
    }
    if let StreamNetwork::Ws(ws) = &plan.network {
        let mut s = format!("over WebSocket path {}", ws.path);
        if let Some(host) = &ws.host {
            s.push_str(&format!(" host {host}"));
        }
        if !ws.headers.is_empty() {
            s.push_str(&format!(" +{} header(s)", ws.headers.len()));
        }
        if ws.accept_proxy_protocol {
            s.push_str(" accepting PROXY protocol");
        }
        notes.push(s);
    }
    if let StreamNetwork::HttpHeader(h) = &plan.network {
        notes.push(format!(
            "with an HTTP header ({} {} …)",
            h.request.method,
            h.request.paths.join("|")
        ));
    }
    if let StreamNetwork::HttpUpgrade(h) = &plan.network {
        let mut s = format!("over HTTPUpgrade path {}", h.path);
        if let Some(host) = &h.host {
            s.push_str(&format!(" host {host}"));
        }
        if !h.headers.is_empty() {
            s.push_str(&format!(" +{} header(s)", h.headers.len()));
        }
        notes.push(s);
    }
    if let StreamNetwork::Xhttp(x) = &plan.network {
        let mut s = format!("over XHTTP path {} mode {:?}", x.path, x.mode);
        if let Some(host) = &x.host {
            s.push_str(&format!(" host {host}"));
        }
        notes.push(s);
    }
    if let StreamSecurity::Tls(tls) = &plan.security {
        let mut parts = Vec::new();
        if let Some(sni) = &tls.server_name {
            parts.push(format!("sni {sni}"));
        }
        if !tls.alpn.is_empty() {
            parts.push(format!("alpn {}", tls.alpn.join("/")));
        }
        match (&tls.min_version, &tls.max_version) {
            (None, None) => {}
            (min, max) => parts.push(format!(
                "versions {}-{}",
                min.as_deref().unwrap_or("1.2"),
                max.as_deref().unwrap_or("1.3")
            )),
        }
        if !tls.certificates.is_empty() {
            parts.push(format!("{} certificate(s)", tls.certificates.len()));
        }
        if !tls.pinned_peer_cert_sha256.is_empty() {
            parts.push(format!(
                "{} pinned certificate(s)",
                tls.pinned_peer_cert_sha256.len()
            ));
        }
        if tls.reject_unknown_sni {
            parts.push("unknown SNI rejected".into());
        }
        if tls.allow_insecure {
            parts.push("certificate NOT verified (allowInsecure)".into());
        }
        notes.push(if parts.is_empty() {
            "tls".to_owned()
        } else {
            format!("tls ({})", parts.join(", "))
        });
    }
    if let StreamSecurity::Reality(r) = &plan.security {
        // Names and the target only: keys and short ids are secrets.
        if let Some(s) = &r.server {
            let target = match &s.target {
                crate::plan::RealityTarget::Tcp { host, port } => format!("{host}:{port}"),
                crate::plan::RealityTarget::Unix(path) => path.clone(),
            };
            notes.push(format!(
                "reality (target {target}, names {}, {} short id(s))",
                s.server_names.join("/"),
                s.short_ids.len()
            ));
        }
        if let Some(c) = &r.client {
            let sni = c.server_name.as_deref().unwrap_or("the server address");
            notes.push(format!(
                "reality (sni {sni}, fingerprint {})",
                c.fingerprint
            ));
        }
    }
    notes
}

struct Outbound<'a>(&'a OutboundPlan);

impl Display for Outbound<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let ob = self.0;
        write!(f, "outbound {}: ", tag_name(&ob.tag))?;
        match &ob.protocol {
            OutboundProtocol::Freedom(fr) => {
                f.write_str("freedom")?;
                match fr.domain_strategy {
                    FreedomDomainStrategy::AsIs => {}
                    FreedomDomainStrategy::UseIp => f.write_str(", domainStrategy UseIP")?,
                    FreedomDomainStrategy::UseIpv4 => f.write_str(", domainStrategy UseIPv4")?,
                    FreedomDomainStrategy::UseIpv6 => f.write_str(", domainStrategy UseIPv6")?,
                }
                if let Some((h, p)) = &fr.redirect {
                    let h = if h.is_empty() {
                        "(original host)"
                    } else {
                        h.as_str()
                    };
                    let p = if *p == 0 {
                        "(original port)".to_owned()
                    } else {
                        p.to_string()
                    };
                    write!(f, ", redirect to {h}:{p}")?;
                }
            }
            OutboundProtocol::Dns(d) => {
                f.write_str("dns (A/AAAA answered by the DNS module)")?;
                if d.address.is_some() || d.port != 0 || d.network.is_some() {
                    let host = d.address.as_deref().unwrap_or("(original host)");
                    let port = match d.port {
                        0 => "(original port)".to_owned(),
                        p => p.to_string(),
                    };
                    write!(f, ", others to {host}:{port}")?;
                    if let Some(n) = d.network {
                        write!(
                            f,
                            " over {}",
                            if n == skiff_core::Network::Tcp {
                                "tcp"
                            } else {
                                "udp"
                            }
                        )?;
                    }
                }
                if !d.rules.is_empty() {
                    write!(f, ", {} rule(s)", d.rules.len())?;
                }
            }
            OutboundProtocol::Blackhole(b) => {
                f.write_str("blackhole")?;
                if b.response == BlackholeResponse::Http {
                    f.write_str(", answers HTTP 403")?;
                }
            }
            OutboundProtocol::Vless(v) => {
                let host = if v.address.contains(':') {
                    format!("[{}]", v.address)
                } else {
                    v.address.clone()
                };
                write!(f, "vless to {host}:{}, id {}…", v.port, short_id(&v.id))?;
                if v.level != 0 {
                    write!(f, ", level {}", v.level)?;
                }
            }
            OutboundProtocol::Trojan(t) => {
                let host = if t.address.contains(':') {
                    format!("[{}]", t.address)
                } else {
                    t.address.clone()
                };
                write!(f, "trojan to {host}:{}", t.port)?;
                if let Some(email) = &t.email {
                    write!(f, ", email {email}")?;
                }
                if t.level != 0 {
                    write!(f, ", level {}", t.level)?;
                }
            }
            OutboundProtocol::Shadowsocks(ss) => {
                let host = if ss.address.contains(':') {
                    format!("[{}]", ss.address)
                } else {
                    ss.address.clone()
                };
                write!(f, "shadowsocks to {host}:{}, {}", ss.port, ss.method)?;
                if !ss.identity_keys.is_empty() {
                    write!(f, ", {} identity key(s)", ss.identity_keys.len())?;
                }
                if ss.level != 0 {
                    write!(f, ", level {}", ss.level)?;
                }
            }
            OutboundProtocol::Udpspeeder(u) => {
                write!(
                    f,
                    "udpspeeder to {}:{}, {}",
                    u.address,
                    u.port,
                    udpspeeder_tuning(&u.tuning)
                )?;
            }
            OutboundProtocol::Udp2raw(u) => {
                let host = if u.address.contains(':') {
                    format!("[{}]", u.address)
                } else {
                    u.address.clone()
                };
                write!(
                    f,
                    "udp2raw to {host}:{}, {}",
                    u.port,
                    udp2raw_tuning(&u.tuning)
                )?;
            }
            OutboundProtocol::Kcptun(k) => {
                let host = if k.address.contains(':') {
                    format!("[{}]", k.address)
                } else {
                    k.address.clone()
                };
                write!(
                    f,
                    "kcptun to {host}:{}, {}",
                    k.port,
                    kcptun_tuning(&k.tuning)
                )?;
                if k.conn != 1 {
                    write!(f, ", {} sessions", k.conn)?;
                }
            }
            OutboundProtocol::Vmess(v) => {
                let host = if v.address.contains(':') {
                    format!("[{}]", v.address)
                } else {
                    v.address.clone()
                };
                let security = match v.security {
                    VmessSecurity::Auto => "auto",
                    VmessSecurity::Aes128Gcm => "aes-128-gcm",
                    VmessSecurity::ChaCha20Poly1305 => "chacha20-poly1305",
                    VmessSecurity::None => "none",
                    VmessSecurity::Zero => "zero",
                };
                write!(
                    f,
                    "vmess to {host}:{}, id {}…, security {security}",
                    v.port,
                    short_id(&v.id)
                )?;
                if v.authenticated_length {
                    f.write_str(", authenticated length")?;
                }
                if v.no_termination_signal {
                    f.write_str(", no termination signal")?;
                }
                if v.level != 0 {
                    write!(f, ", level {}", v.level)?;
                }
            }
        }
        for note in stream(&ob.stream) {
            write!(f, ", {note}")?;
        }
        if let Some(via) = &ob.via {
            write!(f, ", via \"{via}\"")?;
        }
        Ok(())
    }
}

/// `sniffing http,tls (route only)`.
fn sniffing_note(s: &SniffingPlan) -> String {
    let names: Vec<&str> = s
        .dest_override
        .iter()
        .map(|p| match p {
            SniffProtocol::Http => "http",
            SniffProtocol::Tls => "tls",
            SniffProtocol::Quic => "quic",
        })
        .collect();
    let mut note = format!("sniffing {}", names.join(","));
    if s.metadata_only {
        note.push_str(" (metadata only)");
    } else if s.route_only {
        note.push_str(" (route only)");
    }
    note
}

struct Rule<'a>(&'a RulePlan);

impl Display for Rule<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let r = self.0;
        let mut parts = Vec::new();
        let list = |items: Vec<String>| items.join(" ");
        if !r.inbound_tags.is_empty() {
            parts.push(format!("inboundTag {}", list(r.inbound_tags.clone())));
        }
        if !r.domains.is_empty() {
            parts.push(format!(
                "domain {}",
                list(r.domains.iter().map(domain).collect())
            ));
        }
        if !r.ips.is_empty() {
            parts.push(format!("ip {}", list(r.ips.iter().map(ip).collect())));
        }
        if !r.ports.is_empty() {
            parts.push(format!("port {}", ports(&r.ports)));
        }
        if let Some(n) = r.networks {
            parts.push(format!("network {}", networks(n)));
        }
        if !r.sources.is_empty() {
            parts.push(format!(
                "source {}",
                list(r.sources.iter().map(ToString::to_string).collect())
            ));
        }
        if !r.source_ports.is_empty() {
            parts.push(format!("sourcePort {}", ports(&r.source_ports)));
        }
        if !r.users.is_empty() {
            parts.push(format!("user {}", list(r.users.clone())));
        }
        if !r.protocols.is_empty() {
            parts.push(format!("protocol {}", list(r.protocols.clone())));
        }
        if !r.attrs.is_empty() {
            let attrs = r.attrs.iter().map(|(k, v)| format!("{k}~{}", v.as_str()));
            parts.push(format!("attrs {}", list(attrs.collect())));
        }
        if let Some(tag) = &r.rule_tag {
            parts.insert(0, format!("[{tag}]"));
        }
        match &r.target {
            RuleTarget::Outbound(tag) => write!(f, "{} → \"{tag}\"", parts.join("; ")),
            RuleTarget::Balancer(tag) => write!(f, "{} → balancer \"{tag}\"", parts.join("; ")),
        }
    }
}

fn domain(e: &DomainEntry) -> String {
    match e {
        DomainEntry::Custom(d) => {
            let prefix = match d.kind {
                DomainKind::Plain => "keyword",
                DomainKind::Full => "full",
                DomainKind::Suffix => "domain",
                DomainKind::Regex => "regexp",
            };
            format!("{prefix}:{}", d.value)
        }
        DomainEntry::Geosite { file, code, attrs } => {
            let attrs: String = attrs.iter().map(|a| format!("@{a}")).collect();
            if file == "geosite.dat" {
                format!("geosite:{code}{attrs}")
            } else {
                format!("ext:{file}:{code}{attrs}")
            }
        }
    }
}

fn ip(e: &IpEntry) -> String {
    match e {
        IpEntry::Cidr { cidr, negated } => format!("{}{cidr}", if *negated { "!" } else { "" }),
        IpEntry::Geoip {
            file,
            code,
            negated,
        } => {
            let bang = if *negated { "!" } else { "" };
            if file == "geoip.dat" {
                format!("geoip:{bang}{code}")
            } else {
                format!("{bang}ext:{file}:{code}")
            }
        }
    }
}

fn level_changes(level: &LevelPolicy) -> Vec<String> {
    let d = LevelPolicy::default();
    let mut out = Vec::new();
    let times = [
        ("handshake", level.handshake, d.handshake),
        ("connIdle", level.conn_idle, d.conn_idle),
        ("uplinkOnly", level.uplink_only, d.uplink_only),
        ("downlinkOnly", level.downlink_only, d.downlink_only),
    ];
    for (name, value, default) in times {
        if value != default {
            out.push(format!("{name} {}s", value.as_secs()));
        }
    }
    if level.stats_user_uplink {
        out.push("statsUserUplink".into());
    }
    if level.stats_user_downlink {
        out.push("statsUserDownlink".into());
    }
    if level.stats_user_online {
        out.push("statsUserOnline".into());
    }
    out
}

/// The kcptun settings both ends must agree on, in kcptun's words.
/// udp2raw's knobs in one line; never the key.
fn udp2raw_tuning(t: &crate::plan_udp2raw::Udp2rawTuning) -> String {
    format!(
        "{} {} {}, seq mode {}{}{}",
        t.raw_mode.name(),
        t.cipher.name(),
        t.auth.name(),
        t.seq_mode,
        if t.fix_gro { ", fix-gro" } else { "" },
        if t.auto_rule { ", auto rules" } else { "" }
    )
}

/// speederv2's knobs in one line; says whether a key is set, never the key.
fn udpspeeder_tuning(t: &crate::plan_udpspeeder::UdpspeederTuning) -> String {
    let p = &t.params;
    format!(
        "mode {}, fec {}, timeout {} ms, mtu {}, key {}{}",
        p.mode as u8,
        if p.disable_fec {
            "off".to_owned()
        } else {
            format!(
                "{}:{}",
                p.max_data_shards(),
                p.redundancy_for(p.max_data_shards())
            )
        },
        p.timeout.as_millis(),
        p.mtu,
        if t.cook.key.is_empty() { "none" } else { "set" },
        if t.cook.disable_obscure {
            ", no obscure"
        } else {
            ""
        },
    )
}

fn kcptun_tuning(t: &crate::plan::KcptunTuning) -> String {
    format!(
        "crypt {}, FEC {}/{}, smux v{}, {}",
        t.crypt_name,
        t.kcp.data_shards,
        t.kcp.parity_shards,
        t.smux_version,
        if t.compress { "snappy" } else { "nocomp" }
    )
}
