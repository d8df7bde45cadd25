//! Pieces every user-carrying protocol's settings share: the server address and port of an
//! outbound, a user's level and email.

use std::collections::HashSet;

use super::valid_host;
use crate::diag::Diagnostic;
use crate::source::Loc;

pub fn server_address(
    address: Option<&str>,
    loc: &Loc,
    protocol: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<String> {
    match address.map(str::trim).filter(|a| !a.is_empty()) {
        None => {
            diags.push(loc.error(format!("missing `address` of the {protocol} server")));
            None
        }
        Some(a) if valid_host(a) => Some(
            a.strip_prefix('[')
                .and_then(|a| a.strip_suffix(']'))
                .unwrap_or(a)
                .to_owned(),
        ),
        Some(a) => {
            diags.push(loc.error(format!("`{a}` is not an IP address or domain name")));
            None
        }
    }
}

pub fn server_port(
    port: Option<i64>,
    loc: &Loc,
    protocol: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<u16> {
    match port {
        None => {
            diags.push(loc.error(format!("missing `port` of the {protocol} server")));
            None
        }
        Some(p) => match u16::try_from(p) {
            Ok(p) if p != 0 => Some(p),
            _ => {
                diags.push(loc.error(format!("port {p} is out of range (1-65535)")));
                None
            }
        },
    }
}

pub fn level(value: Option<i64>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> u32 {
    match value {
        None => 0,
        Some(v) => u32::try_from(v).unwrap_or_else(|_| {
            diags.push(loc.error(format!("level {v} is out of range (0-{})", u32::MAX)));
            0
        }),
    }
}

/// A user's `email` ("" is none). Xray refuses a second user with the same email (they key
/// statistics), case-insensitively; `seen` collects them across one inbound. `loc` is the
/// user object.
pub fn email(
    email: Option<&str>,
    loc: &Loc,
    seen: &mut HashSet<String>,
    diags: &mut Vec<Diagnostic>,
) -> Option<String> {
    let email = email.map(str::trim).filter(|e| !e.is_empty())?.to_owned();
    if !seen.insert(email.to_lowercase()) {
        diags.push(
            loc.key("email")
                .error(format!("another client already has the email `{email}`")),
        );
    }
    Some(email)
}
