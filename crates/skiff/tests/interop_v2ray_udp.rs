//! UDP over VLESS (command 0x02), interop with Debian's v2ray 4.34 in both directions over
//! tcp, tls, ws and ws+tls, plus skiff ↔ skiff: test socket → B (dokodemo-door `network: udp`
//! → vless out) → C (vless in → freedom) → a UDP echo server in the test. 200 datagrams of
//! 1..=1400 bytes, each with its index, must all come back byte for byte (each is resent up
//! to three times: loopback UDP may drop under load). Also: SOCKS5 UDP ASSOCIATE through a
//! VLESS outbound to two destinations at once, connections the server closes for idleness
//! being reopened, and a skiff server ending a stream cut inside a packet. `.ci/run` installs
//! v2ray; outside CI a machine without it skips the v2ray cases with a message.
//!
//! v2ray 4.34 carries at most 2046-byte datagrams: its VLESS writer drops longer ones, and its
//! freedom splits longer uplink packets into 2048-byte datagrams. Hence 1400 here.

use std::collections::{HashMap, HashSet};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
const DATAGRAMS: usize = 200;
/// Loopback UDP may drop under load: each datagram gets this many tries…
const ATTEMPTS: usize = 3;
/// …each waiting this long for its echo.
const ATTEMPT_WAIT: Duration = Duration::from_secs(3);

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

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Impl {
    Skiff,
    V2ray,
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

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// True when a socket is bound on 127.0.0.1:`port` in `table` (/proc/net/tcp or udp) in
/// `state` (0A = TCP LISTEN, 07 = an unconnected UDP socket). Read from /proc instead of
/// probing: a probe datagram or connection into B would travel the whole chain.
fn bound(table: &str, port: u16, state: &str) -> bool {
    let table = std::fs::read_to_string(table).unwrap_or_default();
    let wanted = format!("0100007F:{port:04X}");
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(1) == Some(&wanted.as_str()) && fields.get(3) == Some(&state)
    })
}

fn wait_bound(udp: bool, port: u16, child: &mut Child, what: &str) {
    let (table, state) = if udp {
        ("/proc/net/udp", "07")
    } else {
        ("/proc/net/tcp", "0A")
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if bound(table, port, state) {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} never bound {port} ({table})");
}

fn certificate(dir: &Path) {
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

/// Debug logs when the case's files are kept for a look (SKIFF_KEEP_INTEROP=1).
fn loglevel() -> &'static str {
    if std::env::var_os("SKIFF_KEEP_INTEROP").is_some() {
        "debug"
    } else {
        "warning"
    }
}

fn vless_outbound(c: u16, transport: &str, dir: &Path) -> String {
    format!(
        r#"{{ "protocol": "vless",
             "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {c},
                                         "users": [{{ "id": "{UUID}", "encryption": "none" }}] }}] }},
             "streamSettings": {{ {} }} }}"#,
        stream_settings(transport, dir, false)
    )
}

/// B: UDP on 127.0.0.1:`listen`, every datagram to 127.0.0.1:`echo` through VLESS to C.
fn tunnel_client_config(listen: u16, echo: u16, c: u16, transport: &str, dir: &Path) -> String {
    format!(
        r#"{{ "log": {{ "loglevel": "{}" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {listen}, "protocol": "dokodemo-door",
                 "settings": {{ "address": "127.0.0.1", "port": {echo}, "network": "udp" }} }}],
  "outbounds": [{}] }}"#,
        loglevel(),
        vless_outbound(c, transport, dir)
    )
}

/// B as a SOCKS5 server with UDP ASSOCIATE, out through VLESS to C.
fn socks_client_config(listen: u16, c: u16, dir: &Path) -> String {
    format!(
        r#"{{ "log": {{ "loglevel": "{}" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {listen}, "protocol": "socks",
                 "settings": {{ "auth": "noauth", "udp": true, "ip": "127.0.0.1" }} }}],
  "outbounds": [{}] }}"#,
        loglevel(),
        vless_outbound(c, "tcp", dir)
    )
}

/// C: VLESS in, freedom out; `level` is policy level 0's settings when given.
fn server_config(listen: u16, transport: &str, dir: &Path, level: Option<&str>) -> String {
    let policy = level
        .map(|l| format!(r#""policy": {{ "levels": {{ "0": {{ {l} }} }} }},"#))
        .unwrap_or_default();
    format!(
        r#"{{ "log": {{ "loglevel": "{}" }}, {policy}
  "inbounds": [{{ "listen": "127.0.0.1", "port": {listen}, "protocol": "vless",
                 "settings": {{ "clients": [{{ "id": "{UUID}" }}], "decryption": "none" }},
                 "streamSettings": {{ {} }} }}],
  "outbounds": [{{ "protocol": "freedom" }}] }}"#,
        loglevel(),
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

/// Datagram `i`: 1..=1400 bytes (1 and 1400 among them), deterministic content (xorshift),
/// starting with the index (low byte first, so one-byte datagrams differ too).
fn datagram(i: usize) -> Vec<u8> {
    let len = match i {
        0 => 1,
        1 => 1400,
        _ => 1 + (i * 7919 + 13) % 1400,
    };
    let mut state = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out: Vec<u8> = (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    for (byte, tag) in out.iter_mut().zip((i as u16).to_le_bytes()) {
        *byte = tag;
    }
    out
}

/// Adds what the first hop needs to a payload.
type Wrap = dyn Fn(&[u8]) -> Vec<u8>;

/// How a datagram travels: where it is sent, how it is wrapped and unwrapped on the way.
struct Route<'a> {
    socket: &'a UdpSocket,
    to: SocketAddr,
    /// Adds what the first hop needs (SOCKS5 UDP header) to a payload.
    wrap: &'a Wrap,
    /// The payload of a reply, or `None` when the reply is malformed.
    unwrap: &'a dyn Fn(&[u8]) -> Option<Vec<u8>>,
}

/// Sends each of `indices` on its path (in turn, one at a time) and waits for its echo,
/// resending up to [`ATTEMPTS`] times. A late echo of an earlier datagram is skipped; a reply
/// that matches nothing sent is corruption and fails at once. Returns the resend count.
fn echo_all(paths: &[Route<'_>], indices: impl Iterator<Item = usize>, who: &str) -> usize {
    let mut sent: HashSet<Vec<u8>> = HashSet::new();
    let mut buf = vec![0u8; 65_536];
    let mut resends = 0;
    for i in indices {
        let path = &paths[i % paths.len()];
        let want = datagram(i);
        sent.insert(want.clone());
        let mut echoed = false;
        'attempts: for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                resends += 1;
            }
            path.socket.send_to(&(path.wrap)(&want), path.to).unwrap();
            let deadline = Instant::now() + ATTEMPT_WAIT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left < Duration::from_millis(1) {
                    break;
                }
                path.socket.set_read_timeout(Some(left)).unwrap();
                match path.socket.recv_from(&mut buf) {
                    Ok((n, _)) => {
                        let got = (path.unwrap)(&buf[..n]).unwrap_or_else(|| {
                            panic!("{who}: malformed or misaddressed reply of {n} bytes")
                        });
                        if got == want {
                            echoed = true;
                            break 'attempts;
                        }
                        assert!(
                            sent.contains(&got),
                            "{who}: while waiting for datagram {i}, a reply of {} bytes arrived \
                             that matches nothing sent",
                            got.len()
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

fn plain(payload: &[u8]) -> Vec<u8> {
    payload.to_vec()
}

fn plain_reply(reply: &[u8]) -> Option<Vec<u8>> {
    Some(reply.to_vec())
}

/// A scratch directory for one case.
fn case_dir(name: &str) -> (PathBuf, Dir) {
    let dir = std::env::temp_dir().join(format!("skiff-udp-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    certificate(&dir);
    (dir.clone(), Dir(dir))
}

fn program(which: Impl, v2ray: &Option<PathBuf>) -> PathBuf {
    match which {
        Impl::Skiff => PathBuf::from(env!("CARGO_BIN_EXE_skiff")),
        Impl::V2ray => v2ray.clone().expect("v2ray checked"),
    }
}

/// Starts C then B (a dokodemo-door UDP tunnel to `echo`); returns them with B's UDP port.
fn start_tunnel(
    client: Impl,
    server: Impl,
    transport: &str,
    dir: &Path,
    echo: u16,
    level: Option<&str>,
) -> Option<(Proc, Proc, u16)> {
    let v2ray = if client == Impl::V2ray || server == Impl::V2ray {
        Some(v2ray()?)
    } else {
        None
    };
    let (b, c) = (free_udp_port(), free_tcp_port());
    std::fs::write(
        dir.join("b.json"),
        tunnel_client_config(b, echo, c, transport, dir),
    )
    .unwrap();
    std::fs::write(dir.join("c.json"), server_config(c, transport, dir, level)).unwrap();
    let mut server_proc = start(
        &program(server, &v2ray),
        &dir.join("c.json"),
        server == Impl::V2ray,
    );
    wait_bound(false, c, &mut server_proc.0, "server C");
    let mut client_proc = start(
        &program(client, &v2ray),
        &dir.join("b.json"),
        client == Impl::V2ray,
    );
    wait_bound(true, b, &mut client_proc.0, "client B");
    Some((client_proc, server_proc, b))
}

/// 200 datagrams through the tunnel from two client sockets (two UDP sessions, two VLESS
/// connections), alternating.
fn run_tunnel_case(client: Impl, server: Impl, transport: &str) {
    let name = format!("{client:?}-{server:?}-{transport}");
    let (dir, _cleanup) = case_dir(&name);
    let echo = Echo::start();
    let Some((_b, _c, b)) = start_tunnel(client, server, transport, &dir, echo.addr.port(), None)
    else {
        return;
    };
    let to = SocketAddr::from(([127, 0, 0, 1], b));
    let sockets = [
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    ];
    let paths: Vec<Route<'_>> = sockets
        .iter()
        .map(|socket| Route {
            socket,
            to,
            wrap: &plain,
            unwrap: &plain_reply,
        })
        .collect();
    let who = format!("{client:?} client → {server:?} server over {transport}");
    let resends = echo_all(&paths, 0..DATAGRAMS, &who);
    eprintln!("{who}: {DATAGRAMS} datagrams echoed, {resends} resent");
}

#[test]
fn v2ray_client_skiff_server_tcp() {
    run_tunnel_case(Impl::V2ray, Impl::Skiff, "tcp");
}
#[test]
fn skiff_client_v2ray_server_tcp() {
    run_tunnel_case(Impl::Skiff, Impl::V2ray, "tcp");
}
#[test]
fn v2ray_client_skiff_server_tls() {
    run_tunnel_case(Impl::V2ray, Impl::Skiff, "tls");
}
#[test]
fn skiff_client_v2ray_server_tls() {
    run_tunnel_case(Impl::Skiff, Impl::V2ray, "tls");
}
#[test]
fn v2ray_client_skiff_server_ws() {
    run_tunnel_case(Impl::V2ray, Impl::Skiff, "ws");
}
#[test]
fn skiff_client_v2ray_server_ws() {
    run_tunnel_case(Impl::Skiff, Impl::V2ray, "ws");
}
#[test]
fn v2ray_client_skiff_server_ws_tls() {
    run_tunnel_case(Impl::V2ray, Impl::Skiff, "ws-tls");
}
#[test]
fn skiff_client_v2ray_server_ws_tls() {
    run_tunnel_case(Impl::Skiff, Impl::V2ray, "ws-tls");
}
#[test]
fn skiff_client_skiff_server_tcp() {
    run_tunnel_case(Impl::Skiff, Impl::Skiff, "tcp");
}
#[test]
fn skiff_client_skiff_server_ws_tls() {
    run_tunnel_case(Impl::Skiff, Impl::Skiff, "ws-tls");
}

/// The server closes an idle UDP connection (connIdle 2 s); the client's tunnel session
/// outlives it and must open a fresh VLESS connection for the next datagram.
fn run_idle_case(client: Impl, server: Impl) {
    let name = format!("idle-{client:?}-{server:?}");
    let (dir, _cleanup) = case_dir(&name);
    let echo = Echo::start();
    let Some((_b, _c, b)) = start_tunnel(
        client,
        server,
        "tcp",
        &dir,
        echo.addr.port(),
        Some(r#""connIdle": 2"#),
    ) else {
        return;
    };
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let paths = [Route {
        socket: &socket,
        to: SocketAddr::from(([127, 0, 0, 1], b)),
        wrap: &plain,
        unwrap: &plain_reply,
    }];
    let who = format!("{client:?} client → {server:?} server (connIdle 2 s)");
    let mut resends = echo_all(&paths, 0..5, &who);
    // v2ray checks inactivity once per connIdle period, so it closes between 2 and 4 s;
    // skiff at 2 s. Either way the connection is gone after 6 s.
    std::thread::sleep(Duration::from_secs(6));
    resends += echo_all(&paths, 5..10, &who);
    eprintln!("{who}: 10 datagrams echoed across an idle close, {resends} resent");
}

#[test]
fn skiff_client_reopens_after_v2ray_server_idle_close() {
    run_idle_case(Impl::Skiff, Impl::V2ray);
}
#[test]
fn skiff_client_reopens_after_skiff_server_idle_close() {
    run_idle_case(Impl::Skiff, Impl::Skiff);
}
#[test]
fn v2ray_client_reopens_after_skiff_server_idle_close() {
    run_idle_case(Impl::V2ray, Impl::Skiff);
}

/// SOCKS5 UDP datagram header for an IPv4 destination.
fn socks_header(to: SocketAddr) -> Vec<u8> {
    let SocketAddr::V4(v4) = to else {
        panic!("IPv4 only")
    };
    let mut out = vec![0, 0, 0, 1];
    out.extend_from_slice(&v4.ip().octets());
    out.extend_from_slice(&v4.port().to_be_bytes());
    out
}

/// SOCKS5 UDP ASSOCIATE on a skiff SOCKS inbound whose outbound is VLESS to a skiff server:
/// one association, two echo destinations alternating (two VLESS connections behind one
/// packet conversation); replies must name the destination that answered.
#[test]
fn socks_udp_associate_through_vless() {
    let (dir, _cleanup) = case_dir("socks");
    let skiff = PathBuf::from(env!("CARGO_BIN_EXE_skiff"));
    let (s, c) = (free_tcp_port(), free_tcp_port());
    std::fs::write(dir.join("b.json"), socks_client_config(s, c, &dir)).unwrap();
    std::fs::write(dir.join("c.json"), server_config(c, "tcp", &dir, None)).unwrap();
    let mut server = start(&skiff, &dir.join("c.json"), false);
    wait_bound(false, c, &mut server.0, "server C");
    let mut client = start(&skiff, &dir.join("b.json"), false);
    wait_bound(false, s, &mut client.0, "SOCKS client B");

    let mut control = TcpStream::connect(("127.0.0.1", s)).unwrap();
    control
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    control.write_all(&[5, 1, 0]).unwrap();
    let mut greeting = [0u8; 2];
    control.read_exact(&mut greeting).unwrap();
    assert_eq!(greeting, [5, 0]);
    control.write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0]).unwrap();
    let mut reply = [0u8; 10];
    control.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[..4], &[5, 0, 0, 1], "UDP ASSOCIATE refused");
    let relay = SocketAddr::from((
        [reply[4], reply[5], reply[6], reply[7]],
        u16::from_be_bytes([reply[8], reply[9]]),
    ));

    let echoes = [Echo::start(), Echo::start()];
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let wraps: Vec<Box<Wrap>> = echoes
        .iter()
        .map(|echo| {
            let header = socks_header(echo.addr);
            Box::new(move |payload: &[u8]| [&header[..], payload].concat()) as Box<Wrap>
        })
        .collect();
    // A reply must name the destination its datagram was sent to: datagram j went to
    // echoes[j % 2]. (Unknown payloads pass through for echo_all to call corruption.)
    let known: Vec<Vec<u8>> = echoes.iter().map(|echo| socks_header(echo.addr)).collect();
    let index: HashMap<Vec<u8>, usize> = (0..DATAGRAMS).map(|j| (datagram(j), j)).collect();
    let unwrap = |reply: &[u8]| {
        let (header, payload) = reply.split_at_checked(10)?;
        match index.get(payload) {
            Some(j) if header != known[j % known.len()] => None,
            _ => Some(payload.to_vec()),
        }
    };
    let paths: Vec<Route<'_>> = wraps
        .iter()
        .map(|wrap| Route {
            socket: &socket,
            to: relay,
            wrap: &**wrap,
            unwrap: &unwrap,
        })
        .collect();
    let resends = echo_all(&paths, 0..DATAGRAMS, "SOCKS5 UDP through VLESS");
    eprintln!("SOCKS5 UDP through VLESS: {DATAGRAMS} datagrams echoed, {resends} resent");

    drop(control);
}

/// A hand-made VLESS UDP request to 127.0.0.1:`port` (vless.md §2), followed by `tail`.
fn vless_udp_request(port: u16, tail: &[u8]) -> Vec<u8> {
    let uuid: Vec<u8> = (0..32)
        .step_by(2)
        .map(|i| u8::from_str_radix(&UUID.replace('-', "")[i..i + 2], 16).unwrap())
        .collect();
    let mut out = vec![0];
    out.extend_from_slice(&uuid);
    out.extend_from_slice(&[0, 2]);
    out.extend_from_slice(&port.to_be_bytes());
    out.extend_from_slice(&[1, 127, 0, 0, 1]);
    out.extend_from_slice(tail);
    out
}

/// Reads until the server closes (or 10 s pass, which fails).
fn read_to_close(stream: &mut TcpStream, what: &str) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return all,
            Err(e) => panic!("{what}: server did not close: {e}"),
        }
    }
}

/// A client stream cut inside a packet ends that connection at once (not after connIdle);
/// a clean close still gets the replies (for downlinkOnly, 1 s here); the server keeps
/// serving.
#[test]
fn skiff_server_ends_a_udp_stream_cut_inside_a_packet() {
    let (dir, _cleanup) = case_dir("cut");
    let skiff = PathBuf::from(env!("CARGO_BIN_EXE_skiff"));
    let c = free_tcp_port();
    let level = r#""downlinkOnly": 1"#;
    std::fs::write(
        dir.join("c.json"),
        server_config(c, "tcp", &dir, Some(level)),
    )
    .unwrap();
    let mut server = start(&skiff, &dir.join("c.json"), false);
    wait_bound(false, c, &mut server.0, "server C");
    let echo = Echo::start();
    let port = echo.addr.port();

    // "hello", then a frame announcing 1000 bytes that brings 10 and the end of the stream.
    let mut cut = TcpStream::connect(("127.0.0.1", c)).unwrap();
    let mut tail = b"\x00\x05hello\x03\xe8".to_vec();
    tail.extend_from_slice(&[0x55; 10]);
    cut.write_all(&vless_udp_request(port, &tail)).unwrap();
    cut.shutdown(std::net::Shutdown::Write).unwrap();
    let started = Instant::now();
    let got = read_to_close(&mut cut, "cut stream");
    // The response header leaves with the first answer, as Xray's does: a stream cut before
    // the echo came back ends with nothing at all.
    assert!(
        got.is_empty() || got == b"\x00\x00" || got == b"\x00\x00\x00\x05hello",
        "cut stream got {got:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    // A clean end between packets: the echo still comes back before the server closes.
    // Datagrams can be lost: up to three connections.
    let mut echoed = false;
    for _ in 0..ATTEMPTS {
        let mut clean = TcpStream::connect(("127.0.0.1", c)).unwrap();
        clean
            .write_all(&vless_udp_request(port, b"\x00\x05again"))
            .unwrap();
        clean.shutdown(std::net::Shutdown::Write).unwrap();
        let got = read_to_close(&mut clean, "clean stream");
        assert!(got.starts_with(b"\x00\x00"), "clean stream got {got:?}");
        if got == b"\x00\x00\x00\x05again" {
            echoed = true;
            break;
        }
    }
    assert!(echoed, "no echo after a clean end of the uplink");
}
