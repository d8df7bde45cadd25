//! Active probing: what a scanner gets from a VLESS port must be what it would get from Xray
//! in the same place, i.e. nothing that says "Skiff".
//!
//! * With a fallback, every probe that is not a valid VLESS request gets exactly the web
//!   server's answer to the same bytes (compared with asking nginx directly): random bytes, a
//!   plain HTTP request, a VLESS header with an unknown id, a few bytes too short to be a
//!   header, over raw TCP and inside TLS (with an SNI the certificate does not know).
//! * On a TLS port, bytes that are not TLS never reach the fallback: Xray's Go TLS stack closes
//!   the connection without a byte when the first record is neither handshake nor alert
//!   (crypto/tls conn.go `readRecordOrCCS`), and answers an SSLv2-style hello with a
//!   protocol_version alert. Skiff does the same (rustls alone would send a decode_error alert).
//! * Without a fallback the connection is closed and nothing comes back (inside TLS: nothing
//!   but the close).
//! * Afterwards a valid client is still served and the log shows no panic.
//!
//! `.ci/run` installs nginx, curl and openssl; elsewhere a missing nginx skips with a note.

mod common;

use std::path::Path;

use common::*;

struct Lab {
    nginx: Proc,
    skiff: Proc,
    log: std::path::PathBuf,
    /// nginx's plain HTTP port.
    web: u16,
    /// VLESS over TLS with a fallback to `web`.
    tls: u16,
    /// VLESS over raw TCP with a fallback to `web`.
    raw: u16,
    /// VLESS over TLS, no fallback.
    tls_bare: u16,
    /// VLESS over raw TCP, no fallback.
    raw_bare: u16,
    /// The TLS inbounds' user has flow xtls-rprx-vision.
    vision: bool,
    /// Removed on drop, after the processes above are gone.
    _dir: TempDir,
}

fn inbound(port: u16, fallback: Option<u16>, tls: Option<&Path>, vision: bool) -> String {
    let fallbacks = fallback
        .map(|p| format!(r#", "fallbacks": [{{ "dest": {p} }}]"#))
        .unwrap_or_default();
    let security = tls
        .map(|dir| {
            format!(
                r#", "security": "tls", "tlsSettings": {{ "certificates": [{{ "certificateFile": "{}", "keyFile": "{}" }}] }}"#,
                dir.join("cert.pem").display(),
                dir.join("key.pem").display()
            )
        })
        .unwrap_or_default();
    let flow = if vision {
        r#", "flow": "xtls-rprx-vision""#
    } else {
        ""
    };
    format!(
        r#"{{ "listen": "127.0.0.1", "port": {port}, "protocol": "vless",
             "settings": {{ "clients": [{{ "id": "{UUID}" {flow} }}], "decryption": "none" {fallbacks} }},
             "streamSettings": {{ "network": "tcp" {security} }} }}"#
    )
}

impl Lab {
    fn start(tag: &str) -> Option<Lab> {
        Lab::start_with(tag, false)
    }

    /// `vision`: the users of the TLS inbounds have flow xtls-rprx-vision (Vision needs TLS).
    fn start_with(tag: &str, vision: bool) -> Option<Lab> {
        let nginx_bin = nginx_binary()?;
        let dir = TempDir::new(&format!("probe-{tag}"));
        certificate(dir.path());
        let root = site(dir.path(), "a", "site A");
        let ports: Vec<u16> = (0..5).map(|_| free_port()).collect();
        let [web, tls, raw, tls_bare, raw_bare] = ports[..] else {
            unreachable!()
        };
        let nginx = start_nginx(
            &nginx_bin,
            dir.path(),
            &format!(
                "server {{ listen 127.0.0.1:{web}; root {}; }}",
                root.display()
            ),
            &[web],
        );
        let d = Some(dir.path());
        let config = format!(
            r#"{{ "log": {{ "loglevel": "debug" }},
                 "inbounds": [{}, {}, {}, {}],
                 "outbounds": [{{ "protocol": "freedom" }}] }}"#,
            inbound(tls, Some(web), d, vision),
            inbound(raw, Some(web), None, false),
            inbound(tls_bare, None, d, vision),
            inbound(raw_bare, None, None, false),
        );
        let (skiff, log) = start_skiff(
            dir.path(),
            "skiff",
            &config,
            &[tls, raw, tls_bare, raw_bare],
        );
        Some(Lab {
            nginx,
            skiff,
            log,
            web,
            tls,
            raw,
            tls_bare,
            raw_bare,
            vision,
            _dir: dir,
        })
    }

    /// What nginx itself answers to `bytes` (Date blanked); never empty for these probes.
    fn nginx_answer(&self, bytes: &[u8]) -> Vec<u8> {
        let (answer, _) = exchange(self.web, bytes);
        assert!(!answer.is_empty(), "nginx said nothing to {bytes:?}");
        undated(&answer)
    }

    /// Valid clients still get through, on every inbound, and nothing panicked.
    fn still_serving(mut self) {
        let request = http_get();
        let want = {
            let mut v = vec![0u8, 0];
            v.extend(self.nginx_answer(&request));
            v
        };
        let vless = vless_request(&UUID_BYTES, self.web, &request);
        for port in [self.raw, self.raw_bare] {
            let (answer, _) = exchange(port, &vless);
            assert_eq!(
                undated(&answer[..]),
                want,
                "valid VLESS over raw TCP :{port}"
            );
        }
        for port in [self.tls, self.tls_bare] {
            let out = s_client(port, "localhost", &vless);
            if self.vision {
                // A known user without the flow its config requires is refused, as Xray
                // refuses plain TLS-in-TLS for Vision users: closed, no byte of any answer.
                assert_eq!(out.stdout, b"", "flow-less VLESS to a Vision user :{port}");
            } else {
                assert_eq!(undated(&out.stdout), want, "valid VLESS over TLS :{port}");
            }
        }
        assert_healthy(&mut self.skiff, &self.log);
        assert!(self.nginx.child.try_wait().unwrap().is_none());
    }
}

fn assert_clean_tls_close(out: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("unexpected eof"),
        "closed without close_notify: {stderr}"
    );
}

fn http_get() -> Vec<u8> {
    b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: probe\r\nConnection: close\r\n\r\n"
        .to_vec()
}

/// Random bytes whose first byte is not 0 (else a VLESS version), nor 0x15/0x16/0x80 (else
/// TLS-looking): the probes are about what these bytes look like, not about luck.
fn random_probe(seed: u64, len: usize) -> Vec<u8> {
    let mut seed = seed;
    loop {
        let bytes = noise(seed, len);
        if ![0x00, 0x15, 0x16, 0x80].contains(&bytes[0]) {
            return bytes;
        }
        seed += 1;
    }
}

/// The probes sent to the fallback inbounds, named for messages.
fn probes() -> Vec<(&'static str, Vec<u8>)> {
    let mut wrong_id = UUID_BYTES;
    wrong_id[15] ^= 0xff;
    vec![
        ("random bytes", random_probe(7, 600)),
        ("a few random bytes", random_probe(11, 40)),
        ("plain HTTP request", http_get()),
        (
            "VLESS with an unknown id",
            vless_request(&wrong_id, 80, &http_get()),
        ),
        ("a VLESS version byte and little else", vec![0, 1, 2]),
    ]
}

/// Over raw TCP every probe gets nginx's own answer to the same bytes.
#[test]
fn raw_tcp_fallback_answers_like_nginx() {
    let Some(lab) = Lab::start("raw") else { return };
    for (what, bytes) in probes() {
        let want = lab.nginx_answer(&bytes);
        let (answer, _) = exchange(lab.raw, &bytes);
        assert_eq!(
            String::from_utf8_lossy(&undated(&answer)),
            String::from_utf8_lossy(&want),
            "{what}"
        );
    }
    lab.still_serving();
}

/// Inside TLS (SNI unknown to the certificate) every probe gets nginx's answer too.
#[test]
fn tls_fallback_answers_like_nginx() {
    tls_fallback_case(false);
}

/// The same with the user's flow set to XTLS Vision: probes never reach the flow checks.
#[test]
fn tls_fallback_answers_like_nginx_with_vision_flow() {
    tls_fallback_case(true);
}

fn tls_fallback_case(vision: bool) {
    let tag = if vision { "tls-vision" } else { "tls" };
    let Some(lab) = Lab::start_with(tag, vision) else {
        return;
    };
    for (what, bytes) in probes() {
        let want = lab.nginx_answer(&bytes);
        let out = s_client(lab.tls, "unknown.invalid", &bytes);
        assert_eq!(
            String::from_utf8_lossy(&undated(&out.stdout)),
            String::from_utf8_lossy(&want),
            "{what}; s_client stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_clean_tls_close(&out);
    }
    lab.still_serving();
}

/// Non-TLS bytes on a TLS port: closed without a byte, as Go's TLS (Xray) does, with or
/// without a fallback; an SSLv2-style first byte gets Go's protocol_version alert.
#[test]
fn tls_port_closes_silently_on_bytes_that_are_not_tls() {
    let Some(lab) = Lab::start("not-tls") else {
        return;
    };
    for port in [lab.tls, lab.tls_bare] {
        // Go's first read takes up to 576 bytes and so does Skiff's: shorter probes are read
        // whole and the close is a FIN, longer ones leave bytes unread and get a reset.
        for (what, bytes, end) in [
            ("random bytes", random_probe(7, 500), End::Eof),
            ("576 random bytes", random_probe(8, 576), End::Eof),
            ("plain HTTP request", http_get(), End::Eof),
            ("2000 random bytes", random_probe(9, 2000), End::Reset),
        ] {
            let (answer, how) = exchange(port, &bytes);
            assert_eq!((&answer[..], how), (&b""[..], end), "{what} to :{port}");
        }
        // Go's answers to a first record it cannot take: an SSLv2 hello gets protocol_version,
        // an oversized record record_overflow, a huge handshake message internal_error.
        for (what, head, alert) in [
            ("SSLv2 hello", [0x80, 0x2e, 0x01, 0x03, 0x01, 0, 0, 0], 0x46),
            (
                "oversized record",
                [0x16, 0x03, 0x01, 0x48, 0x01, 1, 0, 0],
                0x16,
            ),
            (
                "huge ClientHello",
                [0x16, 0x03, 0x01, 0x00, 0x04, 1, 0xff, 0xff],
                0x50,
            ),
        ] {
            let mut bytes = head.to_vec();
            bytes.push(0xff);
            let (answer, _) = exchange(port, &bytes);
            assert_eq!(
                answer,
                [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, alert],
                "{what} to :{port}"
            );
        }
    }
    lab.still_serving();
}

/// No fallback: the connection just ends, without a byte of Skiff's own.
#[test]
fn without_fallback_nothing_comes_back() {
    without_fallback_case(false);
}

/// The same with the TLS inbound's user on XTLS Vision.
#[test]
fn without_fallback_nothing_comes_back_with_vision_flow() {
    without_fallback_case(true);
}

fn without_fallback_case(vision: bool) {
    let tag = if vision { "bare-vision" } else { "bare" };
    let Some(lab) = Lab::start_with(tag, vision) else {
        return;
    };
    for (what, bytes) in probes() {
        if bytes.len() < 18 && bytes[0] == 0 {
            // A VLESS version byte and too little else: Xray without fallbacks waits for the
            // rest of the header until the handshake timeout, and so does Skiff.
            continue;
        }
        let (answer, _) = exchange(lab.raw_bare, &bytes);
        assert_eq!(answer, b"", "{what} over raw TCP");
        let out = s_client(lab.tls_bare, "unknown.invalid", &bytes);
        assert_eq!(out.stdout, b"", "{what} inside TLS");
        // Closed as Go's TLS closes: close_notify first (else OpenSSL reports this).
        assert_clean_tls_close(&out);
    }
    lab.still_serving();
}

/// Without `alpn` in tlsSettings the TLS port negotiates Xray's default, h2 first.
#[test]
fn tls_alpn_default_is_xray_s() {
    let Some(lab) = Lab::start("alpn") else {
        return;
    };
    let mut cmd = std::process::Command::new("openssl");
    cmd.args(["s_client", "-connect"])
        .arg(format!("127.0.0.1:{}", lab.tls_bare))
        .args(["-servername", "localhost", "-alpn", "h2,http/1.1"]);
    let out = run_bounded(cmd, b"", READ_TIMEOUT);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ALPN protocol: h2"), "{text}");
    lab.still_serving();
}
