//! Skiff's browser ClientHellos against Xray 26.7's, both captured on loopback: a listener
//! records the first TLS record each client sends. Cipher suites (in order) and the set of
//! extensions must match, with GREASE values normalised (Chrome shuffles its extension
//! order, so order is not compared for it); so must the bodies that identify a browser
//! (groups, signature algorithms, versions, ALPN, key share groups). Prints a JA3-style and
//! a JA4-style summary of both.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};
use skiff_transport::fingerprint::Fingerprint;
use skiff_transport::reality::client::{RealityClient, RealityClientOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PUBLIC_KEY: &str = "abuVezb5-wwiWG9fo7uIKenC4y3hlEgxtNLKV5s2DF0";

fn xray() -> Option<PathBuf> {
    let found = std::env::var_os("XRAY_BIN")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| {
            Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers/bin/xray"))
                .filter(|p| p.is_file())
        });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must find xray (XRAY_BIN)"
        );
        eprintln!("skipped: xray not found (set XRAY_BIN)");
    }
    found
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first TLS record the next client on `listener` sends (bounded: 10 s, 64 KiB).
async fn capture(listener: &TcpListener) -> Vec<u8> {
    let (mut s, _) = tokio::time::timeout(Duration::from_secs(20), listener.accept())
        .await
        .expect("a client in time")
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while buf.len() < 65536 {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("the hello in time")
            .unwrap();
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() >= 5 && buf.len() >= 5 + usize::from(u16::from_be_bytes([buf[3], buf[4]])) {
            break;
        }
    }
    buf
}

fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && (v >> 8) == (v & 0xff)
}

fn norm(v: u16) -> u16 {
    if is_grease(v) { 0x0a0a } else { v }
}

/// What identifies a ClientHello.
#[derive(Debug)]
struct Hello {
    session_id_len: usize,
    ciphers: Vec<u16>,
    /// (type, body) in the order sent.
    extensions: Vec<(u16, Vec<u8>)>,
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

fn parse(record: &[u8]) -> Hello {
    assert_eq!(record[0], 22, "a handshake record");
    let h = &record[5..];
    assert_eq!(h[0], 1, "a ClientHello");
    let mut i = 4 + 2 + 32;
    let session_id_len = h[i] as usize;
    i += 1 + session_id_len;
    let cl = u16_at(h, i) as usize;
    let ciphers = (0..cl / 2).map(|k| u16_at(h, i + 2 + 2 * k)).collect();
    i += 2 + cl;
    i += 1 + h[i] as usize;
    let end = i + 2 + u16_at(h, i) as usize;
    i += 2;
    let mut extensions = Vec::new();
    while i < end {
        let (t, l) = (u16_at(h, i), u16_at(h, i + 2) as usize);
        extensions.push((t, h[i + 4..i + 4 + l].to_vec()));
        i += 4 + l;
    }
    Hello {
        session_id_len,
        ciphers,
        extensions,
    }
}

impl Hello {
    fn body(&self, t: u16) -> Option<&[u8]> {
        self.extensions
            .iter()
            .find(|(x, _)| *x == t)
            .map(|(_, b)| &b[..])
    }

    fn ext_types(&self) -> Vec<u16> {
        self.extensions.iter().map(|(t, _)| norm(*t)).collect()
    }

    fn u16_list(&self, t: u16, skip: usize) -> Vec<u16> {
        let b = self.body(t).unwrap_or(&[]);
        (skip..b.len())
            .step_by(2)
            .map(|i| norm(u16_at(b, i)))
            .collect()
    }

    fn key_share_groups(&self) -> Vec<u16> {
        let b = self.body(0x33).unwrap_or(&[]);
        let mut out = Vec::new();
        let mut i = 2;
        while i + 4 <= b.len() {
            out.push(norm(u16_at(b, i)));
            i += 4 + u16_at(b, i + 2) as usize;
        }
        out
    }

    fn ja3(&self) -> String {
        let join = |v: Vec<u16>| {
            v.iter()
                .filter(|x| !is_grease(**x))
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("-")
        };
        format!(
            "771,{},{},{},{}",
            join(self.ciphers.clone()),
            join(self.extensions.iter().map(|e| e.0).collect()),
            join(self.u16_list(0x0a, 2)),
            self.body(0x0b)
                .map(|b| b[1..]
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join("-"))
                .unwrap_or_default()
        )
    }

    /// JA4 (FoxIO's spec): t13d + counts + ALPN, then truncated hashes of the sorted cipher
    /// suites and of the sorted extensions (less SNI and ALPN) with the signature algorithms.
    fn ja4(&self) -> String {
        let ciphers: Vec<u16> = self
            .ciphers
            .iter()
            .copied()
            .filter(|c| !is_grease(*c))
            .collect();
        let exts: Vec<u16> = self
            .extensions
            .iter()
            .map(|e| e.0)
            .filter(|e| !is_grease(*e))
            .collect();
        let alpn = self
            .body(0x10)
            .map(|b| {
                let p = &b[3..3 + b[2] as usize];
                format!("{}{}", p[0] as char, p[p.len() - 1] as char)
            })
            .unwrap_or_else(|| "00".into());
        let hex12 = |s: String| {
            Sha256::digest(s.as_bytes())
                .iter()
                .take(6)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        let mut sc = ciphers
            .iter()
            .map(|c| format!("{c:04x}"))
            .collect::<Vec<_>>();
        sc.sort();
        let mut se = exts
            .iter()
            .filter(|e| **e != 0 && **e != 0x10)
            .map(|e| format!("{e:04x}"))
            .collect::<Vec<_>>();
        se.sort();
        let sig = self
            .u16_list(0x0d, 2)
            .iter()
            .map(|s| format!("{s:04x}"))
            .collect::<Vec<_>>()
            .join(",");
        format!(
            "t13d{:02}{:02}{alpn}_{}_{}",
            ciphers.len().min(99),
            exts.len().min(99),
            hex12(sc.join(",")),
            hex12(format!("{}_{sig}", se.join(",")))
        )
    }
}

async fn xray_hello(bin: &PathBuf, fingerprint: &str) -> Vec<u8> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap().port();
    let socks = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("skiff-fp-{}-{fingerprint}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        r#"{{"log":{{"loglevel":"warning"}},"inbounds":[{{"port":{socks},"listen":"127.0.0.1","protocol":"socks"}}],
"outbounds":[{{"protocol":"vless","settings":{{"vnext":[{{"address":"127.0.0.1","port":{target},"users":[{{"id":"b831381d-6324-4d53-ad4f-8cda48b30811","encryption":"none"}}]}}]}},
"streamSettings":{{"network":"tcp","security":"reality","realitySettings":{{"serverName":"www.example.com","fingerprint":"{fingerprint}","publicKey":"{PUBLIC_KEY}","shortId":"0123abcd"}}}}}}]}}"#
    );
    std::fs::write(dir.join("x.json"), config).unwrap();
    let _xray = Killed(
        Command::new(bin)
            .args(["run", "-c"])
            .arg(dir.join("x.json"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut s = None;
    for _ in 0..100 {
        if let Ok(c) = TcpStream::connect(("127.0.0.1", socks)).await {
            s = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut s = s.expect("xray's socks port");
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut reply = [0u8; 2];
    s.read_exact(&mut reply).await.unwrap();
    let mut req = vec![5, 1, 0, 3, 11];
    req.extend_from_slice(b"example.com");
    req.extend_from_slice(&80u16.to_be_bytes());
    s.write_all(&req).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
        .await
        .unwrap();
    let hello = capture(&listener).await;
    let _ = std::fs::remove_dir_all(&dir);
    hello
}

async fn skiff_hello(fingerprint: Fingerprint) -> Vec<u8> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let client = RealityClient::new(RealityClientOptions {
        server_name: "www.example.com".into(),
        public_key: [9; 32],
        short_id: vec![1, 0x23, 0xab, 0xcd],
        spider_x: "/".into(),
        spider_y: [0; 10],
        fingerprint,
    })
    .unwrap();
    let dial = tokio::spawn(async move {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        // The capture closes after the hello: the handshake fails, as it should.
        let _ = client.connect(Box::new(tcp)).await;
    });
    let hello = capture(&listener).await;
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(10), dial).await;
    hello
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_hellos_match_xrays() {
    let Some(bin) = xray() else { return };
    for (name, fp) in [
        ("chrome", Fingerprint::Chrome),
        ("firefox", Fingerprint::Firefox),
        ("safari", Fingerprint::Safari),
    ] {
        let theirs = parse(&xray_hello(&bin, name).await);
        let ours = parse(&skiff_hello(fp).await);
        println!("{name} Xray  JA3 {}", theirs.ja3());
        println!("{name} Skiff JA3 {}", ours.ja3());
        println!("{name} Xray  JA4 {}", theirs.ja4());
        println!("{name} Skiff JA4 {}", ours.ja4());
        let normed = |h: &Hello| h.ciphers.iter().map(|c| norm(*c)).collect::<Vec<_>>();
        assert_eq!(normed(&ours), normed(&theirs), "{name}: cipher suites");
        let (mut a, mut b) = (ours.ext_types(), theirs.ext_types());
        if name != "chrome" {
            assert_eq!(a, b, "{name}: extension order");
        }
        a.sort();
        b.sort();
        assert_eq!(a, b, "{name}: extension set");
        assert_eq!(ours.ja4(), theirs.ja4(), "{name}: JA4");
        for t in [0x0a, 0x0d] {
            assert_eq!(
                ours.u16_list(t, 2),
                theirs.u16_list(t, 2),
                "{name}: extension {t:#x}"
            );
        }
        assert_eq!(
            ours.u16_list(0x2b, 1),
            theirs.u16_list(0x2b, 1),
            "{name}: versions"
        );
        assert_eq!(
            ours.key_share_groups(),
            theirs.key_share_groups(),
            "{name}: key share groups"
        );
        assert_eq!(ours.body(0x10), theirs.body(0x10), "{name}: ALPN");
        assert_eq!(ours.body(0), theirs.body(0), "{name}: SNI");
        // ECH GREASE: outer type and HKDF-SHA256 fixed, the AEAD one of the two uTLS picks
        // from per connection, then (after the random config id) a 32-byte `enc`.
        let ech = |h: &Hello| {
            h.body(0xfe0d).map(|b| {
                let aead = u16::from_be_bytes([b[3], b[4]]);
                (b[..3].to_vec(), aead == 1 || aead == 3, b[6..8].to_vec())
            })
        };
        assert_eq!(ech(&ours), ech(&theirs), "{name}: ECH GREASE");
        assert_eq!(
            (ours.session_id_len, theirs.session_id_len),
            (32, 32),
            "{name}: session ID"
        );
    }
}
