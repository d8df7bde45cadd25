//! What a prober sees of Skiff's REALITY server: the target's. The target is a local nginx
//! with its own certificate (nginx and openssl from the system; Xray from XRAY_BIN or
//! `../shared/peers/bin/xray` for the comparison). Each probe goes to nginx directly, to
//! Skiff's REALITY server in front of it, and to Xray's REALITY server in front of it:
//!
//! * openssl s_client with an allowed SNI, a disallowed one and none: the target's
//!   certificate, its HTTP response, and as many handshake bytes read as from nginx itself;
//! * curl verifying against the target's certificate: the page;
//! * plain HTTP, random bytes, a truncated ClientHello: the same answer and close as nginx's;
//! * an authentic REALITY ClientHello sent twice: the second is forwarded (a replay).
//!
//! A table of what each server returned is printed (run with --nocapture to see it).

mod common;
mod reality_common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use reality_common::*;

/// The servers probed: name and port.
struct Servers(Vec<(&'static str, u16)>);

/// What `openssl s_client` got from a server.
#[derive(Debug, PartialEq, Eq)]
struct TlsSeen {
    /// The leaf certificate, PEM.
    leaf: String,
    /// "SSL handshake has read N bytes".
    handshake_read: u64,
    protocol: String,
    http_ok: bool,
}

fn s_client_full(port: u16, sni: Option<&str>) -> TlsSeen {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-showcerts", "-ign_eof", "-connect"])
        .arg(format!("127.0.0.1:{port}"));
    match sni {
        Some(sni) => cmd.args(["-servername", sni]),
        None => cmd.arg("-noservername"),
    };
    let out = run_bounded(
        cmd,
        b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        Duration::from_secs(15),
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let leaf = text
        .find("-----BEGIN CERTIFICATE-----")
        .and_then(|start| {
            let end = text[start..].find("-----END CERTIFICATE-----")? + start + 25;
            Some(text[start..end].to_owned())
        })
        .unwrap_or_default();
    let handshake_read = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("SSL handshake has read ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    let protocol = text
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Protocol  :")
                .or_else(|| l.strip_prefix("New, "))
        })
        .unwrap_or("")
        .trim()
        .to_owned();
    TlsSeen {
        leaf,
        handshake_read,
        protocol,
        http_ok: text.contains(TARGET_MARKER),
    }
}

/// Writes `bytes`, optionally half-closes, reads to close or 10 s: (answer, how it ended).
fn raw(port: u16, bytes: &[u8], half_close: bool) -> (Vec<u8>, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(bytes).unwrap();
    if half_close {
        s.shutdown(Shutdown::Write).unwrap();
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 16384];
    let end = loop {
        match s.read(&mut buf) {
            Ok(0) => break "FIN".to_owned(),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break "RST".to_owned(),
            Err(e) => break format!("{:?}", e.kind()),
        }
    };
    (undated(&answer), end)
}

/// A TLS 1.3 ClientHello record for `sni` with an X25519 share of `client_private`, whose
/// session ID is sealed as a REALITY client seals it for the server key `server_public`.
fn reality_client_hello(sni: &str, client_private: &[u8; 32], server_public: &[u8; 32]) -> Vec<u8> {
    use skiff_crypto::{AeadKey, AeadKind, random, x25519};
    let mut random_bytes = [0u8; 32];
    random::fill(&mut random_bytes);
    let share = x25519::public_key(client_private);
    let mut body = vec![3, 3];
    body.extend_from_slice(&random_bytes);
    body.push(32);
    let session_at = 4 + body.len();
    body.extend_from_slice(&[0; 32]);
    body.extend_from_slice(&[0, 6, 0x13, 0x01, 0x13, 0x02, 0x13, 0x03, 1, 0]);
    let mut ext = Vec::new();
    let mut push = |kind: u16, data: &[u8]| {
        ext.extend_from_slice(&kind.to_be_bytes());
        ext.extend_from_slice(&(data.len() as u16).to_be_bytes());
        ext.extend_from_slice(data);
    };
    let mut sni_ext = ((sni.len() + 3) as u16).to_be_bytes().to_vec();
    sni_ext.push(0);
    sni_ext.extend_from_slice(&(sni.len() as u16).to_be_bytes());
    sni_ext.extend_from_slice(sni.as_bytes());
    push(0, &sni_ext);
    push(10, &[0, 2, 0x00, 0x1d]);
    push(13, &[0, 6, 0x04, 0x03, 0x08, 0x04, 0x08, 0x07]);
    push(43, &[2, 0x03, 0x04]);
    let mut ks = vec![0, 36, 0x00, 0x1d, 0, 32];
    ks.extend_from_slice(&share);
    push(51, &ks);
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut message = vec![1];
    message.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    message.extend_from_slice(&body);
    // Seal: key = HKDF-SHA256(X25519, salt random[..20], "REALITY"), nonce random[20..],
    // AAD the message with a zero session ID.
    let shared = x25519::shared_secret(client_private, server_public).unwrap();
    let mut key = [0u8; 32];
    skiff_crypto::kdf::hkdf_sha256(&shared, &random_bytes[..20], b"REALITY", &mut key);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    let mut sealed = [0u8; 32];
    sealed[..3].copy_from_slice(&[26, 7, 28]);
    sealed[4..8].copy_from_slice(&now.to_be_bytes());
    sealed[8..16].copy_from_slice(&[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]);
    AeadKey::new(AeadKind::Aes256Gcm, &key)
        .unwrap()
        .seal_in_place(&random_bytes[20..], &message, &mut sealed);
    message[session_at..session_at + 32].copy_from_slice(&sealed);
    let mut record = vec![22, 3, 1];
    record.extend_from_slice(&(message.len() as u16).to_be_bytes());
    record.extend_from_slice(&message);
    record
}

fn decode_key(s: &str) -> [u8; 32] {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .unwrap()
        .try_into()
        .unwrap()
}

fn setup(
    dir: &Path,
    keys: &Keys,
    with_xray: bool,
) -> (Vec<Proc>, Servers, String, std::path::PathBuf) {
    let nginx = nginx_binary().expect("checked by the caller");
    let (target_port, skiff_port) = (free_port(), free_port());
    let (nginx_proc, cert) = start_target(&nginx, dir, target_port);
    let mut procs = vec![nginx_proc];
    let skiff_log = dir.join("skiff-error.log");
    let config = server_config(
        skiff_port,
        "xtls-rprx-vision",
        server_reality(keys, target_port, serde_json::json!({})),
        &skiff_log,
    );
    let (skiff, _) = start_skiff(dir, "skiff", &config, &[skiff_port]);
    procs.push(skiff);
    let mut servers = vec![("nginx", target_port), ("skiff", skiff_port)];
    if with_xray && let Some(xray) = shared_peer("xray", "XRAY_BIN") {
        let xray_port = free_port();
        let config = server_config(
            xray_port,
            "xtls-rprx-vision",
            server_reality(keys, target_port, serde_json::json!({})),
            &dir.join("xray-error.log"),
        );
        let (xray, _) = start_peer(&xray, "xray", dir, "xray", &config, xray_port, false);
        procs.push(xray);
        servers.push(("xray", xray_port));
    }
    let cert_pem = std::fs::read_to_string(&cert).unwrap();
    (procs, Servers(servers), cert_pem, skiff_log)
}

#[test]
fn probes_see_the_target() {
    if nginx_binary().is_none() || tool("openssl", &["/usr/bin/openssl"]).is_none() {
        return;
    }
    let dir = TempDir::new("reality-probing");
    let keys = keys();
    let (_procs, servers, target_cert, _) = setup(dir.path(), &keys, true);
    let mut table = Vec::new();

    for sni in [Some("localhost"), Some("not-allowed.example"), None] {
        let direct = s_client_full(servers.0[0].1, sni);
        assert!(
            direct.http_ok && !direct.leaf.is_empty(),
            "nginx itself: {direct:?}"
        );
        assert_eq!(
            direct.leaf.trim(),
            target_cert.trim(),
            "nginx shows its certificate"
        );
        for &(name, port) in &servers.0 {
            let seen = s_client_full(port, sni);
            table.push(format!(
                "s_client sni={:<20} {name:<6} protocol={:<8} handshake_read={:>5} same_cert={} page={}",
                sni.unwrap_or("(none)"),
                seen.protocol,
                seen.handshake_read,
                seen.leaf == direct.leaf,
                seen.http_ok
            ));
            if name == "xray" {
                continue; // the reference: reported, not asserted
            }
            assert_eq!(
                seen.leaf, direct.leaf,
                "{name} sni {sni:?}: the target's certificate"
            );
            assert!(seen.http_ok, "{name} sni {sni:?}: the target's page");
            // The target's ECDSA signature is DER: 70 to 72 bytes from one handshake to the
            // next, nginx's own included.
            assert!(
                seen.handshake_read.abs_diff(direct.handshake_read) <= 2,
                "{name} sni {sni:?}: the handshake bytes of the target ({} vs nginx's {})",
                seen.handshake_read,
                direct.handshake_read
            );
            assert_eq!(seen.protocol, direct.protocol, "{name} sni {sni:?}");
        }
    }

    // curl verifying the chain against the target's certificate alone.
    let ca = dir.path().join("nginx/cert.pem");
    for &(name, port) in &servers.0 {
        let resolve = format!("localhost:{port}:127.0.0.1");
        let url = format!("https://localhost:{port}/");
        let out = curl(&[
            "--cacert",
            ca.to_str().unwrap(),
            "--resolve",
            &resolve,
            &url,
        ]);
        let page = String::from_utf8_lossy(&out.stdout);
        table.push(format!(
            "curl --cacert target    {name:<6} ok={} page={}",
            out.status.success(),
            page.contains(TARGET_MARKER)
        ));
        if name != "xray" {
            assert!(
                out.status.success() && page.contains(TARGET_MARKER),
                "{name}: curl trusting only the target's certificate: {out:?}"
            );
        }
    }

    // Not TLS, or not a whole ClientHello: nginx's own answer and close.
    let hello = reality_client_hello("localhost", &[9; 32], &[7; 32]);
    let probes: [(&str, Vec<u8>, bool); 4] = [
        (
            "plain HTTP",
            b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
            false,
        ),
        ("random bytes", noise(7, 300), true),
        (
            "truncated ClientHello",
            hello[..hello.len() / 2].to_vec(),
            true,
        ),
        ("ClientHello, then EOF", hello.clone(), true),
    ];
    for (what, bytes, half_close) in probes {
        let direct = raw(servers.0[0].1, &bytes, half_close);
        for &(name, port) in &servers.0 {
            let seen = raw(port, &bytes, half_close);
            table.push(format!(
                "raw {what:<22} {name:<6} answer={:>5} bytes first={:02x?} end={}",
                seen.0.len(),
                &seen.0[..seen.0.len().min(7)],
                seen.1
            ));
            if name == "xray" || what == "ClientHello, then EOF" {
                // A whole hello makes nginx answer with a fresh handshake: its length is the
                // same but for the ECDSA signature's DER (±2 bytes), its bytes are not.
                if name != "xray" {
                    assert!(
                        seen.0.len().abs_diff(direct.0.len()) <= 2 && seen.1 == direct.1,
                        "{name}: {what}: {} bytes, {} vs nginx's {} bytes, {}",
                        seen.0.len(),
                        seen.1,
                        direct.0.len(),
                        direct.1
                    );
                }
                continue;
            }
            assert_eq!(seen, direct, "{name}: {what}");
        }
    }
    // An authentic REALITY hello (a fresh one per server): Skiff answers with its own
    // handshake, its records padded to the lengths of the target's answer to the same hello
    // (as Xray pads). nginx's own answer to such a hello is the yardstick: the same records,
    // each as long but for the ECDSA signature's DER (±2 bytes).
    let public = decode_key(&keys.public);
    let mut nginx_records = Vec::new();
    for &(name, port) in &servers.0 {
        let hello = reality_client_hello("localhost", &[11; 32], &public);
        let (answer, end) = raw(port, &hello, true);
        table.push(format!(
            "authentic hello         {name:<6} answer={:>5} bytes records={:?} end={end}",
            answer.len(),
            records(&answer)
        ));
        if name == "nginx" {
            nginx_records = records(&answer);
        }
        if name == "skiff" {
            let ours = records(&answer);
            assert_eq!(
                ours.len(),
                nginx_records.len(),
                "{ours:?} vs {nginx_records:?}"
            );
            for (a, b) in ours.iter().zip(&nginx_records) {
                assert!(
                    a.0 == b.0 && a.1.abs_diff(b.1) <= 2,
                    "{ours:?} vs nginx's {nginx_records:?}"
                );
            }
        }
    }
    eprintln!("{}", table.join("\n"));
}

/// (type, length) of each TLS record in `bytes`.
fn records(mut bytes: &[u8]) -> Vec<(u8, usize)> {
    let mut out = Vec::new();
    while bytes.len() >= 5 {
        let len = usize::from(u16::from_be_bytes([bytes[3], bytes[4]]));
        out.push((bytes[0], len));
        bytes = &bytes[(5 + len).min(bytes.len())..];
    }
    out
}

/// An authentic REALITY ClientHello is answered by Skiff's own handshake once; the same
/// bytes again are a replay and go to the target.
#[test]
fn a_replayed_client_hello_goes_to_the_target() {
    if nginx_binary().is_none() {
        return;
    }
    let dir = TempDir::new("reality-replay");
    let keys = keys();
    let (_procs, servers, _, skiff_log) = setup(dir.path(), &keys, false);
    let skiff_port = servers.0[1].1;
    let hello = reality_client_hello("localhost", &[9; 32], &decode_key(&keys.public));
    let log_has = |needle: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if std::fs::read_to_string(&skiff_log)
                .unwrap_or_default()
                .contains(needle)
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    let (first, _) = raw(skiff_port, &hello, true);
    assert!(
        log_has("REALITY: authenticated"),
        "the first hello is authentic; log:\n{}",
        std::fs::read_to_string(&skiff_log).unwrap_or_default()
    );
    assert_eq!(
        first.first(),
        Some(&22),
        "a ServerHello record: {first:02x?}"
    );
    let (second, _) = raw(skiff_port, &hello, true);
    assert!(
        log_has("REALITY: a replayed ClientHello"),
        "the replay was not caught; log:\n{}",
        std::fs::read_to_string(&skiff_log).unwrap_or_default()
    );
    // nginx answers the replayed hello itself: a TLS record, never anything of Skiff's.
    assert_eq!(
        second.first(),
        Some(&22),
        "nginx's ServerHello: {second:02x?}"
    );
    let text = std::fs::read_to_string(&skiff_log).unwrap_or_default();
    assert_eq!(
        text.matches("REALITY: authenticated").count(),
        1,
        "log:\n{text}"
    );
}

/// `target` as a unix socket with `xver` (PROXY protocol v1 and v2), as the all-in-one
/// setups run nginx behind REALITY: nginx listens on the socket with `proxy_protocol` and so
/// refuses any connection that does not open with the header. A prober gets the target's
/// certificate and page through Skiff, and nginx logs the prober's own address from the
/// header.
#[test]
fn a_unix_socket_target_behind_the_proxy_protocol_serves_the_prober() {
    if nginx_binary().is_none() || tool("openssl", &["/usr/bin/openssl"]).is_none() {
        return;
    }
    let nginx = nginx_binary().expect("checked above");
    let dir = TempDir::new("reality-unix-xver");
    let keys = keys();
    let ndir = dir.path().join("nginx");
    std::fs::create_dir_all(&ndir).unwrap();
    let (cert, key) = certificate(&ndir);
    let root = site(&ndir, "target", TARGET_MARKER);
    let socket = ndir.join("target.sock");
    let access = ndir.join("logs/real.log");
    let servers = format!(
        r#"    server {{
        listen unix:{socket} ssl proxy_protocol;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        access_log {access} real;
        root {root};
    }}"#,
        socket = socket.display(),
        cert = cert.display(),
        key = key.display(),
        access = access.display(),
        root = root.display()
    );
    let _nginx = start_nginx(&nginx, &ndir, &servers, &[]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        assert!(std::time::Instant::now() < deadline, "nginx made no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let target_cert = std::fs::read_to_string(&cert).unwrap();
    for xver in [1, 2] {
        let port = free_port();
        let config = server_config(
            port,
            "xtls-rprx-vision",
            server_reality(
                &keys,
                0,
                serde_json::json!({ "target": socket.display().to_string(), "xver": xver }),
            ),
            &dir.path().join(format!("skiff-{xver}.log")),
        );
        let (_skiff, _) = start_skiff(dir.path(), &format!("skiff-{xver}"), &config, &[port]);
        let seen = s_client_full(port, Some("localhost"));
        assert!(seen.http_ok, "xver {xver}: the target's page: {seen:?}");
        assert_eq!(
            seen.leaf.trim(),
            target_cert.trim(),
            "xver {xver}: the target's certificate"
        );
        // The header carried the prober's address (loopback) and its port, a real one.
        let log = std::fs::read_to_string(&access).unwrap_or_default();
        let line = log.lines().last().unwrap_or_default().to_owned();
        let (addr, rest) = line.split_once(' ').unwrap_or_default();
        let (ip, src_port) = addr.rsplit_once(':').unwrap_or_default();
        assert_eq!(ip, "127.0.0.1", "xver {xver}: nginx logged {line:?}");
        assert!(
            src_port.parse::<u16>().is_ok_and(|p| p != 0) && rest.contains("GET / "),
            "xver {xver}: nginx logged {line:?}"
        );
    }
}
