//! VMess `settings`: inbound clients, outbound server and user. Only VMess AEAD exists in
//! skiff (as in Xray): a user with `alterId` above 0 asks for the legacy MD5 authentication
//! and is refused. Ids are parsed as VLESS ids are (a UUID, or Xray's mapping of a short
//! string).

use std::collections::HashSet;

use super::super::{error_count, lower};
use super::common::{level, server_address, server_port};
use super::vless::{one_server, one_user, user_id};
use crate::diag::Diagnostic;
use crate::plan::{VmessClient, VmessInbound, VmessOutbound, VmessSecurity};
use crate::raw::settings::{RawVmessUser, VmessInboundSettings, VmessOutboundSettings};
use crate::raw::values::Int;
use crate::source::Loc;

/// The protocol's name in messages.
const PROTO: &str = "VMess";
const SECURITIES: &str = "\"auto\", \"aes-128-gcm\", \"chacha20-poly1305\", \"none\" or \"zero\"";

/// `alterId`: 0 or absent. `loc` is the alterId key.
fn alter_id(value: Option<Int>, loc: &Loc, diags: &mut Vec<Diagnostic>) {
    match value {
        None => {}
        Some(n) if n.is_zero() => {}
        Some(n) if !n.is_negative() => diags.push(loc.error(format!(
            "alterId {n}: only VMess AEAD is supported (alterId 0); the legacy MD5 \
             authentication that alterId > 0 selects was removed from Xray"
        ))),
        Some(n) => {
            diags.push(loc.error(format!("alterId {n} is out of range (only 0: VMess AEAD)")))
        }
    }
}

pub fn inbound(
    s: VmessInboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<VmessInbound> {
    let before = error_count(diags);
    let default_level = match &s.default {
        None => 0,
        Some(d) => {
            alter_id(d.alter_id, &loc.key("default").key("alterId"), diags);
            level(d.level, &loc.key("default").key("level"), diags)
        }
    };
    if s.detour.is_some() {
        diags.push(
            loc.key("detour")
                .error("`detour` (VMess dynamic ports) is not supported; Xray removed it as well"),
        );
    }
    let (key, list) = match (&s.clients, &s.users) {
        (Some(clients), Some(_)) => {
            diags.push(
                loc.key("users")
                    .warning("`users` is ignored because `clients` is given (as in Xray)"),
            );
            ("clients", clients.as_slice())
        }
        (Some(clients), None) => ("clients", clients.as_slice()),
        (None, Some(users)) => ("users", users.as_slice()),
        (None, None) => ("clients", &[][..]),
    };
    let mut clients = Vec::new();
    let mut emails = HashSet::new();
    for (i, raw) in list.iter().enumerate() {
        let cloc = loc.key(key).index(i);
        let id = user_id(raw.id.as_deref(), PROTO, &cloc, diags);
        alter_id(raw.alter_id, &cloc.key("alterId"), diags);
        for (field, given) in [
            ("security", &raw.security),
            ("experiments", &raw.experiments),
        ] {
            if given.is_some() {
                diags.push(cloc.key(field).warning(format!(
                    "`{field}` has no effect on an inbound: the connecting client chooses"
                )));
            }
        }
        let level = match raw.level {
            None => default_level,
            Some(_) => level(raw.level, &cloc.key("level"), diags),
        };
        let email = raw
            .email
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned);
        if let Some(email) = &email
            && !emails.insert(email.to_lowercase())
        {
            // Xray refuses a second user with the same email (they key statistics).
            diags.push(
                cloc.key("email")
                    .error(format!("another client already has the email `{email}`")),
            );
        }
        if let Some(id) = id {
            let security = raw.security.as_deref().map(str::to_ascii_lowercase);
            clients.push(VmessClient {
                id,
                email,
                level,
                security,
            });
        }
    }
    (error_count(diags) == before).then_some(VmessInbound {
        clients,
        disable_insecure_encryption: s.disable_insecure_encryption.unwrap_or(false),
    })
}

pub fn outbound(
    s: VmessOutboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<VmessOutbound> {
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
            RawVmessUser {
                id: s.id.clone(),
                email: s.email.clone(),
                level: s.level,
                alter_id: s.alter_id,
                security: s.security.clone(),
                experiments: s.experiments.clone(),
            },
            loc.clone(),
        ),
        (None, false) => {
            diags.push(
                loc.key("vnext")
                    .error("missing `vnext`: a VMess outbound needs a server to connect to"),
            );
            return None;
        }
    };
    let address = server_address(address.0, &address.1, PROTO, diags);
    let port = server_port(port.0, &port.1, PROTO, diags);
    let id = user_id(user.id.as_deref(), PROTO, &uloc, diags);
    alter_id(user.alter_id, &uloc.key("alterId"), diags);
    let security = match lower(user.security.as_deref()).as_deref() {
        None | Some("auto") => VmessSecurity::Auto,
        Some("aes-128-gcm") => VmessSecurity::Aes128Gcm,
        Some("chacha20-poly1305") => VmessSecurity::ChaCha20Poly1305,
        Some("none") => VmessSecurity::None,
        Some("zero") => VmessSecurity::Zero,
        Some(other) => {
            diags.push(uloc.key("security").error(format!(
                "unknown VMess security `{other}` (expected {SECURITIES})"
            )));
            VmessSecurity::Auto
        }
    };
    let (mut authenticated_length, mut no_termination_signal) = (false, false);
    for name in user
        .experiments
        .as_deref()
        .unwrap_or_default()
        .split('|')
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        match name {
            "AuthenticatedLength" => authenticated_length = true,
            "NoTerminationSignal" => no_termination_signal = true,
            other => diags.push(uloc.key("experiments").warning(format!(
                "unknown VMess experiment `{other}` is ignored (known: AuthenticatedLength, NoTerminationSignal)"
            ))),
        }
    }
    if authenticated_length && matches!(security, VmessSecurity::None | VmessSecurity::Zero) {
        diags.push(
            uloc.key("experiments")
                .warning("AuthenticatedLength has no effect with security \"none\" or \"zero\""),
        );
    }
    let level = level(user.level, &uloc.key("level"), diags);
    if error_count(diags) > before {
        return None;
    }
    Some(VmessOutbound {
        address: address?,
        port: port?,
        id: id?,
        security,
        level,
        authenticated_length,
        no_termination_signal,
    })
}
