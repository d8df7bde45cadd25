//! The HTTP/1 sniffer: the `Host` header of a request, plus the request's attributes
//! (`:method`, `:path`, header values) that routing rules' `attrs` match.

use crate::{Protocol, Sniff, Sniffed};

/// The methods Xray recognises a request by (compared case-insensitively).
const METHODS: [&[u8]; 7] = [
    b"get", b"post", b"head", b"put", b"delete", b"options", b"connect",
];

/// Largest header block looked at; past it without a `Host`, the stream is not ours to name.
pub const MAX_HEADER_LEN: usize = 16 * 1024;

/// Finds the `Host` of the request at the start of `prefix`. Lines are taken only once
/// complete (ended by `\n`), so a host cut in the middle is never reported.
pub fn sniff_http(prefix: &[u8]) -> Sniff {
    match starts_with_method(prefix) {
        Some(true) => {}
        Some(false) => return Sniff::NotThis,
        None => return Sniff::NeedMore,
    }
    let window = &prefix[..prefix.len().min(MAX_HEADER_LEN)];
    let mut lines = window.split_inclusive(|&b| b == b'\n');
    let Some(request_line) = lines.next().filter(|l| l.ends_with(b"\n")) else {
        return need_more_unless_full(prefix);
    };
    let mut attributes = request_attributes(trim_eol(request_line));
    let mut host = None;
    let mut ended = false;
    for line in lines {
        if !line.ends_with(b"\n") {
            break; // incomplete last line
        }
        let line = trim_eol(line);
        if line.is_empty() {
            ended = true;
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let key = String::from_utf8_lossy(&line[..colon]).to_ascii_lowercase();
        let value = String::from_utf8_lossy(line[colon + 1..].trim_ascii()).into_owned();
        if key == "host" && host.is_none() {
            host = Some(value.to_ascii_lowercase());
        }
        attributes.push((key, value));
    }
    match host {
        Some(value) => match strip_port(&value) {
            Some(name) => Sniff::Found(Sniffed {
                protocol: Protocol::Http,
                domain: name.to_owned(),
                attributes,
            }),
            None => Sniff::NotThis,
        },
        None if ended => Sniff::NotThis,
        None => need_more_unless_full(prefix),
    }
}

fn need_more_unless_full(prefix: &[u8]) -> Sniff {
    if prefix.len() >= MAX_HEADER_LEN {
        Sniff::NotThis
    } else {
        Sniff::NeedMore
    }
}

/// Some(true) if `prefix` begins with a method, Some(false) if it cannot, None if too short.
fn starts_with_method(prefix: &[u8]) -> Option<bool> {
    let mut could = false;
    for method in METHODS {
        if prefix.len() >= method.len() {
            if prefix[..method.len()].eq_ignore_ascii_case(method) {
                return Some(true);
            }
        } else if method[..prefix.len()].eq_ignore_ascii_case(prefix) {
            could = true;
        }
    }
    if could { None } else { Some(false) }
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// `:method` and `:path` of a three-part request line (as Xray, the method as sent).
fn request_attributes(line: &[u8]) -> Vec<(String, String)> {
    let parts: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    if parts.len() != 3 {
        return Vec::new();
    }
    vec![
        (
            ":method".into(),
            String::from_utf8_lossy(parts[0]).into_owned(),
        ),
        (
            ":path".into(),
            String::from_utf8_lossy(parts[1]).into_owned(),
        ),
    ]
}

/// The host of a `Host` value without its port: `[v6]:port` → `v6`, `name:port` → `name`.
fn strip_port(value: &str) -> Option<&str> {
    let host = if let Some(rest) = value.strip_prefix('[') {
        &rest[..rest.find(']')?]
    } else {
        match value.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            Some(_) => return None,
            None => value,
        }
    };
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(s: Sniff) -> Option<String> {
        match s {
            Sniff::Found(f) => Some(f.domain),
            _ => None,
        }
    }

    #[test]
    fn host_header_names_the_domain() {
        let req = b"GET /x HTTP/1.1\r\nUser-Agent: t\r\nHost: B.Test:8080\r\n\r\n";
        let Sniff::Found(found) = sniff_http(req) else {
            panic!("not found");
        };
        assert_eq!(found.domain, "b.test");
        assert!(found.attributes.contains(&(":method".into(), "GET".into())));
        assert!(found.attributes.contains(&(":path".into(), "/x".into())));
        assert!(
            found
                .attributes
                .contains(&("user-agent".into(), "t".into()))
        );
        assert_eq!(
            domain(sniff_http(b"post / HTTP/1.1\nhost: [::1]:80\n\n")),
            Some("::1".into())
        );
    }

    #[test]
    fn prefixes_wait_and_other_protocols_do_not() {
        let req = b"GET / HTTP/1.1\r\nHost: b.test\r\n\r\n";
        let host_end = req.len() - 2;
        for cut in 0..host_end {
            assert_eq!(sniff_http(&req[..cut]), Sniff::NeedMore, "cut {cut}");
        }
        assert_eq!(sniff_http(b"SSH-2.0-x\r\n"), Sniff::NotThis);
        assert_eq!(sniff_http(b"\x16\x03\x01"), Sniff::NotThis);
        assert_eq!(sniff_http(b"GET / HTTP/1.0\r\n\r\n"), Sniff::NotThis);
        assert_eq!(
            sniff_http(b"GET / HTTP/1.1\r\nHost: :80\r\n\r\n"),
            Sniff::NotThis
        );
    }
}
