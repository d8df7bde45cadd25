//! VLESS `settings`: inbound clients and fallbacks, outbound server and user. Ids are parsed
//! exactly as the protocol code does ([`UserId::parse`]), so a config that loads has ids the
//! handlers accept.

use std::collections::HashSet;

use skiff_proto::vless::UserId;

use super::super::error_count;
use super::common::{email, level, server_address, server_port};
use super::fallbacks::fallbacks;
use crate::diag::Diagnostic;
use crate::plan::{VlessClient, VlessFlow, VlessInbound, VlessOutbound};
use crate::raw::settings::{RawVlessUser, VlessInboundSettings, VlessOutboundSettings};
use crate::source::Loc;

const VISION: &str = "xtls-rprx-vision";
const VISION_UDP443: &str = "xtls-rprx-vision-udp443";
/// The protocol's name in messages.
const PROTO: &str = "VLESS";

pub fn inbound(
    s: VlessInboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<VlessInbound> {
    let before = error_count(diags);
    match s.decryption.as_deref() {
        Some("none") => {}
        None => diags.push(loc.key("decryption").error(
            "missing `decryption`: VLESS inbounds must set \"decryption\": \"none\"",
        )),
        Some(other) => diags.push(loc.key("decryption").error(format!(
            "decryption `{other}` is not supported (VLESS inbounds must set \"decryption\": \"none\")"
        ))),
    }
    let mut clients = Vec::new();
    let mut emails = HashSet::new();
    for (i, raw) in s.clients.iter().flatten().enumerate() {
        let cloc = loc.key("clients").index(i);
        let id = user_id(raw.id.as_deref(), PROTO, &cloc, diags);
        let flow = flow(raw.flow.as_deref(), &cloc, diags);
        if flow == VlessFlow::VisionUdp443 {
            diags.push(cloc.key("flow").warning(
                "`xtls-rprx-vision-udp443` is a client setting; this inbound treats it as `xtls-rprx-vision`",
            ));
        }
        if raw.encryption.is_some() {
            diags.push(
                cloc.key("encryption")
                    .warning("`encryption` belongs to outbound users; inbounds use `decryption`"),
            );
        }
        let level = level(raw.level, &cloc.key("level"), diags);
        let email = email(raw.email.as_deref(), &cloc, &mut emails, diags);
        if let Some(id) = id {
            clients.push(VlessClient {
                id,
                email,
                level,
                flow,
            });
        }
    }
    let fallbacks = fallbacks(s.fallbacks.as_deref(), loc, diags);
    (error_count(diags) == before).then_some(VlessInbound { clients, fallbacks })
}

pub fn outbound(
    s: VlessOutboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<VlessOutbound> {
    let before = error_count(diags);
    let flat_given = s.address.is_some() || s.port.is_some() || s.id.is_some();
    let (address, port, user, uloc) = match (&s.vnext, flat_given) {
        (Some(_), true) => {
            diags.push(loc.error(
                "give either `vnext` or the flat form (`address`, `port`, `id` in settings), not both",
            ));
            return None;
        }
        (Some(vnext), false) => {
            let (server, sloc) = one_server(vnext, PROTO, loc, diags)?;
            let (user, uloc) = one_user(server.users.as_deref(), PROTO, &sloc, diags)?;
            (
                (server.address.as_deref(), sloc.key("address")),
                (server.port, sloc.key("port")),
                user.clone(),
                uloc,
            )
        }
        (None, true) => (
            (s.address.as_deref(), loc.key("address")),
            (s.port, loc.key("port")),
            RawVlessUser {
                id: s.id.clone(),
                email: s.email.clone(),
                level: s.level,
                flow: s.flow.clone(),
                encryption: s.encryption.clone(),
            },
            loc.clone(),
        ),
        (None, false) => {
            diags.push(
                loc.key("vnext")
                    .error("missing `vnext`: a VLESS outbound needs a server to connect to"),
            );
            return None;
        }
    };
    let address = server_address(address.0, &address.1, PROTO, diags);
    let port = server_port(port.0, &port.1, PROTO, diags);
    let id = user_id(user.id.as_deref(), PROTO, &uloc, diags);
    match user.encryption.as_deref() {
        Some("none") => {}
        None => diags.push(
            uloc.key("encryption")
                .error("missing `encryption`: VLESS users must set \"encryption\": \"none\""),
        ),
        Some(other) => diags.push(uloc.key("encryption").error(format!(
            "encryption `{other}` is not supported (VLESS users must set \"encryption\": \"none\")"
        ))),
    }
    let flow = flow(user.flow.as_deref(), &uloc, diags);
    let level = level(user.level, &uloc.key("level"), diags);
    if error_count(diags) > before {
        return None;
    }
    Some(VlessOutbound {
        address: address?,
        port: port?,
        id: id?,
        level,
        flow,
    })
}

/// The one `vnext` entry skiff supports (Xray 26 requires exactly one too). `proto` names the
/// protocol in messages.
pub(super) fn one_server<'a, T>(
    vnext: &'a [T],
    proto: &str,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<(&'a T, Loc)> {
    let vloc = loc.key("vnext");
    match vnext {
        [] => {
            diags.push(vloc.error(format!(
                "`vnext` is empty: a {proto} outbound needs one server"
            )));
            None
        }
        [server] => Some((server, vloc.index(0))),
        _ => {
            diags.push(vloc.index(1).error(format!(
                "{} servers are listed, but this version of skiff supports exactly one server per {proto} outbound",
                vnext.len()
            )));
            None
        }
    }
}

/// The one user of a server entry (`loc`) skiff supports.
pub(super) fn one_user<'a, U>(
    users: Option<&'a [U]>,
    proto: &str,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<(&'a U, Loc)> {
    let uloc = loc.key("users");
    match users {
        None => {
            diags.push(uloc.error(format!(
                "missing `users`: a {proto} server entry needs one user"
            )));
            None
        }
        Some([]) => {
            diags.push(uloc.error(format!(
                "`users` is empty: a {proto} server entry needs one user"
            )));
            None
        }
        Some([user]) => Some((user, uloc.index(0))),
        Some(users) => {
            diags.push(uloc.index(1).error(format!(
                "{} users are listed, but this version of skiff supports exactly one user per {proto} server",
                users.len()
            )));
            None
        }
    }
}

/// `id`: a UUID or a 1-30 byte string mapped as Xray does. `loc` is the user object.
pub(super) fn user_id(
    id: Option<&str>,
    proto: &str,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<[u8; 16]> {
    let Some(id) = id else {
        diags.push(loc.key("id").error("missing `id`"));
        return None;
    };
    match UserId::parse(id) {
        Ok(id) => Some(*id.as_bytes()),
        Err(e) => {
            diags.push(loc.key("id").error(format!("invalid {proto} id: {e}")));
            None
        }
    }
}

/// `flow`: "" or XTLS Vision. The XTLS v1 flows Xray removed are named as such. `loc` is
/// the user object.
fn flow(flow: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> VlessFlow {
    match flow.map(str::trim) {
        None | Some("") => VlessFlow::None,
        Some(VISION) => VlessFlow::Vision,
        Some(VISION_UDP443) => VlessFlow::VisionUdp443,
        Some(old) if old.starts_with("xtls-rprx-") && !old.starts_with(VISION) => {
            diags.push(loc.key("flow").error(format!(
                "flow `{old}` is XTLS v1, which Xray removed; use \"{VISION}\""
            )));
            VlessFlow::None
        }
        Some(other) => {
            diags.push(loc.key("flow").error(format!(
                "unknown flow `{other}` (expected \"\" or \"{VISION}\")"
            )));
            VlessFlow::None
        }
    }
}
