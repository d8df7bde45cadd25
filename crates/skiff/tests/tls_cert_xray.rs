//! `skiff tls cert` against `xray tls cert` (Xray from XRAY_BIN or `../shared/peers/bin/xray`;
//! outside CI a missing one skips, under CI it fails). For the same flags, in Go's spellings,
//! both print the same JSON shape and make the same certificate as `openssl x509 -text` shows
//! it (signature and key algorithm, curve, subject and issuer, subjectAltNames, key usages,
//! basic constraints, validity to within a minute); `--file` writes the files Xray writes; a
//! flag value Xray refuses Skiff refuses with a message naming it. A generated certificate
//! and key serve TLS from a Skiff inbound and from Xray's, verified by openssl. Two known
//! differences are asserted as such: the key's PEM label (`PRIVATE KEY`, where Xray writes
//! `RSA PRIVATE KEY` around the same PKCS#8) and an IP address `--domain` (an IP address
//! subjectAltName, where Xray writes a DNS name).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;

fn skiff() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_skiff"))
}

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

fn openssl_present() -> bool {
    tool("openssl", &["/usr/bin/openssl", "/usr/local/bin/openssl"]).is_some()
}

fn run(binary: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(binary);
    cmd.args(args);
    run_bounded(cmd, b"", Duration::from_secs(30))
}

/// `tls cert ARGS`, which must succeed: the parsed JSON and the text as printed.
fn cert_json(binary: &Path, args: &[&str]) -> (serde_json::Value, String) {
    let out = run(binary, &[&["tls", "cert"][..], args].concat());
    assert!(
        out.status.success(),
        "{binary:?} tls cert {args:?}: {out:?}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (value, text)
}

/// The PEM text of a JSON field (an array of lines).
fn pem(json: &serde_json::Value, field: &str) -> String {
    let lines = json[field]
        .as_array()
        .unwrap_or_else(|| panic!("{field} is not an array: {json}"));
    let mut text = String::new();
    for line in lines {
        text.push_str(line.as_str().expect("a string line"));
        text.push('\n');
    }
    text
}

/// The printed JSON with each run of base64 lines as one `B64` line and the key's label
/// made Skiff's: what is left is the layout, which must be Xray's to the byte.
fn skeleton(text: &str) -> String {
    let mut out = Vec::new();
    for line in text.replace("RSA PRIVATE KEY", "PRIVATE KEY").lines() {
        let body = line.trim_start().trim_end_matches(',').trim_matches('"');
        let base64 = line.starts_with("    \"")
            && !body.starts_with("-----")
            && !body.is_empty()
            && body
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
        if base64 {
            if out.last() != Some(&"B64".to_string()) {
                out.push("B64".to_string());
            }
        } else {
            out.push(line.to_string());
        }
    }
    out.join("\n") + if text.ends_with('\n') { "\n" } else { "" }
}

fn openssl(args: &[&str], input: &str) -> String {
    let mut cmd = Command::new("openssl");
    cmd.args(args);
    let out = run_bounded(cmd, input.as_bytes(), Duration::from_secs(30));
    assert!(
        out.status.success(),
        "openssl {args:?}: {out:?}\ninput:\n{input}"
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What `openssl x509 -text` says of a certificate, in comparable pieces.
#[derive(Debug, PartialEq)]
struct Fields {
    signature: String,
    issuer: String,
    subject: String,
    key_algorithm: String,
    curve: String,
    /// Extension header (name and `critical`) → its value lines; the subject key identifier's
    /// value (a hash of each tool's own key) as `<present>`.
    extensions: BTreeMap<String, Vec<String>>,
}

struct Certificate {
    fields: Fields,
    not_before: i64,
    not_after: i64,
}

fn value_after<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label:?} in\n{text}"))
        .trim()
}

fn examine(cert_pem: &str) -> Certificate {
    let text = openssl(&["x509", "-noout", "-text"], cert_pem);
    let mut extensions = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut inside = false;
    for line in text.lines() {
        if line.trim() == "X509v3 extensions:" {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if line.starts_with("    Signature Algorithm:") {
            break;
        }
        let indent = line.len() - line.trim_start().len();
        if indent == 12 {
            let header = line.trim().to_string();
            extensions.insert(header.clone(), Vec::new());
            current = Some(header);
        } else if let Some(header) = &current {
            let value = if header.starts_with("X509v3 Subject Key Identifier") {
                "<present>".to_string()
            } else {
                line.trim().to_string()
            };
            extensions.get_mut(header).unwrap().push(value);
        }
    }
    Certificate {
        fields: Fields {
            signature: value_after(&text, "Signature Algorithm:").to_string(),
            issuer: value_after(&text, "Issuer:").to_string(),
            subject: value_after(&text, "Subject:").to_string(),
            key_algorithm: value_after(&text, "Public Key Algorithm:").to_string(),
            curve: value_after(&text, "ASN1 OID:").to_string(),
            extensions,
        },
        not_before: unix_time(value_after(&text, "Not Before:")),
        not_after: unix_time(value_after(&text, "Not After :")),
    }
}

/// `Nov 27 13:13:43 2026 GMT`, as openssl prints a time, to Unix seconds.
fn unix_time(text: &str) -> i64 {
    let parts: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(parts.len(), 5, "{text}");
    assert_eq!(parts[4], "GMT", "{text}");
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = months.iter().position(|m| *m == parts[0]).expect("month") as i64 + 1;
    let day: i64 = parts[1].parse().unwrap();
    let year: i64 = parts[3].parse().unwrap();
    let hms: Vec<i64> = parts[2].split(':').map(|p| p.parse().unwrap()).collect();
    // Days from 1970-01-01 to the date (proleptic Gregorian; March-based years).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2]
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The key is EC P-256 and is the certificate's.
fn check_key(key_pem: &str, cert_pem: &str, who: &str) {
    let text = openssl(&["pkey", "-noout", "-text"], key_pem);
    assert!(text.contains("Private-Key: (256 bit)"), "{who}: {text}");
    assert_eq!(value_after(&text, "ASN1 OID:"), "prime256v1", "{who}");
    assert_eq!(
        openssl(&["pkey", "-pubout"], key_pem),
        openssl(&["x509", "-noout", "-pubkey"], cert_pem),
        "{who}: the key is not the certificate's"
    );
}

/// Runs both tools with `args` and compares what they made.
fn compare(xray: &Path, args: &[&str], expire_secs: i64) {
    let started = now();
    let (theirs, their_text) = cert_json(xray, args);
    let (ours, our_text) = cert_json(skiff(), args);

    let keys = |v: &serde_json::Value| -> Vec<String> {
        v.as_object().expect("an object").keys().cloned().collect()
    };
    assert_eq!(keys(&theirs), ["certificate", "key"], "{args:?}");
    assert_eq!(keys(&ours), keys(&theirs), "{args:?}");
    assert_eq!(skeleton(&our_text), skeleton(&their_text), "{args:?}");

    let (their_cert, our_cert) = (pem(&theirs, "certificate"), pem(&ours, "certificate"));
    let (their_key, our_key) = (pem(&theirs, "key"), pem(&ours, "key"));
    for (text, label) in [
        (&their_cert, "CERTIFICATE"),
        (&our_cert, "CERTIFICATE"),
        (&their_key, "RSA PRIVATE KEY"),
        (&our_key, "PRIVATE KEY"),
    ] {
        assert!(
            text.starts_with(&format!("-----BEGIN {label}-----\n"))
                && text.ends_with(&format!("-----END {label}-----\n")),
            "{args:?}: expected {label}:\n{text}"
        );
        assert!(text.lines().all(|l| l.len() <= 64), "{text}");
    }
    check_key(&their_key, &their_cert, "xray");
    check_key(&our_key, &our_cert, "skiff");

    let (theirs, ours) = (examine(&their_cert), examine(&our_cert));
    assert_eq!(ours.fields, theirs.fields, "{args:?}");
    assert_eq!(ours.fields.issuer, ours.fields.subject, "self-signed");
    // Valid from an hour before, for `--expire` after, the moment of generation.
    let finished = now();
    for (who, c) in [("xray", &theirs), ("skiff", &ours)] {
        assert!(
            (started - 3600 - 60..=finished - 3600 + 60).contains(&c.not_before),
            "{who} {args:?}: notBefore {} for now {started}",
            c.not_before
        );
        assert!(
            (c.not_after - c.not_before - (expire_secs + 3600)).abs() <= 60,
            "{who} {args:?}: valid {} s",
            c.not_after - c.not_before
        );
    }
    assert!((ours.not_before - theirs.not_before).abs() <= 60);
    assert!((ours.not_after - theirs.not_after).abs() <= 60);
}

const DAY: i64 = 86_400;

#[test]
fn makes_the_certificate_xray_makes() {
    let Some(xray) = xray() else { return };
    if !openssl_present() {
        return;
    }
    let cases: &[(&[&str], i64)] = &[
        (&[], 90 * DAY),
        (
            &[
                "--domain=example.com",
                "-domain",
                "www.example.com",
                "-domain=*.example.net",
            ],
            90 * DAY,
        ),
        (&["-ca", "--name=Skiff Test CA", "-org", "Skiff"], 90 * DAY),
        (
            &["--ca=true", "--expire=8760h", "--domain=ca.example"],
            365 * DAY,
        ),
        (
            &["--ca=false", "-expire=48h", "--name=", "--org=Only Org"],
            2 * DAY,
        ),
        (
            &["-expire=1h30m", "-domain=localhost", "--name", "localhost"],
            5400,
        ),
        (&["--json=true", "--expire=1.5h"], 5400),
    ];
    for (args, expire) in cases {
        compare(&xray, args, *expire);
    }
}

/// An IP address in `--domain` is an IP address subjectAltName in Skiff's certificate (so a
/// client checking the IP it dialled accepts it) and a DNS name in Xray's; names stay names.
#[test]
fn an_ip_address_domain_is_an_ip_address_entry() {
    let Some(xray) = xray() else { return };
    if !openssl_present() {
        return;
    }
    let args = [
        "--domain=example.com",
        "--domain=192.0.2.1",
        "--domain=2001:db8::1",
    ];
    let san = |binary: &Path| {
        let (json, _) = cert_json(binary, &args);
        let cert = examine(&pem(&json, "certificate"));
        cert.fields.extensions["X509v3 Subject Alternative Name:"].clone()
    };
    assert_eq!(
        san(&xray),
        ["DNS:example.com, DNS:192.0.2.1, DNS:2001:db8::1"]
    );
    assert_eq!(
        san(skiff()),
        ["DNS:example.com, IP Address:192.0.2.1, IP Address:2001:DB8:0:0:0:0:0:1"]
    );
}

/// `--file=PATH` writes the files Xray writes, holding what the JSON shows; `--json=false`
/// prints nothing.
#[test]
fn file_writes_what_xray_writes() {
    let dir = TempDir::new("tls-cert-file");
    let listing = |prefix: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with(prefix))
            .map(|n| n[prefix.len()..].to_string())
            .collect();
        names.sort();
        names
    };
    let ours = dir.path().join("skiff");
    let (json, _) = cert_json(
        skiff(),
        &[
            &format!("--file={}", ours.display()),
            "--domain=example.com",
        ],
    );
    assert_eq!(listing("skiff"), [".crt", ".key"]);
    let read = |suffix: &str| std::fs::read_to_string(format!("{}{suffix}", ours.display()));
    assert_eq!(read(".crt").unwrap(), pem(&json, "certificate"));
    assert_eq!(read(".key").unwrap(), pem(&json, "key"));

    let quiet = dir.path().join("quiet");
    let out = run(
        skiff(),
        &[
            "tls",
            "cert",
            "-json=false",
            "-file",
            quiet.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert_eq!(listing("quiet"), [".crt", ".key"]);

    if let Some(xray) = xray() {
        let theirs = dir.path().join("xray");
        let out = run(
            &xray,
            &[
                "tls",
                "cert",
                "--json=false",
                &format!("--file={}", theirs.display()),
            ],
        );
        assert!(out.status.success(), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        assert_eq!(listing("xray"), listing("skiff"), "the files Xray writes");
    }

    // A directory that is not there: a failure that names the file.
    let missing = dir.path().join("no-such-dir/x");
    let out = run(
        skiff(),
        &["tls", "cert", &format!("--file={}", missing.display())],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no-such-dir/x.crt"), "{stderr}");
}

/// A value Xray refuses, Skiff refuses too: a failure status, a message naming the flag and
/// the value, nothing on stdout and no file written.
#[test]
fn bad_flag_values_are_refused() {
    let dir = TempDir::new("tls-cert-bad");
    let file = dir.path().join("out");
    let file_arg = format!("--file={}", file.display());
    let cases: &[(&str, &str)] = &[
        ("--expire=10d", "'10d' for '--expire"),
        ("--expire=soon", "'soon' for '--expire"),
        ("--json=maybe", "'maybe' for '--json"),
        ("--ca=yes", "'yes' for '--ca"),
        ("--domain=", "'' for '--domain"),
        ("--bogus", "'--bogus'"),
    ];
    let xray = xray();
    for (flag, message) in cases {
        let out = run(skiff(), &["tls", "cert", flag, &file_arg]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {out:?}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(message),
            "{flag}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{flag}: {out:?}");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
        if let Some(xray) = &xray {
            let out = run(xray, &["tls", "cert", flag, &file_arg]);
            assert!(!out.status.success(), "xray accepted {flag}: {out:?}");
        }
    }
    // Skiff refuses, where Xray makes an already expired certificate.
    for flag in ["--expire=0", "--expire=-1h"] {
        let out = run(skiff(), &["tls", "cert", flag]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {out:?}");
        assert!(stderr.contains("more than 0"), "{flag}: {stderr}");
    }
}

/// A TLS handshake with `openssl s_client` that trusts only `cert` and checks the name:
/// verification must succeed.
fn verified_handshake(port: u16, cert: &Path, name: &str, who: &str) {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", name, "-verify_hostname", name])
        .arg("-CAfile")
        .arg(cert)
        .arg("-verify_return_error");
    let out = run_bounded(cmd, b"", Duration::from_secs(15));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("Verify return code: 0 (ok)"),
        "{who} serving the certificate: {out:?}"
    );
}

fn vless_tls_config(port: u16, cert: &Path, key: &Path) -> String {
    format!(
        r#"{{
  "log": {{"loglevel": "warning"}},
  "inbounds": [{{
    "listen": "127.0.0.1", "port": {port}, "protocol": "vless",
    "settings": {{"clients": [{{"id": "{UUID}"}}], "decryption": "none"}},
    "streamSettings": {{"network": "tcp", "security": "tls",
      "tlsSettings": {{"certificates": [{{"certificateFile": "{}", "keyFile": "{}"}}]}}}}
  }}],
  "outbounds": [{{"protocol": "freedom"}}]
}}"#,
        cert.display(),
        key.display()
    )
}

/// The certificate and key `skiff tls cert --file` writes serve TLS from a Skiff VLESS
/// inbound (after `skiff check` passes the config) and from Xray's.
#[test]
fn servers_accept_the_generated_certificate() {
    if !openssl_present() {
        return;
    }
    let dir = TempDir::new("tls-cert-serve");
    let base = dir.path().join("server");
    let out = run(
        skiff(),
        &[
            "tls",
            "cert",
            "-domain=localhost",
            "-json=false",
            &format!("-file={}", base.display()),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let (cert, key) = (base.with_extension("crt"), base.with_extension("key"));

    let port = free_port();
    let config = vless_tls_config(port, &cert, &key);
    let path = dir.path().join("check.json");
    std::fs::write(&path, &config).unwrap();
    let out = run(skiff(), &["check", "-c", path.to_str().unwrap()]);
    assert!(out.status.success(), "skiff check: {out:?}");

    let (mut proc, log) = start_skiff(dir.path(), "skiff", &config, &[port]);
    verified_handshake(port, &cert, "localhost", "skiff");
    assert_healthy(&mut proc, &log);
    drop(proc);

    let Some(xray) = xray() else { return };
    let port = free_port();
    let config = vless_tls_config(port, &cert, &key);
    let (_xray, _) = start_peer(&xray, "xray", dir.path(), "xray", &config, port, false);
    verified_handshake(port, &cert, "localhost", "xray");
}
