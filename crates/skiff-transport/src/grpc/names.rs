//! The request paths of Xray's gRPC service from `serviceName` (transport/internet/grpc
//! config.go `getServiceName`, `getTunStreamName`, `getTunMultiStreamName`).
//!
//! A plain name `N` gives `/N/Tun` and `/N/TunMulti`. A name starting with "/" is a custom
//! path: `/a/b/tun` gives `/a/b/tun` for both modes on a client; a server given `/a/b/tun|multi`
//! serves `/a/b/tun` and `/a/b/multi`, and given no "|" serves one path, for both.

/// The two paths a service answers on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePaths {
    pub tun: String,
    pub tun_multi: String,
}

impl ServicePaths {
    pub fn new(service_name: &str) -> Self {
        let service = service(service_name);
        ServicePaths {
            tun: format!("/{service}/{}", tun_stream(service_name)),
            tun_multi: format!("/{service}/{}", tun_multi_stream(service_name)),
        }
    }

    /// The path a client calls.
    pub fn for_client(&self, multi_mode: bool) -> &str {
        if multi_mode {
            &self.tun_multi
        } else {
            &self.tun
        }
    }
}

fn service(name: &str) -> String {
    if !name.starts_with('/') {
        return path_escape(name);
    }
    // Everything between the first "/" and the last, each segment escaped.
    let last = name.rfind('/').unwrap_or(0).max(1);
    let raw = &name[1..last];
    raw.split('/')
        .map(path_escape)
        .collect::<Vec<_>>()
        .join("/")
}

fn ending(name: &str) -> &str {
    &name[name.rfind('/').map_or(0, |i| i + 1)..]
}

fn tun_stream(name: &str) -> String {
    if !name.starts_with('/') {
        return "Tun".into();
    }
    path_escape(ending(name).split('|').next().unwrap_or(""))
}

fn tun_multi_stream(name: &str) -> String {
    if !name.starts_with('/') {
        return "TunMulti".into();
    }
    let mut parts = ending(name).split('|');
    let first = parts.next().unwrap_or("");
    path_escape(parts.next().unwrap_or(first))
}

/// Go's `url.PathEscape`: all but letters, digits and `-_.~$&+:=@` as %XX (upper-case hex).
pub fn path_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~$&+:=@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(name: &str) -> (String, String) {
        let p = ServicePaths::new(name);
        (p.tun, p.tun_multi)
    }

    #[test]
    fn xray_service_names() {
        assert_eq!(paths("gun"), ("/gun/Tun".into(), "/gun/TunMulti".into()));
        assert_eq!(paths(""), ("//Tun".into(), "//TunMulti".into()));
        assert_eq!(
            paths("a b/c"),
            ("/a%20b%2Fc/Tun".into(), "/a%20b%2Fc/TunMulti".into())
        );
        assert_eq!(
            paths("/my/sample/path1|path2"),
            ("/my/sample/path1".into(), "/my/sample/path2".into())
        );
        assert_eq!(
            paths("/my/sample/path1"),
            ("/my/sample/path1".into(), "/my/sample/path1".into())
        );
        assert_eq!(paths("/x"), ("//x".into(), "//x".into()));
        assert_eq!(paths("/"), ("//".into(), "//".into()));
        assert_eq!(paths("/a|b/c|d"), ("/a%7Cb/c".into(), "/a%7Cb/d".into()));
        assert_eq!(path_escape("$&+:=@,;?"), "$&+:=@%2C%3B%3F");
    }
}
