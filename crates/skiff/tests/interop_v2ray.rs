//! VLESS interop with Debian's v2ray 4.34, both directions, over tcp, tls, ws and ws+tls:
//! A → B (dokodemo-door → vless out) → C (vless in → freedom) → D, with B or C being v2ray,
//! 64 MiB each way at once, SHA-256 checked. `.ci/run` installs v2ray; outside CI a machine
//! without it skips these tests with a message.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

const BULK: u64 = 64 << 20;
const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        // SKIFF_KEEP_INTEROP=1 keeps configs and logs of a failing case for a look.
        if std::env::var_os("SKIFF_KEEP_INTEROP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn v2ray() -> Option<PathBuf> {
    let found = ["/usr/bin/v2ray", "/usr/local/bin/v2ray"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install v2ray (.ci/run)"
        );
        eprintln!("skipped: v2ray is not installed (apt-get install v2ray)");
    }
    found
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// True when something listens on 127.0.0.1:`port`. Read from /proc instead of connecting: a
/// probe connection into B would travel the whole chain and reach D as a bogus first client.
fn listening(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let wanted = format!("0100007F:{port:04X}");
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(1) == Some(&wanted.as_str()) && fields.get(3) == Some(&"0A")
    })
}

fn wait_port(port: u16, child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if listening(port) {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} never listened on {port}");
}

fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args([
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    (cert, key)
}

fn stream_settings(transport: &str, dir: &Path, server: bool) -> String {
    let ws = r#""network": "ws", "wsSettings": { "path": "/vl" }"#;
    let tls = || {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        if server {
            format!(
                r#""security": "tls", "tlsSettings": {{ "certificates": [{{ "certificateFile": "{}", "keyFile": "{}" }}] }}"#,
                cert.display(),
                key.display()
            )
        } else {
            r#""security": "tls", "tlsSettings": { "serverName": "localhost", "allowInsecure": true }"#.to_string()
        }
    };
    match transport {
        "tcp" => r#""network": "tcp""#.to_string(),
        "tls" => format!(r#""network": "tcp", {}"#, tls()),
        "ws" => ws.to_string(),
        "ws-tls" => format!("{ws}, {}", tls()),
        other => panic!("unknown transport {other}"),
    }
}

/// Once A has the whole download it half-closes, and D half-closes only once it has the whole
/// upload: between the two, each relay (v2ray's and Skiff's alike) gives the other direction
/// `downlinkOnly` / `uplinkOnly` (5 s / 2 s by default) before tearing the tunnel down, which
/// drops what it still holds. A loaded machine can need longer, so both ends get 10 s (the
/// cases that end on a timer rather than on both FINs take that long).
const SLOW_MACHINE_POLICY: &str =
    r#""policy": { "levels": { "0": { "uplinkOnly": 10, "downlinkOnly": 10 } } }"#;

fn client_config(listen: u16, d: u16, c: u16, transport: &str, dir: &Path) -> String {
    format!(
        r#"{{ "log": {{ "loglevel": "warning" }}, {SLOW_MACHINE_POLICY},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {listen}, "protocol": "dokodemo-door",
                 "settings": {{ "address": "127.0.0.1", "port": {d}, "network": "tcp" }} }}],
  "outbounds": [{{ "protocol": "vless",
                  "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {c},
                                              "users": [{{ "id": "{UUID}", "encryption": "none" }}] }}] }},
                  "streamSettings": {{ {} }} }}] }}"#,
        stream_settings(transport, dir, false)
    )
}

fn server_config(listen: u16, transport: &str, dir: &Path) -> String {
    format!(
        r#"{{ "log": {{ "loglevel": "warning" }}, {SLOW_MACHINE_POLICY},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {listen}, "protocol": "vless",
                 "settings": {{ "clients": [{{ "id": "{UUID}" }}], "decryption": "none" }},
                 "streamSettings": {{ {} }} }}],
  "outbounds": [{{ "protocol": "freedom" }}] }}"#,
        stream_settings(transport, dir, true)
    )
}

fn start(program: &Path, config: &Path, is_v2ray: bool) -> Proc {
    let mut cmd = Command::new(program);
    if is_v2ray {
        cmd.arg("-config")
            .arg(config)
            .env("V2RAY_LOCATION_ASSET", config.parent().unwrap());
    } else {
        cmd.arg("run").arg("-c").arg(config);
    }
    let log = std::fs::File::create(config.with_extension("log")).unwrap();
    Proc(cmd.stdout(Stdio::null()).stderr(log).spawn().unwrap())
}

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

/// Sends `seed`'s payload on a clone of `s` while hashing everything read from `s`.
///
/// The write side is shut only once the whole opposite payload has arrived (or 60 s passed).
/// v2ray 4.34 drops what is still queued in its internal pipe towards the outbound when the
/// other direction has already finished and the uplink ends: its inbound handler returns,
/// cancels the session context and the outbound closes with the queue unsent. Holding the
/// FIN keeps both payloads complete before either direction ends, which is how request /
/// response traffic behaves anyway; half-close itself is still exercised.
fn exchange(s: TcpStream, seed: u64) -> (u64, Vec<u8>) {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut writer = s.try_clone().unwrap();
    let (all_received, wait_all_received) = std::sync::mpsc::channel::<()>();
    let sender = std::thread::spawn(move || {
        payload_chunks(seed, BULK, |c| writer.write_all(c).unwrap());
        let _ = wait_all_received.recv_timeout(Duration::from_secs(60));
        writer.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let mut reader = s;
    let mut h = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf).unwrap();
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

fn run_case(v2ray_is_client: bool, transport: &str) {
    let Some(v2ray) = v2ray() else { return };
    let skiff = PathBuf::from(env!("CARGO_BIN_EXE_skiff"));
    let dir = std::env::temp_dir().join(format!(
        "skiff-interop-{}-{transport}-{v2ray_is_client}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = Dir(dir.clone());
    certificate(&dir);

    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = sink.local_addr().unwrap().port();
    let (b, c) = (free_port(), free_port());
    std::fs::write(dir.join("b.json"), client_config(b, d, c, transport, &dir)).unwrap();
    std::fs::write(dir.join("c.json"), server_config(c, transport, &dir)).unwrap();
    let (b_prog, c_prog) = if v2ray_is_client {
        (&v2ray, &skiff)
    } else {
        (&skiff, &v2ray)
    };
    let mut server = start(c_prog, &dir.join("c.json"), !v2ray_is_client);
    wait_port(c, &mut server.0, "server C");
    let mut client = start(b_prog, &dir.join("b.json"), v2ray_is_client);
    wait_port(b, &mut client.0, "client B");

    let d_side = std::thread::spawn(move || {
        let (s, _) = sink.accept().unwrap();
        exchange(s, 2)
    });
    let (down_len, down_digest) = exchange(TcpStream::connect(("127.0.0.1", b)).unwrap(), 1);
    let (up_len, up_digest) = d_side.join().unwrap();
    let who = if v2ray_is_client {
        "v2ray client → skiff server"
    } else {
        "skiff client → v2ray server"
    };
    assert_eq!(
        (up_len, down_len),
        (BULK, BULK),
        "{who} over {transport}: lengths"
    );
    assert_eq!(
        up_digest,
        digest(1, BULK),
        "{who} over {transport}: uplink SHA-256"
    );
    assert_eq!(
        down_digest,
        digest(2, BULK),
        "{who} over {transport}: downlink SHA-256"
    );
}

#[test]
fn v2ray_client_skiff_server_tcp() {
    run_case(true, "tcp");
}
#[test]
fn skiff_client_v2ray_server_tcp() {
    run_case(false, "tcp");
}
#[test]
fn v2ray_client_skiff_server_tls() {
    run_case(true, "tls");
}
#[test]
fn skiff_client_v2ray_server_tls() {
    run_case(false, "tls");
}
#[test]
fn v2ray_client_skiff_server_ws() {
    run_case(true, "ws");
}
#[test]
fn skiff_client_v2ray_server_ws() {
    run_case(false, "ws");
}
#[test]
fn v2ray_client_skiff_server_ws_tls() {
    run_case(true, "ws-tls");
}
#[test]
fn skiff_client_v2ray_server_ws_tls() {
    run_case(false, "ws-tls");
}
