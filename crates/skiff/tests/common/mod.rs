//! Helpers shared by the fallback and probing tests: temp dirs, processes killed by PID on
//! drop, a private nginx, a self-signed certificate, bounded raw exchanges, curl and openssl
//! s_client runs. Everything listens and connects on 127.0.0.1 only.
#![allow(dead_code)] // Each test file uses its own subset.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Every read in these tests gives up after this long.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

pub const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
pub const UUID_BYTES: [u8; 16] = [
    0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11,
];

/// A child process this test started; killed (by its PID) and reaped on drop.
pub struct Proc {
    pub child: Child,
    pub what: &'static str,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temporary directory, removed on drop unless SKIFF_KEEP_TEST_DIRS is set.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("skiff-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("SKIFF_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The first of `paths` that exists; None (with a note) when none does. CI installs every
/// tool these tests use (.ci/run), so there a missing one is a failure, not a skip.
pub fn tool(name: &str, paths: &[&str]) -> Option<PathBuf> {
    let found = paths.iter().map(PathBuf::from).find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install {name} (.ci/run)"
        );
        eprintln!("skipped: {name} is not installed (apt-get install {name})");
    }
    found
}

/// A peer binary from `../shared/peers/bin` (Xray, sing-box, UDPspeeder, udp2raw): the
/// environment variable `var` (e.g. XRAY_BIN) first, then `shared/peers/bin/NAME` beside
/// this repository. None (with a note) when neither is there; under CI a failure, since CI
/// has `../shared` beside the clone.
pub fn shared_peer(name: &str, var: &str) -> Option<PathBuf> {
    let found = std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| Some(shared_peers_dir().join(name)).filter(|p| p.is_file()));
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must find {name}: set {var} or put it in {}",
            shared_peers_dir().display()
        );
        eprintln!(
            "skipped: {name} not found (set {var}, or put it in {})",
            shared_peers_dir().display()
        );
    }
    found
}

/// `../shared/peers/bin` next to the repository root.
pub fn shared_peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers/bin")
}

pub fn nginx_binary() -> Option<PathBuf> {
    tool("nginx", &["/usr/sbin/nginx", "/usr/local/sbin/nginx"])
}

/// A port free on 127.0.0.1, below the kernel's ephemeral range: between this call and the
/// server's bind, no outgoing connection (curl's, nginx's, another test's) can take it as its
/// source port, which on a busy machine a port from the ephemeral range sometimes is. Never
/// the same port twice in one test process.
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    const SPAN: u64 = 12_000;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(32768);
    let from = ephemeral_low.saturating_sub(SPAN).max(1024);
    let mut given = GIVEN.lock().unwrap();
    let given = given.get_or_insert_with(HashSet::new);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32)
        ^ given.len() as u64;
    for pair in noise(seed, 2 * 100).chunks(2) {
        let offset = u64::from(u16::from_le_bytes([pair[0], pair[1]]));
        let Ok(port) = u16::try_from(from + offset % ephemeral_low.saturating_sub(from).max(1))
        else {
            continue;
        };
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            reserve(port);
            given.insert(port);
            return port;
        }
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    given.insert(port);
    port
}

/// Keeps `port` bound (SO_REUSEADDR, never listening) for the rest of the process: the
/// servers under test bind it anyway (they set SO_REUSEADDR, as nginx, Go and Skiff do), while
/// a plain bind elsewhere, like another test process's `free_port`, fails.
fn reserve(port: u16) {
    // SAFETY: plain socket calls on a fresh descriptor and a zeroed sockaddr_in; the
    // descriptor is deliberately kept open until the process exits.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return;
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len) != 0 {
            libc::close(fd);
        }
    }
}

/// True when something listens on 127.0.0.1:`port`, read from /proc so that no probe
/// connection reaches the server under test.
pub fn listening(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let wanted = format!("0100007F:{port:04X}");
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(1) == Some(&wanted.as_str()) && fields.get(3) == Some(&"0A")
    })
}

/// True when a UDP socket is bound to port `port` (from /proc, no probe packet).
pub fn udp_bound(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    let wanted = format!(":{port:04X}");
    table.lines().skip(1).any(|line| {
        line.split_whitespace()
            .nth(1)
            .is_some_and(|local| local.ends_with(&wanted))
    })
}

/// Waits until `proc` has bound UDP `port`; fails if it exits or takes over 20 s.
pub fn wait_udp(proc: &mut Proc, port: u16, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !udp_bound(port) {
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

pub fn wait_ports(proc: &mut Proc, ports: &[u16], log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for &port in ports {
        while !listening(port) {
            if let Ok(Some(status)) = proc.child.try_wait() {
                panic!(
                    "{} exited early ({status}); log:\n{}",
                    proc.what,
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} never listened on {port}; log:\n{}",
                proc.what,
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

/// A self-signed EC certificate for CN/SAN localhost: (certificate, key) paths.
pub fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec"])
        .args([
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
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
    assert!(status.success(), "openssl could not make a certificate");
    (cert, key)
}

/// Starts `skiff run -c` on `config` (written to DIR/NAME.json), waits for `ports`.
pub fn start_skiff(dir: &Path, name: &str, config: &str, ports: &[u16]) -> (Proc, PathBuf) {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, config).unwrap();
    let log = dir.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).unwrap();
    // The log goes to stdout, a panic message to stderr: one file for both.
    let child = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .arg("run")
        .arg("-c")
        .arg(&path)
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let mut proc = Proc {
        child,
        what: "skiff",
    };
    wait_ports(&mut proc, ports, &log);
    (proc, log)
}

/// The process is still up and its log shows no panic.
pub fn assert_healthy(proc: &mut Proc, log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    assert!(
        !text.contains("panicked"),
        "{} panicked:\n{text}",
        proc.what
    );
    assert!(
        proc.child.try_wait().unwrap().is_none(),
        "{} exited; log:\n{text}",
        proc.what
    );
}

/// A private nginx in DIR: every path it writes is inside DIR, it listens only where the
/// `servers` text says (127.0.0.1 ports), and runs in the foreground as one process, so the
/// test can kill it by PID. `log_format real` logs the PROXY protocol's client address.
pub fn start_nginx(nginx: &Path, dir: &Path, servers: &str, ports: &[u16]) -> Proc {
    for sub in ["tmp", "logs"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let d = dir.display();
    let conf = format!(
        r#"pid {d}/nginx.pid;
error_log {d}/logs/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {d}/logs/access.log;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    types {{ text/html html; text/plain txt; }}
    default_type application/octet-stream;
    log_format real '$proxy_protocol_addr:$proxy_protocol_port "$request"';
{servers}
}}
"#
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let log = dir.join("logs/error.log");
    let child = Command::new(nginx)
        .arg("-e")
        .arg(&log)
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&conf_path)
        .args(["-g", "daemon off; master_process off;"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("logs/stderr.log")).unwrap())
        .spawn()
        .unwrap();
    let mut proc = Proc {
        child,
        what: "nginx",
    };
    wait_ports(&mut proc, ports, &log);
    proc
}

/// How a connection ended for the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Eof,
    Reset,
}

/// Connects to 127.0.0.1:`port`, writes `bytes` and reads until the server closes (each
/// read bounded by READ_TIMEOUT; a timeout fails the test).
pub fn exchange(port: u16, bytes: &[u8]) -> (Vec<u8>, End) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(bytes).unwrap();
    read_to_close(&mut s)
}

pub fn read_to_close(s: &mut TcpStream) -> (Vec<u8>, End) {
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (answer, End::Eof),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (answer, End::Reset);
            }
            Err(e) => panic!(
                "no close within {READ_TIMEOUT:?} ({e}); got so far: {:?}",
                String::from_utf8_lossy(&answer)
            ),
        }
    }
}

/// An HTTP response with its `Date:` header value blanked: the only header nginx varies
/// between two identical requests.
pub fn undated(response: &[u8]) -> Vec<u8> {
    let head_end = find(response, b"\r\n\r\n").map_or(response.len(), |i| i + 4);
    let (head, body) = response.split_at(head_end);
    let mut out = Vec::with_capacity(response.len());
    for line in head.split_inclusive(|&b| b == b'\n') {
        if line.len() >= 5 && line[..5].eq_ignore_ascii_case(b"date:") {
            out.extend_from_slice(b"Date: -\r\n");
        } else {
            out.extend_from_slice(line);
        }
    }
    out.extend_from_slice(body);
    out
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Runs `cmd` with `input` on stdin (then closed), collecting stdout and stderr; killed by
/// PID and failed after `limit`.
pub fn run_bounded(mut cmd: Command, input: &[u8], limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let err = err_reader.join().unwrap();
            panic!(
                "{cmd:?} did not finish within {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    writer.join().unwrap();
    Output {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// `curl -sS` with `args`; stdout is what `-i`/`-w` asked for.
pub fn curl(args: &[&str]) -> Output {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10"]).args(args);
    run_bounded(cmd, b"", Duration::from_secs(15))
}

/// `openssl s_client` to 127.0.0.1:`port` with SNI `sni`: sends `input` as one write after
/// the handshake and returns the decrypted bytes the server sent until it closed.
pub fn s_client(port: u16, sni: &str, input: &[u8]) -> Output {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-quiet", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", sni]);
    run_bounded(cmd, input, Duration::from_secs(15))
}

/// A VLESS request (no flow, TCP) to 127.0.0.1:`port` for user `id`, with `payload`.
pub fn vless_request(id: &[u8; 16], port: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8];
    v.extend_from_slice(id);
    v.extend_from_slice(&[0, 1]);
    v.extend_from_slice(&port.to_be_bytes());
    v.extend_from_slice(&[1, 127, 0, 0, 1]);
    v.extend_from_slice(payload);
    v
}

/// Deterministic pseudo-random bytes (xorshift64).
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// A small static site for nginx: DIR/www-NAME/index.html with `marker` in it, a few KiB.
pub fn site(dir: &Path, name: &str, marker: &str) -> PathBuf {
    let root = dir.join(format!("www-{name}"));
    std::fs::create_dir_all(&root).unwrap();
    let mut page = format!("<!doctype html><title>{marker}</title><p>{marker}</p>\n");
    for i in 0..200 {
        page.push_str(&format!("<p>line {i} of {marker}</p>\n"));
    }
    std::fs::write(root.join("index.html"), page).unwrap();
    root
}

/// The resident set of process `pid` in KiB. An unreadable figure fails the test: a 0 would
/// make a memory bound pass vacuously.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .filter(|&kib: &u64| kib > 0)
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"))
}

/// Starts a peer binary (`xray run -c` / `sing-box run -c`) on `config` written to
/// DIR/NAME.json; output to DIR/NAME.out. Waits for TCP `port`, or UDP when `udp`.
pub fn start_peer(
    binary: &Path,
    what: &'static str,
    dir: &Path,
    name: &str,
    config: &str,
    port: u16,
    udp: bool,
) -> (Proc, PathBuf) {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, config).unwrap();
    let out = dir.join(format!("{name}.out"));
    let file = std::fs::File::create(&out).unwrap();
    let child = Command::new(binary)
        .arg("run")
        .arg("-c")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let mut proc = Proc { child, what };
    if udp {
        wait_udp(&mut proc, port, &out);
    } else {
        wait_ports(&mut proc, &[port], &out);
    }
    (proc, out)
}

/// An echo server on 127.0.0.1 for at most `connections` connections, a thread each: it
/// echoes until the client half-closes (then half-closes too) or stays silent for `idle`.
pub fn echo_server(connections: usize, idle: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(connections) {
            let Ok(mut conn) = conn else { continue };
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let _ = conn.set_read_timeout(Some(idle));
                    let mut buf = vec![0u8; 64 << 10];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 || conn.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = conn.shutdown(std::net::Shutdown::Write);
                })
                .unwrap();
        }
    });
    port
}

/// Runs `xray api SUB --server=127.0.0.1:PORT ARGS…` (bounded at 20 s); whether it succeeded,
/// and its stdout and stderr together without the CLI's `[Warning]` lines.
pub fn xray_api(xray: &Path, port: u16, sub: &str, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(xray);
    cmd.arg("api")
        .arg(sub)
        .arg(format!("--server=127.0.0.1:{port}"))
        .args(args);
    let out = run_bounded(cmd, b"", Duration::from_secs(20));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text: Vec<&str> = text.lines().filter(|l| !l.contains("[Warning]")).collect();
    (out.status.success(), text.join("\n"))
}

/// Waits (10 s at most) until `xray api PROBE…` succeeds against the API on `port`.
pub fn wait_xray_api(xray: &Path, port: u16, probe: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if xray_api(xray, port, probe[0], &probe[1..]).0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the API on port {port} never answered");
}
