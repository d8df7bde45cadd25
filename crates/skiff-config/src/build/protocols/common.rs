//! Pieces every user-carrying protocol's settings share: the server address and port of an
//! outbound, a user's level and email.

use std::collections::HashSet;

use super::valid_host;
use crate::diag::Diagnostic;
use crate::raw::values::{Int, LEVEL, PORT_NUMBER, out_of_range};
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
    port: Option<Int>,
    loc: &Loc,
    protocol: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<u16> {
    match port {
        None => {
            diags.push(loc.error(format!("missing `port` of the {protocol} server")));
            None
        }
        Some(p) => match p.get::<u16>() {
            Some(p) if p != 0 => Some(p),
            _ => {
                diags.push(loc.error(out_of_range(p, PORT_NUMBER)));
                None
            }
        },
    }
}

pub fn level(value: Option<Int>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> u32 {
    match value {
        None => 0,
        Some(v) => v.get::<u32>().unwrap_or_else(|| {
            diags.push(loc.error(out_of_range(v, LEVEL)));
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
