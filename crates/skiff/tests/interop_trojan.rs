//! Trojan interop with Debian's trojan-gfw 1.16 and v2ray 4.34, both directions, over TLS:
//! A → B (client: tunnel/forward → trojan out) → C (trojan in → freedom) → D, 64 MiB each
//! way at once, SHA-256 checked; UDP (200 datagrams of 1..=1400 bytes through a UDP echo
//! server) with v2ray both ways and trojan-gfw's forward mode; Skiff ↔ Skiff over ws+tls; and
//! fallbacks: plain HTTP over TLS to a Skiff Trojan inbound reaches the fallback web server
//! (nginx) exactly as the same request to trojan-gfw reaches its `remote_addr`.
//! `.ci/run` installs trojan, v2ray, nginx and openssl; elsewhere a missing one skips with a
//! note.
//!
//! trojan-gfw closes both directions as soon as either side ends (no half-close), so, as in
//! interop_v2ray.rs, each side holds its FIN until the whole opposite payload has arrived.

mod common;

use std::collections::HashSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use sha2::{Digest, Sha256};

const BULK: u64 = 64 << 20;
const PASSWORD: &str = "correct horse battery staple";
const DATAGRAMS: usize = 200;
/// Loopback UDP may drop under load: each datagram gets this many tries…
const ATTEMPTS: usize = 3;
/// …each waiting this long for its echo.
const ATTEMPT_WAIT: Duration = Duration::from_secs(3);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Impl {
    Skiff,
    V2ray,
    TrojanGfw,
}

fn peer(which: Impl) -> Option<PathBuf> {
    match which {
        Impl::Skiff => Some(PathBuf::from(env!("CARGO_BIN_EXE_skiff"))),
        Impl::V2ray => tool("v2ray", &["/usr/bin/v2ray", "/usr/local/bin/v2ray"]),
        Impl::TrojanGfw => tool("trojan", &["/usr/bin/trojan", "/usr/local/bin/trojan"]),
    }
}

/// Debug logs when the case's files are kept for a look (SKIFF_KEEP_TEST_DIRS=1).
fn keep() -> bool {
    std::env::var_os("SKIFF_KEEP_TEST_DIRS").is_some()
}

/// Starts `program` on `config` (written to DIR/NAME.json; its log beside it) and waits until
/// it has bound `port` (TCP, or UDP when `udp`).
fn start(which: Impl, dir: &Path, name: &str, config: &str, port: u16, udp: bool) -> Proc {
    let program = peer(which).expect("checked");
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, config).unwrap();
    let log = dir.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new(program);
    match which {
        Impl::Skiff => cmd.arg("run").arg("-c").arg(&path),
        Impl::V2ray => cmd
            .arg("-config")
            .arg(&path)
            .env("V2RAY_LOCATION_ASSET", dir),
        Impl::TrojanGfw => cmd.arg("-c").arg(&path),
    };
    let child = cmd
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut proc = Proc {
        child,
        what: match which {
            Impl::Skiff => "skiff",
            Impl::V2ray => "v2ray",
            Impl::TrojanGfw => "trojan",
        },
    };
    wait_bound(&mut proc, port, udp, &log);
    proc
}

fn wait_bound(proc: &mut Proc, port: u16, udp: bool, log: &Path) {
    if !udp {
        return wait_ports(proc, &[port], log);
    }
    let wanted = format!("0100007F:{port:04X}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
        if table.lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(1) == Some(&wanted.as_str())
        }) {
            return;
        }
        if let Ok(Some(status)) = proc.child.try_wait() {
            panic!(
                "{} exited early ({status}); log:\n{}",
                proc.what,
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{} never bound UDP {port}",
            proc.what
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A port free for UDP and (as trojan-gfw's forward mode binds both) TCP, below the ephemeral
/// range like [`free_port`].
fn free_udp_port() -> u16 {
    loop {
        let port = free_port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

// ---- configs ----

fn loglevel() -> &'static str {
    if keep() { "debug" } else { "warning" }
}

/// Xray-format streamSettings for "tls" or "ws-tls".
fn stream_settings(transport: &str, dir: &Path, server: bool) -> String {
    let tls = if server {
        format!(
            r#""security": "tls", "tlsSettings": {{ "certificates": [{{ "certificateFile": "{}", "keyFile": "{}" }}] }}"#,
            dir.join("cert.pem").display(),
            dir.join("key.pem").display()
        )
    } else {
        r#""security": "tls", "tlsSettings": { "serverName": "localhost", "allowInsecure": true }"#
            .to_string()
    };
    match transport {
        "tls" => format!(r#""network": "tcp", {tls}"#),
        "ws-tls" => format!(r#""network": "ws", "wsSettings": {{ "path": "/tj" }}, {tls}"#),
        other => panic!("unknown transport {other}"),
    }
}

/// B in Xray format: a tunnel (TCP or UDP) to 127.0.0.1:`d`, out through Trojan to C.
fn xray_client(listen: u16, d: u16, c: u16, network: &str, transport: &str, dir: &Path) -> String {
    format!(
        r#"{{ "log": {{ "loglevel": "{}" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {listen}, "protocol": "dokodemo-door",
                 "settings": {{ "address": "127.0.0.1", "port": {d}, "network": "{network}" }} }}],
  "outbounds": [{{ "protocol": "trojan",
                  "settings": {{ "servers": [{{ "address": "127.0.0.1", "port": {c}, "password": "{PASSWORD}" }}] }},
                  "streamSettings": {{ {} }} }}] }}"#,
        loglevel(),
        stream_settings(transport, dir, false)
    )
}

/// C in Xray format: Trojan in (with `fallbacks` when given), freedom out.
fn xray_server(listen: u16, transport: &str, dir: &Path, fallbacks: Option<&str>) -> String {
    let fallbacks = fallbacks
        .map(|f| format!(r#", "fallbacks": {f}"#))
        .unwrap_or_default();
    format!(
        r#"{{ "log": {{ "loglevel": "{}" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {listen}, "protocol": "trojan",
                 "settings": {{ "clients": [{{ "password": "{PASSWORD}", "email": "t@example" }}]{fallbacks} }},
                 "streamSettings": {{ {} }} }}],
  "outbounds": [{{ "protocol": "freedom" }}] }}"#,
        loglevel(),
        stream_settings(transport, dir, true)
    )
}

/// trojan-gfw's `ssl` and `tcp` objects, client side (no verification: self-signed).
fn gfw_client_tail() -> &'static str {
    r#""ssl": { "verify": false, "verify_hostname": false, "cert": "", "sni": "localhost",
             "alpn": ["h2", "http/1.1"], "reuse_session": true, "session_ticket": false, "curves": "" },
    "tcp": { "no_delay": true, "keep_alive": true, "reuse_port": false, "fast_open": false, "fast_open_qlen": 20 }"#
}

/// B as trojan-gfw in forward mode: 127.0.0.1:`listen` (TCP and UDP) → C → 127.0.0.1:`d`.
fn gfw_forward(listen: u16, d: u16, c: u16) -> String {
    format!(
        r#"{{ "run_type": "forward", "local_addr": "127.0.0.1", "local_port": {listen},
    "remote_addr": "127.0.0.1", "remote_port": {c},
    "target_addr": "127.0.0.1", "target_port": {d},
    "password": ["{PASSWORD}"], "udp_timeout": 60, "log_level": {},
    {} }}"#,
        if keep() { 0 } else { 2 },
        gfw_client_tail()
    )
}

/// C as trojan-gfw's server; non-Trojan traffic goes to 127.0.0.1:`fallback`.
fn gfw_server(listen: u16, fallback: u16, dir: &Path) -> String {
    format!(
        r#"{{ "run_type": "server", "local_addr": "127.0.0.1", "local_port": {listen},
    "remote_addr": "127.0.0.1", "remote_port": {fallback},
    "password": ["{PASSWORD}"], "log_level": {},
    "ssl": {{ "cert": "{}", "key": "{}", "key_password": "",
             "cipher_tls13": "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384",
             "prefer_server_cipher": true, "alpn": ["http/1.1"], "reuse_session": true,
             "session_ticket": false, "session_timeout": 600, "plain_http_response": "",
             "curves": "", "dhparam": "" }},
    "tcp": {{ "prefer_ipv4": false, "no_delay": true, "keep_alive": true, "reuse_port": false,
             "fast_open": false, "fast_open_qlen": 20 }},
    "mysql": {{ "enabled": false }} }}"#,
        if keep() { 0 } else { 2 },
        dir.join("cert.pem").display(),
        dir.join("key.pem").display()
    )
}

/// Starts C then B for a case; `network` is "tcp" or "udp" (B's listening side).
fn start_pair(
    client: Impl,
    server: Impl,
    transport: &str,
    network: &str,
    dir: &Path,
    d: u16,
) -> Option<(Proc, Proc, u16)> {
    peer(client)?;
    peer(server)?;
    certificate(dir);
    let c = free_port();
    let udp = network == "udp";
    let b = if udp { free_udp_port() } else { free_port() };
    let server_config = match server {
        // Nothing listens on the fallback port: these cases speak Trojan only.
        Impl::TrojanGfw => gfw_server(c, free_port(), dir),
        _ => xray_server(c, transport, dir, None),
    };
    let server_proc = start(server, dir, "c", &server_config, c, false);
    let client_config = match client {
        Impl::TrojanGfw => gfw_forward(b, d, c),
        _ => xray_client(b, d, c, network, transport, dir),
    };
    let client_proc = start(client, dir, "b", &client_config, b, udp);
    Some((client_proc, server_proc, b))
}

// ---- bulk TCP ----

/// Deterministic bytes (xorshift), so both ends can compute the digest.
fn payload_chunks(seed: u64, len: u64, mut f: impl FnMut(&[u8])) {
    let mut state = seed | 1;
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        for chunk in buf[..n].chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let bytes = state.to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        f(&buf[..n]);
        left -= n as u64;
    }
}

fn digest(seed: u64, len: u64) -> Vec<u8> {
    let mut h = Sha256::new();
    payload_chunks(seed, len, |c| h.update(c));
    h.finalize().to_vec()
}

/// Sends `seed`'s payload on a clone of `s` while hashing everything read from `s`; the write
/// side is shut only once the whole opposite payload has arrived (or 60 s passed).
fn bulk_exchange(s: TcpStream, seed: u64) -> (u64, Vec<u8>) {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut writer = s.try_clone().unwrap();
    let (all_received, wait_all_received) = std::sync::mpsc::channel::<()>();
    let sender = std::thread::spawn(move || {
        payload_chunks(seed, BULK, |c| writer.write_all(c).unwrap());
        let _ = wait_all_received.recv_timeout(Duration::from_secs(60));
        let _ = writer.shutdown(std::net::Shutdown::Write);
    });
    let mut reader = s;
    let mut h = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            // A peer without half-close may reset once both payloads are through.
            Err(e) if e.kind() == ErrorKind::ConnectionReset && total >= BULK => 0,
            Err(e) => panic!("read after {total} bytes: {e}"),
        };
        if n == 0 {
            break;
        }
        total += n as u64;
        h.update(&buf[..n]);
        if total >= BULK {
            let _ = all_received.send(());
        }
    }
    drop(all_received);
    sender.join().unwrap();
    (total, h.finalize().to_vec())
}

fn run_bulk(client: Impl, server: Impl, transport: &str) {
    let dir = TempDir::new(&format!("trojan-{client:?}-{server:?}-{transport}"));
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = sink.local_addr().unwrap().port();
    let Some((_b, _c, b)) = start_pair(client, server, transport, "tcp", dir.path(), d) else {
        return;
    };
    let d_side = std::thread::spawn(move || {
        let (s, _) = sink.accept().unwrap();
        bulk_exchange(s, 2)
    });
    let (down_len, down_digest) = bulk_exchange(TcpStream::connect(("127.0.0.1", b)).unwrap(), 1);
    let (up_len, up_digest) = d_side.join().unwrap();
    let who = format!("{client:?} client → {server:?} server over {transport}");
    assert_eq!((up_len, down_len), (BULK, BULK), "{who}: lengths");
    assert_eq!(up_digest, digest(1, BULK), "{who}: uplink SHA-256");
    assert_eq!(down_digest, digest(2, BULK), "{who}: downlink SHA-256");
}

#[test]
fn trojan_gfw_client_skiff_server_tls() {
    run_bulk(Impl::TrojanGfw, Impl::Skiff, "tls");
}
#[test]
fn skiff_client_trojan_gfw_server_tls() {
    run_bulk(Impl::Skiff, Impl::TrojanGfw, "tls");
}
#[test]
fn v2ray_client_skiff_server_tls() {
    run_bulk(Impl::V2ray, Impl::Skiff, "tls");
}
#[test]
fn skiff_client_v2ray_server_tls() {
    run_bulk(Impl::Skiff, Impl::V2ray, "tls");
}
#[test]
fn skiff_client_skiff_server_ws_tls() {
    run_bulk(Impl::Skiff, Impl::Skiff, "ws-tls");
}

// ---- UDP ----

/// A UDP echo server on 127.0.0.1 in a thread; stops when dropped.
struct Echo {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Echo {
    fn start() -> Echo {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(600);
            let mut buf = vec![0u8; 65_536];
            while !stopped.load(Ordering::Relaxed) && Instant::now() < deadline {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    let _ = socket.send_to(&buf[..n], from);
                }
            }
        });
        Echo {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Datagram `i`: 1..=1400 bytes (1 and 1400 among them), deterministic content, starting
/// with the index (low byte first).
fn datagram(i: usize) -> Vec<u8> {
    let len = match i {
        0 => 1,
        1 => 1400,
        _ => 1 + (i * 7919 + 13) % 1400,
    };
    let mut out = noise(i as u64 + 1, len);
    for (byte, tag) in out.iter_mut().zip((i as u16).to_le_bytes()) {
        *byte = tag;
    }
    out
}

/// Sends each datagram from one of `sockets` (alternating) to `to` and waits for its echo,
/// resending up to [`ATTEMPTS`] times; a reply matching nothing sent fails at once.
fn echo_all(sockets: &[UdpSocket], to: SocketAddr, who: &str) -> usize {
    let mut sent: HashSet<Vec<u8>> = HashSet::new();
    let mut buf = vec![0u8; 65_536];
    let mut resends = 0;
    for i in 0..DATAGRAMS {
        let socket = &sockets[i % sockets.len()];
        let want = datagram(i);
        sent.insert(want.clone());
        let mut echoed = false;
        'attempts: for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                resends += 1;
            }
            socket.send_to(&want, to).unwrap();
            let deadline = Instant::now() + ATTEMPT_WAIT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left < Duration::from_millis(1) {
                    break;
                }
                socket.set_read_timeout(Some(left)).unwrap();
                match socket.recv_from(&mut buf) {
                    Ok((n, _)) => {
                        let got = &buf[..n];
                        if got == want.as_slice() {
                            echoed = true;
                            break 'attempts;
                        }
                        assert!(
                            sent.contains(got),
                            "{who}: waiting for datagram {i}, got {n} bytes matching nothing sent"
                        );
                    }
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        break;
                    }
                    Err(e) => panic!("{who}: receive failed: {e}"),
                }
            }
        }
        assert!(
            echoed,
            "{who}: datagram {i} ({} bytes) never came back intact in {ATTEMPTS} tries",
            want.len()
        );
    }
    resends
}

fn run_udp(client: Impl, server: Impl, transport: &str) {
    let dir = TempDir::new(&format!("trojan-udp-{client:?}-{server:?}-{transport}"));
    let echo = Echo::start();
    let Some((_b, _c, b)) = start_pair(
        client,
        server,
        transport,
        "udp",
        dir.path(),
        echo.addr.port(),
    ) else {
        return;
    };
    let sockets = [
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    ];
    let who = format!("UDP {client:?} client → {server:?} server over {transport}");
    let resends = echo_all(&sockets, SocketAddr::from(([127, 0, 0, 1], b)), &who);
    eprintln!("{who}: {DATAGRAMS} datagrams echoed, {resends} resent");
}

#[test]
fn udp_v2ray_client_skiff_server_tls() {
    run_udp(Impl::V2ray, Impl::Skiff, "tls");
}
#[test]
fn udp_skiff_client_v2ray_server_tls() {
    run_udp(Impl::Skiff, Impl::V2ray, "tls");
}
#[test]
fn udp_trojan_gfw_client_skiff_server_tls() {
    run_udp(Impl::TrojanGfw, Impl::Skiff, "tls");
}
#[test]
fn udp_skiff_client_trojan_gfw_server_tls() {
    run_udp(Impl::Skiff, Impl::TrojanGfw, "tls");
}
#[test]
fn udp_skiff_client_skiff_server_ws_tls() {
    run_udp(Impl::Skiff, Impl::Skiff, "ws-tls");
}

// ---- fallbacks ----

/// The same plain HTTP request over TLS, sent to a Skiff Trojan inbound whose fallback is
/// nginx and to trojan-gfw whose `remote_addr` is the same nginx, gets nginx's page both
/// times, byte for byte (Date aside); with no fallback Skiff closes without a byte.
#[test]
fn plain_http_reaches_the_fallback_like_trojan_gfw() {
    let Some(nginx) = nginx_binary() else { return };
    if peer(Impl::TrojanGfw).is_none() {
        return;
    }
    let dir = TempDir::new("trojan-fallback");
    certificate(dir.path());
    let root = site(dir.path(), "a", "site A");
    let (web, skiff_port, bare_port, gfw_port) =
        (free_port(), free_port(), free_port(), free_port());
    let _nginx = start_nginx(
        &nginx,
        dir.path(),
        &format!(
            "server {{ listen 127.0.0.1:{web}; root {}; }}",
            root.display()
        ),
        &[web],
    );
    let fallbacks = format!(r#"[{{ "dest": {web} }}]"#);
    let config = format!(
        r#"{{ "log": {{ "loglevel": "debug" }},
  "inbounds": [{}, {}],
  "outbounds": [{{ "protocol": "freedom" }}] }}"#,
        inbound(skiff_port, dir.path(), Some(&fallbacks)),
        inbound(bare_port, dir.path(), None),
    );
    let (mut skiff, log) = start_skiff(dir.path(), "skiff", &config, &[skiff_port, bare_port]);
    let _gfw = start(
        Impl::TrojanGfw,
        dir.path(),
        "gfw",
        &gfw_server(gfw_port, web, dir.path()),
        gfw_port,
        false,
    );

    let request = b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let fetch = |port: u16| {
        let out = s_client(port, "localhost", request);
        undated(&out.stdout)
    };
    let direct = {
        let (answer, _) = exchange(web, request);
        undated(&answer)
    };
    assert!(
        String::from_utf8_lossy(&direct).contains("site A"),
        "nginx itself: {:?}",
        String::from_utf8_lossy(&direct)
    );
    let via_skiff = fetch(skiff_port);
    let via_gfw = fetch(gfw_port);
    assert_eq!(
        String::from_utf8_lossy(&via_skiff),
        String::from_utf8_lossy(&direct),
        "Skiff's fallback"
    );
    assert_eq!(
        String::from_utf8_lossy(&via_gfw),
        String::from_utf8_lossy(&direct),
        "trojan-gfw's remote_addr"
    );
    // A wrong password is not a Trojan request either.
    let mut wrong = format!("{:056x}\r\n", 0).into_bytes();
    wrong.extend_from_slice(b"\x01\x01\x7f\x00\x00\x01\x00\x50\r\n");
    let out = s_client(skiff_port, "localhost", &wrong);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("HTTP/1.1 400"),
        "nginx should answer the replayed bytes: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    // No fallback: closed without a byte of Skiff's own.
    let out = s_client(bare_port, "localhost", request);
    assert!(
        out.stdout.is_empty(),
        "no fallback: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_healthy(&mut skiff, &log);
}

fn inbound(port: u16, dir: &Path, fallbacks: Option<&str>) -> String {
    let fallbacks = fallbacks
        .map(|f| format!(r#", "fallbacks": {f}"#))
        .unwrap_or_default();
    format!(
        r#"{{ "listen": "127.0.0.1", "port": {port}, "protocol": "trojan",
             "settings": {{ "clients": [{{ "password": "{PASSWORD}" }}]{fallbacks} }},
             "streamSettings": {{ {} }} }}"#,
        stream_settings("tls", dir, true)
    )
}
