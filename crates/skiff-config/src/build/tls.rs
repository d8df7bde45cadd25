//! `tlsSettings` → [`TlsPlan`]. Certificate and key files are read here, at load time, so a
//! missing file is a config error with its path. A relative path is looked up in the working
//! directory (as Xray does), then beside the config file that names it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error_count;
use super::stream::Side;
use crate::diag::Diagnostic;
use crate::plan::{CertificatePlan, TlsPlan};
use crate::raw::bounds::{RawCertificate, RawTlsSettings};
use crate::raw::kind;
use crate::source::Loc;

pub fn tls_plan(
    raw: RawTlsSettings,
    loc: &Loc,
    side: Side,
    diags: &mut Vec<Diagnostic>,
) -> Option<TlsPlan> {
    let before = error_count(diags);
    let server_name = raw
        .server_name
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let alpn: Vec<String> = raw
        .alpn
        .as_ref()
        .map(|l| {
            l.items
                .iter()
                .flat_map(|a| a.split(','))
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let min_version = version(raw.min_version.as_deref(), &loc.key("minVersion"), diags);
    let max_version = version(raw.max_version.as_deref(), &loc.key("maxVersion"), diags);
    if let (Some(min), Some(max)) = (&min_version, &max_version)
        && min > max
    {
        diags.push(
            loc.key("minVersion")
                .error(format!("minVersion {min} is higher than maxVersion {max}")),
        );
    }
    let mut pinned = Vec::new();
    if let Some(list) = &raw.pinned_peer_cert_sha256 {
        let ploc = loc.key("pinnedPeerCertSha256");
        for (i, item) in list.items.iter().enumerate() {
            let iloc = if list.was_list {
                ploc.index(i)
            } else {
                ploc.clone()
            };
            for digest in item.split(',').map(str::trim).filter(|d| !d.is_empty()) {
                match parse_sha256(digest) {
                    Some(d) => pinned.push(d),
                    None => diags.push(iloc.error(format!(
                        "`{digest}` is not a SHA-256 digest (64 hex digits, optionally separated by `:`)"
                    ))),
                }
            }
        }
    }
    let fingerprint = tls_fingerprint(
        raw.fingerprint.as_deref(),
        &loc.key("fingerprint"),
        side,
        diags,
    );
    unsupported_keys(&raw, loc, diags);

    let mut certificates = Vec::new();
    let cloc = loc.key("certificates");
    for (i, cert) in raw.certificates.iter().flatten().enumerate() {
        if let Some(c) = certificate(cert, &cloc.index(i), diags) {
            certificates.push(c);
        }
    }
    let listed = raw.certificates.as_ref().is_some_and(|c| !c.is_empty());
    match side {
        Side::Inbound if !listed => {
            let at = if raw.certificates.is_some() {
                cloc
            } else {
                loc.clone()
            };
            diags.push(at.error(
                "a TLS inbound needs at least one certificate (tlsSettings.certificates)",
            ));
        }
        Side::Outbound if listed => diags.push(cloc.error(
            "certificates in an outbound's tlsSettings (client certificates, custom CAs) are not supported by this version of skiff yet",
        )),
        _ => {}
    }
    if side == Side::Outbound && raw.reject_unknown_sni == Some(true) {
        diags.push(
            loc.key("rejectUnknownSni")
                .warning("rejectUnknownSni only applies to inbounds and is ignored here"),
        );
    }
    (error_count(diags) == before).then_some(TlsPlan {
        server_name,
        alpn,
        min_version,
        max_version,
        allow_insecure: raw.allow_insecure.unwrap_or(false),
        pinned_peer_cert_sha256: pinned,
        reject_unknown_sni: raw.reject_unknown_sni.unwrap_or(false),
        certificates,
        fingerprint,
    })
}

/// `fingerprint` (lower-cased): a browser ClientHello for an outbound, from Xray's list of
/// names. `unsafe`, like an empty value, means no imitation (Xray's own Go TLS hello).
fn tls_fingerprint(
    value: Option<&str>,
    loc: &Loc,
    side: Side,
    diags: &mut Vec<Diagnostic>,
) -> Option<String> {
    let fp = value
        .map(str::trim)
        .filter(|f| !f.is_empty())?
        .to_ascii_lowercase();
    if side == Side::Inbound {
        diags.push(loc.warning("fingerprint only applies to outbounds and is ignored here"));
        return None;
    }
    if fp == "unsafe" {
        return None;
    }
    if fp != "hellogolang" && !super::reality::FINGERPRINTS.contains(&fp.as_str()) {
        diags.push(loc.error(format!(
            "unknown fingerprint `{fp}` (such as \"chrome\", \"firefox\", \"safari\", \"random\")"
        )));
        return None;
    }
    Some(fp)
}

/// `minVersion` / `maxVersion`: skiff's TLS stack speaks 1.2 and 1.3 only.
fn version(value: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<String> {
    match value.map(str::trim).filter(|v| !v.is_empty())? {
        v @ ("1.2" | "1.3") => Some(v.to_owned()),
        v @ ("1.0" | "1.1") => {
            diags.push(loc.error(format!(
                "TLS {v} is not supported by this version of skiff (only 1.2 and 1.3)"
            )));
            None
        }
        v => {
            diags.push(loc.error(format!(
                "unknown TLS version `{v}` (expected \"1.2\" or \"1.3\")"
            )));
            None
        }
    }
}

/// 64 hex digits, optionally with `:` between bytes (as `openssl x509 -fingerprint` prints).
fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let digits: Vec<u8> = text.bytes().filter(|&b| b != b':').collect();
    if digits.len() != 64 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        let hex = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(hex, 16).ok()?;
    }
    Some(out)
}

fn unsupported_keys(raw: &RawTlsSettings, loc: &Loc, diags: &mut Vec<Diagnostic>) {
    let set = |v: &Option<Value>| {
        v.as_ref().is_some_and(|v| match v {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            Value::Number(_) => true,
        })
    };
    // Tuning knobs: the connection still works, with skiff's defaults.
    for (key, value) in [
        ("cipherSuites", &raw.cipher_suites),
        ("curvePreferences", &raw.curve_preferences),
        ("enableSessionResumption", &raw.enable_session_resumption),
        ("masterKeyLog", &raw.master_key_log),
    ] {
        if set(value) {
            diags.push(loc.key(key).warning(format!(
                "{key} is not supported by this version of skiff yet and is ignored"
            )));
        }
    }
    // These change who is trusted or how the handshake looks: never silently dropped.
    for (key, value) in [
        ("disableSystemRoot", &raw.disable_system_root),
        (
            "pinnedPeerCertificateChainSha256",
            &raw.pinned_peer_certificate_chain_sha256,
        ),
        (
            "pinnedPeerCertificatePublicKeySha256",
            &raw.pinned_peer_certificate_public_key_sha256,
        ),
        ("verifyPeerCertInNames", &raw.verify_peer_cert_in_names),
        ("verifyPeerCertByName", &raw.verify_peer_cert_by_name),
        ("echConfigList", &raw.ech_config_list),
        ("echServerKeys", &raw.ech_server_keys),
        ("echForceQuery", &raw.ech_force_query),
    ] {
        if set(value) {
            diags.push(loc.key(key).error(format!(
                "{key} is not supported by this version of skiff yet"
            )));
        }
    }
}

/// One `certificates` entry: PEM from `certificateFile`/`keyFile` (read now) or inline
/// `certificate`/`key` (a string or an array of lines). A file wins over inline text, as in Xray.
fn certificate(
    raw: &RawCertificate,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<CertificatePlan> {
    let before = error_count(diags);
    match raw.usage.as_deref().map(str::trim) {
        None | Some("" | "encipherment") => {}
        Some(u @ ("verify" | "issue")) => diags.push(loc.key("usage").error(format!(
            "certificate usage `{u}` is not supported by this version of skiff yet (only \"encipherment\")"
        ))),
        Some(u) => diags.push(loc.key("usage").error(format!(
            "unknown certificate usage `{u}` (expected encipherment, verify or issue)"
        ))),
    }
    if raw.build_chain == Some(Value::Bool(true)) {
        diags.push(
            loc.key("buildChain")
                .error("buildChain is not supported by this version of skiff yet"),
        );
    }
    let certificate_pem = pem(
        (&raw.certificate_file, "certificateFile"),
        (&raw.certificate, "certificate"),
        "CERTIFICATE",
        loc,
        diags,
    );
    let key_pem = pem(
        (&raw.key_file, "keyFile"),
        (&raw.key, "key"),
        "PRIVATE KEY",
        loc,
        diags,
    );
    if error_count(diags) > before {
        return None;
    }
    let file = |f: &Option<String>| f.clone().filter(|p| !p.trim().is_empty());
    Some(CertificatePlan {
        certificate_pem: certificate_pem?,
        key_pem: key_pem?,
        certificate_file: file(&raw.certificate_file),
        key_file: file(&raw.key_file),
    })
}

/// Reads `path` as written (relative to the working directory, as Xray does). A relative path
/// that is not there is then looked up in the directory of `config` (the file that names it),
/// so `skiff check -c /etc/skiff/config.json` finds `cert.pem` beside it from any directory.
/// The error names every path tried.
fn read_beside_config(path: &str, config: &str) -> Result<String, String> {
    let written = Path::new(path);
    let first = match std::fs::read_to_string(written) {
        Ok(text) => return Ok(text),
        Err(e) => e,
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let beside = Path::new(config)
        .parent()
        .map(|dir| dir.join(written))
        // A config in the working directory has nowhere else to look.
        .filter(|b| cwd.join(b) != cwd.join(written));
    let beside = match beside {
        Some(b) if written.is_relative() && first.kind() == std::io::ErrorKind::NotFound => b,
        _ => return Err(format!("cannot read `{path}`: {first}")),
    };
    std::fs::read_to_string(&beside).map_err(|e| {
        format!(
            "cannot read `{path}`: not in the working directory ({}: {first}) nor beside the \
             config file ({}: {e})",
            cwd.join(written).display(),
            beside.display()
        )
    })
}

fn pem(
    (file, file_key): (&Option<String>, &str),
    (inline, inline_key): (&Option<Value>, &str),
    label: &str,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<String> {
    let (text, at) = if let Some(path) = file.as_deref().filter(|p| !p.trim().is_empty()) {
        let at = loc.key(file_key);
        match read_beside_config(path, &loc.file.name) {
            Ok(text) => (text, at),
            Err(message) => {
                diags.push(at.error(message));
                return None;
            }
        }
    } else {
        let at = loc.key(inline_key);
        match inline {
            None | Some(Value::Null) => {
                diags.push(loc.error(format!("missing `{file_key}` or `{inline_key}`")));
                return None;
            }
            Some(Value::String(s)) => (s.clone(), at),
            Some(Value::Array(lines)) => {
                // Joined as Xray joins them (no newline after the last), so that the PEM
                // ListInbounds reports is byte for byte Xray's.
                let mut text = String::new();
                for (i, line) in lines.iter().enumerate() {
                    if i > 0 {
                        text.push('\n');
                    }
                    let Some(line) = line.as_str() else {
                        diags.push(
                            at.index(i)
                                .error(format!("invalid type: {}, expected a string", kind(line))),
                        );
                        return None;
                    };
                    text.push_str(line);
                }
                (text, at)
            }
            Some(other) => {
                diags.push(at.error(format!(
                    "invalid type: {}, expected a string or an array of strings",
                    kind(other)
                )));
                return None;
            }
        }
    };
    let begin = text
        .lines()
        .map(str::trim)
        .any(|l| l.starts_with("-----BEGIN ") && l.ends_with(&format!("{label}-----")));
    if !begin {
        diags.push(at.error(format!("no PEM `-----BEGIN …{label}-----` block found")));
        return None;
    }
    Some(text)
}
