//! Trojan `settings`: inbound clients (password, email, level) and fallbacks (the same list
//! and checks as VLESS's), outbound `servers` (one server).

use std::collections::HashSet;

use super::super::error_count;
use super::common::{email, level, server_address, server_port};
use super::fallbacks::fallbacks;
use crate::diag::Diagnostic;
use crate::plan::{TrojanClient, TrojanInbound, TrojanOutbound};
use crate::raw::settings::{RawTrojanServer, TrojanInboundSettings, TrojanOutboundSettings};
use crate::source::Loc;

pub fn inbound(
    s: TrojanInboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<TrojanInbound> {
    let before = error_count(diags);
    let mut clients = Vec::new();
    let mut emails = HashSet::new();
    let mut passwords = HashSet::new();
    for (i, raw) in s.clients.iter().flatten().enumerate() {
        let cloc = loc.key("clients").index(i);
        let password = password(raw.password.as_deref(), &cloc, diags);
        flow(raw.flow.as_deref(), &cloc, diags);
        let level = level(raw.level, &cloc.key("level"), diags);
        let email = email(raw.email.as_deref(), &cloc, &mut emails, diags);
        if let Some(password) = password {
            if !passwords.insert(password.clone()) {
                // Trojan identifies a user by the password alone: a second one could never
                // be told apart from the first.
                diags.push(
                    cloc.key("password")
                        .error("another client already has this password"),
                );
                continue;
            }
            clients.push(TrojanClient {
                password,
                email,
                level,
            });
        }
    }
    let fallbacks = fallbacks(s.fallbacks.as_deref(), loc, diags);
    (error_count(diags) == before).then_some(TrojanInbound { clients, fallbacks })
}

pub fn outbound(
    s: TrojanOutboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<TrojanOutbound> {
    let before = error_count(diags);
    let (server, sloc) = one_server(s.servers.as_deref(), loc, diags)?;
    let address = server_address(
        server.address.as_deref(),
        &sloc.key("address"),
        "Trojan",
        diags,
    );
    let port = server_port(server.port, &sloc.key("port"), "Trojan", diags);
    let password = password(server.password.as_deref(), &sloc, diags);
    flow(server.flow.as_deref(), &sloc, diags);
    let level = level(server.level, &sloc.key("level"), diags);
    let email = server
        .email
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned);
    if error_count(diags) > before {
        return None;
    }
    Some(TrojanOutbound {
        address: address?,
        port: port?,
        password: password?,
        email,
        level,
    })
}

fn one_server<'a>(
    servers: Option<&'a [RawTrojanServer]>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<(&'a RawTrojanServer, Loc)> {
    let sloc = loc.key("servers");
    match servers {
        None => {
            diags.push(
                sloc.error("missing `servers`: a Trojan outbound needs a server to connect to"),
            );
            None
        }
        Some([]) => {
            diags.push(sloc.error("`servers` is empty: a Trojan outbound needs one server"));
            None
        }
        Some([server]) => Some((server, sloc.index(0))),
        Some(list) => {
            diags.push(sloc.index(1).error(format!(
                "{} servers are listed, but this version of skiff supports exactly one server per Trojan outbound",
                list.len()
            )));
            None
        }
    }
}

/// `password`: required and non-empty (every client would otherwise share the hash of "").
/// `loc` is the user or server object.
fn password(password: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<String> {
    match password {
        None => {
            diags.push(loc.key("password").error("missing `password`"));
            None
        }
        Some("") => {
            diags.push(loc.key("password").error("`password` must not be empty"));
            None
        }
        Some(p) => Some(p.to_owned()),
    }
}

/// `flow`: Xray's XTLS flows for Trojan were removed in Xray 1.8; none is supported.
fn flow(flow: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) {
    if let Some(f) = flow.map(str::trim).filter(|f| !f.is_empty()) {
        diags.push(loc.key("flow").error(format!(
            "flow `{f}` is not supported for Trojan (only \"\"; XTLS flows for Trojan were removed from Xray)"
        )));
    }
}
