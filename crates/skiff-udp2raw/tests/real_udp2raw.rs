//! The codec against the real `udp2raw` (wangyu-/udp2raw e42f0e5, `UDP2RAW_BIN` or
//! `../shared/peers/bin/udp2raw` beside the workspace).
//!
//! - `keys_match_real_binary`: udp2raw prints its derived keys at `--log-level 5`; `-g` makes
//!   it print its firewall rule and exit, touching nothing. Ours must be the same bytes, for
//!   both roles and a few passwords.
//! - `real_tunnel_matrix`: for every raw mode × cipher mode × auth mode over IPv4 (and, per
//!   raw mode, each cipher mode once over IPv6, `[::1]`, and once with `--fix-gro`), a fresh network
//!   namespace (root needed) with `lo` up runs a real `udp2raw -s` and `udp2raw -c` (with `-a`
//!   when `iptables` is installed). Known datagrams (sequence number + CRC-32) go into the
//!   client, must come out at the server's target, and are echoed back. Meanwhile an
//!   AF_PACKET socket opened inside the namespace captures every IP packet; each is parsed
//!   with our header parsers, rebuilt with our header builders (must be byte-identical),
//!   decrypted with our codec (the receiving end's keys), and re-encrypted with the sending
//!   end's keys (byte-identical; for CBC all but the last block, whose padding bytes udp2raw
//!   leaves uninitialised). The decoded data must be exactly what was sent, in both
//!   directions; handshakes, heartbeats and sequence numbers must look as documented.
//! - `our_client_against_real_server`: the other way round. A real `udp2raw -s` alone in a
//!   namespace, and a client made of this crate: packets built with our header builders and
//!   sent on a raw socket (SYN first in fake TCP), our handshake and data packets, our
//!   encryption; replies read from an AF_PACKET capture. The server must complete the
//!   handshake, deliver our datagrams to its target and send the target's answers back to us;
//!   a replayed packet must be dropped (delivered under `auth none`, where udp2raw turns
//!   anti-replay off).
//!
//! `UDP2RAW_CASES=faketcp-xor` (a substring of `raw-cipher-auth`) narrows the matrices.
//!
//! Outside CI, a missing binary, `ip` or root skips with a printed reason; under `CI=true`
//! it fails.

use std::collections::{HashSet, VecDeque};
use std::fs::File;
use std::io::Read as _;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use skiff_udp2raw::headers::{self, RawMode, Transport};
use skiff_udp2raw::packet::{DEFAULT_HB_LEN, Handshake};
use skiff_udp2raw::{
    AuthMode, CipherMode, Codec, Keys, Packet, ReplayWindow, Role, SaferKind, gro,
};

const SERVER_PORT: u16 = 4096;
const TARGET_PORT: u16 = 7000;
const CLIENT_PORT: u16 = 3333;
const LOOPBACK: &str = "127.0.0.1";
const PASSWORD: &str = "skiff-udp2raw-test";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips (prints why) outside CI; fails under CI.
fn skip(reason: &str) {
    assert!(!in_ci(), "CI=true and {reason}");
    eprintln!("SKIPPED real udp2raw test: {reason}");
}

fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("UDP2RAW_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/peers/bin/udp2raw"));
    path.is_file().then_some(path)
}

fn have(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `cmd`, bounded to 20 s, and returns its stdout (stderr merged).
fn run_bounded(cmd: &mut Command) -> String {
    let dir = tempdir("run");
    let out_path = dir.join("out");
    let out = File::create(&out_path).unwrap();
    let mut child = cmd
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::read_to_string(&out_path).unwrap_or_default()
}

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// A scratch directory for logs, removed on drop (failure messages carry the log tails).
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir(tag: &str) -> TempDir {
    let n = DIRS.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("skiff-u2r-{}-{tag}-{n}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

fn parse_key_lines(log: &str) -> Vec<Vec<u8>> {
    log.lines()
        .filter(|l| l.starts_with('<') && l.ends_with('>'))
        .map(|l| {
            l.trim_start_matches('<')
                .trim_end_matches('>')
                .split("><")
                .map(|h| u8::from_str_radix(h, 16).expect("hex byte"))
                .collect()
        })
        .collect()
}

#[test]
fn keys_match_real_binary() {
    let Some(bin) = binary() else {
        return skip("no udp2raw binary (UDP2RAW_BIN or ../shared/peers/bin/udp2raw)");
    };
    for password in [
        "secret key",
        "pw",
        "a longer pass phrase, with: punctuation & ünïcode",
    ] {
        for role in [Role::Server, Role::Client] {
            let mut cmd = Command::new(&bin);
            cmd.arg(if role == Role::Server { "-s" } else { "-c" });
            cmd.args(["-l127.0.0.1:4096", "-r127.0.0.1:7000", "-k", password]);
            cmd.args(["--log-level", "5", "--disable-color", "-g"]);
            let log = run_bounded(&mut cmd);
            let lines = parse_key_lines(&log);
            assert!(
                lines.len() >= 5,
                "udp2raw printed no keys for {role:?}:\n{log}"
            );
            // udp2raw keeps only the first word of -k.
            let k = Keys::derive(skiff_udp2raw::cli_password(password.as_bytes()), role);
            assert_eq!(lines[0], k.normal, "normal key, {role:?}, {password:?}");
            assert_eq!(
                lines[1], k.hmac_encrypt,
                "hmac encrypt key, {role:?}, {password:?}"
            );
            assert_eq!(
                lines[2], k.hmac_decrypt,
                "hmac decrypt key, {role:?}, {password:?}"
            );
            assert_eq!(
                lines[3], k.cipher_encrypt,
                "cipher encrypt key, {role:?}, {password:?}"
            );
            assert_eq!(
                lines[4], k.cipher_decrypt,
                "cipher decrypt key, {role:?}, {password:?}"
            );
        }
    }
}

/// A network namespace of this test; removed, with the processes started in it, on drop.
struct Netns {
    name: String,
    children: Vec<Child>,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("skiff-u2r-{}-{tag}", std::process::id());
        // A leftover of an earlier run with the same PID: remove it first.
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(Stdio::null())
            .status();
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap();
        assert!(ok.success(), "ip netns add {name}");
        let ns = Netns {
            name,
            children: Vec::new(),
        };
        let ok = Command::new("ip")
            .args(["-n", &ns.name, "link", "set", "lo", "up"])
            .status()
            .unwrap();
        assert!(ok.success(), "lo up in {}", ns.name);
        ns
    }

    /// Runs `f` on a thread that has entered the namespace: sockets it creates live there.
    fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let ns = File::open(&path).expect("open netns");
            // SAFETY: setns on a valid fd; it only changes this thread's network namespace.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("netns thread")
    }

    fn spawn(&mut self, bin: &Path, args: &[String], log: &Path) {
        let out = File::create(log).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn udp2raw");
        self.children.push(child);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for child in &mut self.children {
            // The PID is `ip netns exec`, which became udp2raw by exec.
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// An AF_PACKET socket (cooked: packets without the link header) of everything, IPv4 and
/// IPv6; what is not IP fails to parse and is counted as not udp2raw's.
fn open_capture() -> OwnedFd {
    // SAFETY: plain socket calls on a fresh descriptor that OwnedFd then owns.
    unsafe {
        let fd = libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM,
            (libc::ETH_P_ALL as u16).to_be() as i32,
        );
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        let fd = OwnedFd::from_raw_fd(fd);
        let size: libc::c_int = 8 << 20;
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        );
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 200_000,
        };
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        );
        fd
    }
}

/// Reads captured packets until none comes for 200 ms (at most 20 000 or 10 s). On `lo`
/// each packet shows twice (outgoing and incoming): only the incoming copy is kept.
fn drain_capture(fd: &OwnedFd) -> Vec<Vec<u8>> {
    let mut packets = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 65536];
    while packets.len() < 20_000 && Instant::now() < deadline {
        // SAFETY: recvfrom into a buffer and sockaddr of the sizes given.
        let (n, pkttype) = unsafe {
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            let n = libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut addr as *mut libc::sockaddr_ll).cast(),
                &mut len,
            );
            (n, addr.sll_pkttype)
        };
        if n < 0 {
            break; // timeout: quiet for 200 ms
        }
        if pkttype == libc::PACKET_OUTGOING {
            continue;
        }
        packets.push(buf[..n as usize].to_vec());
    }
    packets
}

/// A datagram of test `i`: marker, sequence number, a body of `len` bytes, CRC-32 of it all.
fn datagram(tag: &[u8], i: u32, len: usize) -> Vec<u8> {
    let mut d = tag.to_vec();
    d.extend_from_slice(&i.to_be_bytes());
    d.extend((0..len).map(|k| (k as u32 * 31 + i * 7) as u8));
    let crc = crc32(&d);
    d.extend_from_slice(&crc.to_be_bytes());
    d
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn check_datagram(d: &[u8], tag: &[u8]) -> Option<u32> {
    if d.len() < tag.len() + 8 || !d.starts_with(tag) {
        return None;
    }
    let (body, crc) = d.split_at(d.len() - 4);
    (crc32(body).to_be_bytes() == crc)
        .then(|| u32::from_be_bytes(body[tag.len()..tag.len() + 4].try_into().unwrap()))
}

const SIZES: [usize; 8] = [0, 3, 15, 16, 17, 200, 777, 1200];

struct Case {
    raw: RawMode,
    cipher: CipherMode,
    auth: AuthMode,
    /// The tunnel over IPv6 (`[::1]`); the UDP ends stay on 127.0.0.1.
    v6: bool,
    /// Both ends with `--fix-gro`.
    gro: bool,
}

impl Case {
    fn label(&self) -> String {
        format!(
            "{}-{}-{}{}{}",
            self.raw.name(),
            self.cipher.name(),
            self.auth.name(),
            if self.v6 { "-v6" } else { "" },
            if self.gro { "-gro" } else { "" }
        )
    }

    /// Where the tunnel's raw packets go: udp2raw's server address.
    fn tunnel_host(&self) -> &'static str {
        if self.v6 { "[::1]" } else { LOOPBACK }
    }
}

fn udp_recv(sock: &UdpSocket, deadline: Instant) -> Option<(Vec<u8>, SocketAddr)> {
    let mut buf = vec![0u8; 4096];
    while Instant::now() < deadline {
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            return Some((buf[..n].to_vec(), from));
        }
    }
    None
}

/// What the capture of one case held, decoded.
#[derive(Default)]
struct Decoded {
    c2s_data: Vec<Vec<u8>>,
    s2c_data: Vec<Vec<u8>>,
    handshakes_c2s: Vec<Handshake>,
    handshakes_s2c: Vec<Handshake>,
    heartbeats: [usize; 2],
    syn: bool,
    syn_ack: bool,
    other: usize,
}

fn run_case(
    bin: &Path,
    case: &Case,
    use_iptables: bool,
    keys: &(Keys, Keys),
) -> Result<String, String> {
    let label = case.label();
    let mut ns = Netns::new(&label);
    // The kernel answers echo requests itself unless told not to (udp2raw's -a rule does it
    // too, but only once added, which can be after the client's first request).
    ns.run_in(|| {
        let _ = std::fs::write("/proc/sys/net/ipv4/icmp_echo_ignore_all", "1");
        let _ = std::fs::write("/proc/sys/net/ipv6/icmp/echo_ignore_all", "1");
    });
    let capture = ns.run_in(open_capture);
    let (app, target) = ns.run_in(|| {
        let app = UdpSocket::bind((LOOPBACK, 0)).unwrap();
        let target = UdpSocket::bind((LOOPBACK, TARGET_PORT)).unwrap();
        (app, target)
    });
    app.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    target
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();

    let dir = tempdir(&label);
    let common = |role: &str, l: String, r: String| {
        let mut a: Vec<String> = vec![role.into(), format!("-l{l}"), format!("-r{r}")];
        for s in [
            "-k",
            PASSWORD,
            "--raw-mode",
            case.raw.name(),
            "--cipher-mode",
            case.cipher.name(),
        ] {
            a.push(s.into());
        }
        for s in [
            "--auth-mode",
            case.auth.name(),
            "--log-level",
            "4",
            "--disable-color",
        ] {
            a.push(s.into());
        }
        if use_iptables {
            a.push("-a".into());
        }
        if case.gro {
            a.push("--fix-gro".into());
        }
        a
    };
    let server_args = common(
        "-s",
        format!("{}:{SERVER_PORT}", case.tunnel_host()),
        format!("{LOOPBACK}:{TARGET_PORT}"),
    );
    let client_args = common(
        "-c",
        format!("{LOOPBACK}:{CLIENT_PORT}"),
        format!("{}:{SERVER_PORT}", case.tunnel_host()),
    );
    ns.spawn(bin, &server_args, &dir.join("server.log"));
    ns.spawn(bin, &client_args, &dir.join("client.log"));
    let logs = || {
        let mut s = String::new();
        for f in ["server.log", "client.log"] {
            let mut t = String::new();
            let _ = File::open(dir.join(f)).and_then(|mut h| h.read_to_string(&mut t));
            let tail: Vec<&str> = t.lines().rev().take(15).collect();
            s += &format!(
                "--- {f} (last lines)\n{}\n",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        s
    };
    let client_addr: SocketAddr = format!("{LOOPBACK}:{CLIENT_PORT}").parse().unwrap();

    // Wait for the tunnel: probes until one comes out (at most 15 s).
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut up = false;
    let mut probe = 0u32;
    while Instant::now() < deadline && !up {
        probe += 1;
        let _ = app.send_to(&datagram(b"probe", probe, 8), client_addr);
        if let Some((d, _)) = udp_recv(&target, Instant::now() + Duration::from_millis(150)) {
            up = check_datagram(&d, b"probe").is_some();
        }
    }
    if !up {
        return Err(format!("{label}: tunnel never came up\n{}", logs()));
    }

    // The known datagrams, each echoed back by the target.
    let mut sent = Vec::new();
    let mut echoed = Vec::new();
    for (i, &len) in SIZES.iter().enumerate() {
        let d = datagram(b"skiff-u2r", i as u32, len);
        app.send_to(&d, client_addr).unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut got = None;
        while let Some((r, from)) = udp_recv(&target, deadline) {
            if check_datagram(&r, b"skiff-u2r") == Some(i as u32) {
                got = Some((r, from));
                break;
            }
        }
        let Some((r, from)) = got else {
            return Err(format!(
                "{label}: datagram {i} ({len} bytes) never arrived\n{}",
                logs()
            ));
        };
        assert_eq!(r, d, "{label}: datagram {i} altered");
        let e = datagram(b"echo-u2r", i as u32, len);
        target.send_to(&e, from).unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut back = false;
        while let Some((r, _)) = udp_recv(&app, deadline) {
            if r == e {
                back = true;
                break;
            }
        }
        if !back {
            return Err(format!("{label}: echo {i} never came back\n{}", logs()));
        }
        sent.push(d);
        echoed.push(e);
    }
    // Let a heartbeat or two pass (udp2raw sends one every 600 ms each way).
    std::thread::sleep(Duration::from_millis(1300));
    let packets = drain_capture(&capture);
    drop(ns);

    let dec = decode_all(case, keys, &packets).map_err(|e| format!("{label}: {e}"))?;
    for (i, d) in sent.iter().enumerate() {
        if !dec.c2s_data.contains(d) {
            return Err(format!(
                "{label}: datagram {i} not found in the decoded client→server capture"
            ));
        }
    }
    for (i, e) in echoed.iter().enumerate() {
        if !dec.s2c_data.contains(e) {
            return Err(format!(
                "{label}: echo {i} not found in the decoded server→client capture"
            ));
        }
    }
    if dec.handshakes_c2s.is_empty() || dec.handshakes_s2c.is_empty() {
        return Err(format!("{label}: no handshake decoded in both directions"));
    }
    let first = dec.handshakes_c2s[0];
    if first.receiver_id != 0 || first.sender_id == 0 {
        return Err(format!(
            "{label}: the client's first handshake is {first:?}"
        ));
    }
    if dec.handshakes_s2c[0].receiver_id != first.sender_id {
        return Err(format!(
            "{label}: the server's handshake does not name the client"
        ));
    }
    if dec.heartbeats[0] == 0 || dec.heartbeats[1] == 0 {
        return Err(format!("{label}: heartbeats decoded: {:?}", dec.heartbeats));
    }
    if case.raw == RawMode::FakeTcp && !(dec.syn && dec.syn_ack) {
        return Err(format!("{label}: no SYN / SYN-ACK captured"));
    }
    Ok(format!(
        "{label}: {} packets, {} data c2s, {} data s2c, {}+{} heartbeats, {} not udp2raw's",
        packets.len(),
        dec.c2s_data.len(),
        dec.s2c_data.len(),
        dec.heartbeats[0],
        dec.heartbeats[1],
        dec.other
    ))
}

/// Decodes every captured packet of a case, checking headers and ciphertexts byte for byte.
fn decode_all(
    case: &Case,
    (server_keys, client_keys): &(Keys, Keys),
    packets: &[Vec<u8>],
) -> Result<Decoded, String> {
    let server = Codec::from_keys(server_keys, Role::Server, case.cipher, case.auth);
    let client = Codec::from_keys(client_keys, Role::Client, case.cipher, case.auth);
    let mut windows = [
        ReplayWindow::new(case.auth.anti_replay()),
        ReplayWindow::new(case.auth.anti_replay()),
    ];
    let mut dec = Decoded::default();
    let mut requests = HashSet::new();
    for pkt in packets {
        let Ok((ip, t)) = headers::parse_packet(case.raw, pkt) else {
            dec.other += 1; // the kernel's own packets (RSTs, port unreachables)
            continue;
        };
        let c2s = match &t {
            Transport::Icmp(i) => i.request,
            _ => t.ports().1 == SERVER_PORT,
        };
        if !c2s && t.ports().0 != SERVER_PORT && case.raw != RawMode::Icmp {
            dec.other += 1;
            continue;
        }
        if let Transport::Icmp(i) = &t {
            // A kernel's echo reply carries the request's payload back: not udp2raw's.
            if i.request {
                requests.insert(i.payload.to_vec());
            } else if requests.contains(i.payload) {
                dec.other += 1;
                continue;
            }
        }
        if let Transport::Tcp(seg) = &t {
            if seg.header.rst {
                dec.other += 1;
                continue;
            }
            if !seg.checksum_ok {
                // The kernel's own segments (without -a) leave lo with a partial checksum
                // (offload). udp2raw computes its checksums itself: the rebuild below checks
                // them byte for byte, and every datagram must still be found.
                dec.other += 1;
                continue;
            }
            dec.syn |= seg.header.syn && !seg.header.ack;
            dec.syn_ack |= seg.header.syn && seg.header.ack;
        }
        // Our builders must give the same bytes.
        let mut rebuilt = Vec::new();
        match &t {
            Transport::Tcp(s) => {
                headers::build_tcp(ip.src, ip.dst, &s.header, s.payload, &mut rebuilt)
            }
            Transport::Udp(u) => headers::build_udp(
                ip.src,
                ip.dst,
                u.src_port,
                u.dst_port,
                u.payload,
                &mut rebuilt,
            ),
            Transport::Icmp(i) => headers::build_icmp(ip.src, ip.dst, i, &mut rebuilt),
        }
        .map_err(|e| e.to_string())?;
        let mut whole = Vec::new();
        headers::build_ip(&ip, &rebuilt, &mut whole).map_err(|e| e.to_string())?;
        if whole != *pkt {
            return Err(format!(
                "rebuilt packet differs:\n ours   {whole:02x?}\n theirs {pkt:02x?}"
            ));
        }
        let wire = t.payload();
        if wire.is_empty() {
            continue;
        }
        let (receiver, sender) = if c2s {
            (&server, &client)
        } else {
            (&client, &server)
        };
        // With --fix-gro, safer packets come framed; bare ones never are.
        let mut cts: Vec<Vec<u8>> = vec![wire.to_vec()];
        let bare = receiver
            .decrypt(wire)
            .ok()
            // udp2raw's bare packets are exactly 17 + 12 bytes of plaintext; none of the
            // framed packets here is (which matters under `none`/`none`, where anything
            // "decrypts").
            .is_some_and(|p| p.len() == 29 && matches!(Packet::parse(&p), Ok(Packet::Bare { .. })));
        if case.gro && !bare {
            let mut buf = wire.to_vec();
            let ranges = gro::split_frames(receiver, &mut buf);
            cts = ranges.into_iter().map(|r| buf[r].to_vec()).collect();
            // Our framing of the same ciphertexts must give udp2raw's bytes.
            let mut again = Vec::new();
            for ct in &cts {
                gro::push_frame(sender, ct, &mut again).map_err(|e| e.to_string())?;
            }
            if again != wire {
                return Err(format!(
                    "--fix-gro framing differs for a {}-byte payload",
                    wire.len()
                ));
            }
        }
        for ct in &cts {
            let wire = &ct[..];
            let plain = receiver.decrypt(wire).map_err(|e| {
                format!(
                    "{} bytes {}: {e}",
                    wire.len(),
                    if c2s { "c2s" } else { "s2c" }
                )
            })?;
            let packet = Packet::parse(&plain).map_err(|e| e.to_string())?;
            match packet {
                Packet::Bare { payload, .. } => {
                    let hs = Handshake::parse(payload).map_err(|e| e.to_string())?;
                    if c2s {
                        &mut dec.handshakes_c2s
                    } else {
                        &mut dec.handshakes_s2c
                    }
                    .push(hs);
                    if payload.len() != Handshake::LEN {
                        return Err(format!("handshake payload of {} bytes", payload.len()));
                    }
                }
                Packet::Safer { seq, kind, .. } => {
                    // Deterministic: re-encrypting the plaintext with the sender's keys must give
                    // the captured bytes (CBC: but for the last block, see the module docs).
                    let again = sender.encrypt(&plain).map_err(|e| e.to_string())?;
                    let same = if case.cipher == CipherMode::Aes128Cbc {
                        let tag = if case.auth == AuthMode::HmacSha1 {
                            20
                        } else {
                            0
                        };
                        let n = wire.len().saturating_sub(tag + 16);
                        again.len() == wire.len() && again[..n] == wire[..n]
                    } else {
                        again == wire
                    };
                    if !same {
                        return Err(format!(
                            "re-encryption differs for a {}-byte safer packet",
                            wire.len()
                        ));
                    }
                    windows[usize::from(!c2s)]
                        .check(seq)
                        .map_err(|e| e.to_string())?;
                    match kind {
                        SaferKind::Heartbeat(filler) => {
                            if filler.len() != DEFAULT_HB_LEN || filler.iter().any(|&b| b != 0) {
                                return Err(format!("heartbeat filler of {} bytes", filler.len()));
                            }
                            dec.heartbeats[usize::from(!c2s)] += 1;
                        }
                        SaferKind::Data { payload, .. } => {
                            if c2s {
                                &mut dec.c2s_data
                            } else {
                                &mut dec.s2c_data
                            }
                            .push(payload.to_vec());
                        }
                    }
                }
            }
        }
    }
    Ok(dec)
}

#[test]
fn real_tunnel_matrix() {
    let Some(bin) = binary() else {
        return skip("no udp2raw binary (UDP2RAW_BIN or ../shared/peers/bin/udp2raw)");
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("not root (udp2raw needs raw sockets; the test makes network namespaces)");
    }
    if !have("ip", "-V") {
        return skip("no `ip` (iproute2) to make network namespaces");
    }
    let use_iptables = have("iptables", "-V");
    if !use_iptables {
        eprintln!(
            "real udp2raw test: no iptables, running udp2raw without -a (the kernel's RSTs are ignored)"
        );
    }
    let filter = std::env::var("UDP2RAW_CASES").unwrap_or_default();
    let mut cases = VecDeque::new();
    for raw in RawMode::ALL {
        for cipher in CipherMode::ALL {
            for auth in AuthMode::ALL {
                let case = Case {
                    raw,
                    cipher,
                    auth,
                    v6: false,
                    gro: false,
                };
                if filter.is_empty() || case.label().contains(&filter) {
                    cases.push_back(case);
                }
            }
        }
        // Over IPv6, each cipher mode once (each auth mode once among them).
        for (cipher, auth) in CipherMode::ALL
            .into_iter()
            .zip(AuthMode::ALL.into_iter().rev())
        {
            let case = Case {
                raw,
                cipher,
                auth,
                v6: true,
                gro: false,
            };
            if filter.is_empty() || case.label().contains(&filter) {
                cases.push_back(case);
            }
        }
        // With --fix-gro, each cipher mode once (the prefix is hidden differently per mode).
        for (cipher, auth) in CipherMode::ALL.into_iter().zip(AuthMode::ALL) {
            let case = Case {
                raw,
                cipher,
                auth,
                v6: false,
                gro: true,
            };
            if filter.is_empty() || case.label().contains(&filter) {
                cases.push_back(case);
            }
        }
    }
    let total = cases.len();
    let keys = Arc::new((
        Keys::derive(PASSWORD.as_bytes(), Role::Server),
        Keys::derive(PASSWORD.as_bytes(), Role::Client),
    ));
    let queue = Arc::new(Mutex::new(cases));
    let results = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, results, keys, bin) =
                (queue.clone(), results.clone(), keys.clone(), bin.clone());
            std::thread::spawn(move || {
                loop {
                    let Some(case) = queue.lock().unwrap().pop_front() else {
                        break;
                    };
                    let r = run_case(&bin, &case, use_iptables, &keys);
                    results.lock().unwrap().push(r);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let results = Arc::try_unwrap(results).unwrap().into_inner().unwrap();
    let mut failures = Vec::new();
    let mut seen = HashSet::new();
    for r in &results {
        match r {
            Ok(line) => {
                seen.insert(line.split(':').next().unwrap().to_string());
                eprintln!("ok   {line}");
            }
            Err(e) => {
                eprintln!("FAIL {e}");
                failures.push(e.clone());
            }
        }
    }
    assert_eq!(results.len(), total);
    assert!(
        failures.is_empty(),
        "{} of {total} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "real udp2raw: {total} raw×cipher×auth cases verified ({} distinct)",
        seen.len()
    );
}

// ---------------------------------------------------------------------------------------
// The other way round: our encoder and header builders talking to a real `udp2raw -s`.

const OUR_PORT: u16 = 5555;

/// A raw IPv4 socket whose packets carry our own IP header.
fn open_raw_sender() -> OwnedFd {
    // SAFETY: a fresh socket descriptor that OwnedFd then owns.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW);
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        OwnedFd::from_raw_fd(fd)
    }
}

fn raw_send(fd: &OwnedFd, packet: &[u8]) {
    // SAFETY: sendto with a valid buffer and a sockaddr_in of the size given.
    unsafe {
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let n = libc::sendto(
            fd.as_raw_fd(),
            packet.as_ptr().cast(),
            packet.len(),
            0,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        assert_eq!(
            n,
            packet.len() as isize,
            "raw send: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// One captured packet (incoming copies only), or None after 200 ms of quiet.
fn capture_one(fd: &OwnedFd) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 65536];
    for _ in 0..1000 {
        // SAFETY: as in drain_capture.
        let (n, pkttype) = unsafe {
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            let n = libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut addr as *mut libc::sockaddr_ll).cast(),
                &mut len,
            );
            (n, addr.sll_pkttype)
        };
        if n < 0 {
            return None;
        }
        if pkttype != libc::PACKET_OUTGOING {
            return Some(buf[..n as usize].to_vec());
        }
    }
    None
}

/// Our side of the tunnel: a udp2raw client made of this crate's pieces.
struct OurClient {
    raw: RawMode,
    codec: Codec,
    sender: OwnedFd,
    capture: OwnedFd,
    ip_id: u16,
    tcp_seq: u32,
    tcp_ack: u32,
    ts_ecr: u32,
    icmp_seq: u16,
}

/// What came back from the server.
struct FromServer {
    tcp: Option<headers::TcpHeader>,
    plain: Option<Vec<u8>>,
}

impl OurClient {
    fn send(&mut self, payload: &[u8], syn: bool) {
        let (src, dst) = (IpAddr::from([127, 0, 0, 1]), IpAddr::from([127, 0, 0, 1]));
        let mut t = Vec::new();
        let protocol = match self.raw {
            RawMode::FakeTcp => {
                let h = headers::TcpHeader {
                    src_port: OUR_PORT,
                    dst_port: SERVER_PORT,
                    seq: self.tcp_seq,
                    ack_seq: self.tcp_ack,
                    syn,
                    ack: !syn,
                    psh: false,
                    rst: false,
                    window: headers::WINDOW_BASE,
                    timestamps: Some((self.ip_id.into(), self.ts_ecr)),
                };
                headers::build_tcp(src, dst, &h, payload, &mut t).unwrap();
                self.tcp_seq = self.tcp_seq.wrapping_add(payload.len() as u32);
                headers::IPPROTO_TCP
            }
            RawMode::Udp => {
                headers::build_udp(src, dst, OUR_PORT, SERVER_PORT, payload, &mut t).unwrap();
                headers::IPPROTO_UDP
            }
            RawMode::Icmp => {
                let m = headers::IcmpEcho {
                    request: true,
                    id: OUR_PORT,
                    seq: self.icmp_seq,
                    payload,
                };
                headers::build_icmp(src, dst, &m, &mut t).unwrap();
                self.icmp_seq = self.icmp_seq.wrapping_add(1);
                headers::IPPROTO_ICMP
            }
        };
        let ip = headers::IpHeader {
            src,
            dst,
            protocol,
            ttl: headers::DEFAULT_TTL,
            id: self.ip_id,
        };
        self.ip_id = self.ip_id.wrapping_add(1);
        let mut pkt = Vec::new();
        headers::build_ip(&ip, &t, &mut pkt).unwrap();
        raw_send(&self.sender, &pkt);
    }

    fn send_packet(&mut self, p: &Packet<'_>) -> Vec<u8> {
        let wire = self.codec.encrypt(&p.to_vec()).unwrap();
        self.send(&wire, false);
        wire
    }

    /// The next packet from the server to us (decrypted when it carries a payload that
    /// decrypts), or None after a quiet spell.
    fn recv(&mut self) -> Option<FromServer> {
        loop {
            let pkt = capture_one(&self.capture)?;
            let Ok((_, t)) = headers::parse_packet(self.raw, &pkt) else {
                continue;
            };
            let ours = match &t {
                Transport::Icmp(i) => !i.request && i.id == OUR_PORT,
                _ => t.ports() == (SERVER_PORT, OUR_PORT),
            };
            if !ours {
                continue;
            }
            let mut tcp = None;
            if let Transport::Tcp(s) = &t {
                if s.header.rst {
                    continue;
                }
                tcp = Some(s.header);
                if let Some((ts, _)) = s.header.timestamps {
                    self.ts_ecr = ts;
                }
                self.tcp_ack = s
                    .header
                    .seq
                    .wrapping_add(s.payload.len() as u32 + u32::from(s.header.syn));
            }
            let plain = (!t.payload().is_empty())
                .then(|| self.codec.decrypt(t.payload()).ok())
                .flatten();
            return Some(FromServer { tcp, plain });
        }
    }

    /// Waits for a server packet `want` accepts, looking at `tries` server packets at most
    /// and for `within` at most. A quiet capture read (200 ms) is not the end: on a loaded
    /// machine udp2raw can take longer than that to answer.
    fn wait_for<T>(
        &mut self,
        tries: usize,
        within: Duration,
        mut want: impl FnMut(&FromServer) -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + within;
        let mut seen = 0;
        while seen < tries && Instant::now() < deadline {
            let Some(got) = self.recv() else {
                continue;
            };
            seen += 1;
            if let Some(v) = want(&got) {
                return Some(v);
            }
        }
        None
    }
}

fn run_our_client(
    bin: &Path,
    case: &Case,
    use_iptables: bool,
    keys: &(Keys, Keys),
) -> Result<String, String> {
    let label = format!("ours→{}", case.label());
    let mut ns = Netns::new(&format!("o-{}", case.label()));
    ns.run_in(|| std::fs::write("/proc/sys/net/ipv4/icmp_echo_ignore_all", "1").ok());
    let capture = ns.run_in(open_capture);
    let sender = ns.run_in(open_raw_sender);
    let target = ns.run_in(|| UdpSocket::bind((LOOPBACK, TARGET_PORT)).unwrap());
    target
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let dir = tempdir(&format!("o-{}", case.label()));
    let mut args: Vec<String> = vec![
        "-s".into(),
        format!("-l{LOOPBACK}:{SERVER_PORT}"),
        format!("-r{LOOPBACK}:{TARGET_PORT}"),
    ];
    for s in [
        "-k",
        PASSWORD,
        "--raw-mode",
        case.raw.name(),
        "--cipher-mode",
        case.cipher.name(),
    ] {
        args.push(s.into());
    }
    for s in [
        "--auth-mode",
        case.auth.name(),
        "--log-level",
        "4",
        "--disable-color",
    ] {
        args.push(s.into());
    }
    if use_iptables {
        args.push("-a".into());
    }
    ns.spawn(bin, &args, &dir.join("server.log"));
    let log = || std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    let mut me = OurClient {
        raw: case.raw,
        codec: Codec::from_keys(&keys.1, Role::Client, case.cipher, case.auth),
        sender,
        capture,
        ip_id: 100,
        tcp_seq: 0x1000_0000,
        tcp_ack: 0,
        ts_ecr: 0,
        icmp_seq: 1,
    };
    let (my_id, const_id) = (0x5eed_0000 | std::process::id() & 0xffff, 0xc0ff_ee01u32);

    // The fake TCP handshake: our SYN must get a SYN-ACK for seq + 1.
    if case.raw == RawMode::FakeTcp {
        let mut synack = false;
        for _ in 0..40 {
            me.tcp_seq = 0x1000_0000;
            me.send(&[], true);
            let isn = 0x1000_0000u32;
            if me
                .wait_for(5, Duration::from_millis(500), |f| {
                    f.tcp
                        .filter(|h| h.syn && h.ack && h.ack_seq == isn.wrapping_add(1))
                })
                .is_some()
            {
                synack = true;
                break;
            }
        }
        if !synack {
            return Err(format!("{label}: no SYN-ACK to our SYN\n{}", log()));
        }
        me.tcp_seq = 0x1000_0001;
    }

    // Handshake 1: (my_id, 0, const_id); the server answers with its id and ours.
    let mut server_id = None;
    for attempt in 0..40u8 {
        let hs = Handshake {
            sender_id: my_id,
            receiver_id: 0,
            const_id,
        }
        .to_bytes();
        me.send_packet(&Packet::Bare {
            nonce: [attempt; 16],
            payload: &hs,
        });
        server_id = me.wait_for(10, Duration::from_millis(500), |f| {
            let p = Packet::parse(f.plain.as_deref()?).ok()?.handshake()?;
            (p.receiver_id == my_id).then_some(p.sender_id)
        });
        if server_id.is_some() {
            break;
        }
    }
    let Some(server_id) = server_id else {
        return Err(format!("{label}: no handshake answer\n{}", log()));
    };
    // Handshake 2: (my_id, server_id, const_id); the server turns ready and sends a heartbeat.
    let mut ready = false;
    for attempt in 0..40u8 {
        let hs = Handshake {
            sender_id: my_id,
            receiver_id: server_id,
            const_id,
        }
        .to_bytes();
        me.send_packet(&Packet::Bare {
            nonce: [attempt ^ 0x55; 16],
            payload: &hs,
        });
        ready = me
            .wait_for(10, Duration::from_millis(500), |f| {
                match Packet::parse(f.plain.as_deref()?).ok()? {
                    Packet::Safer {
                        sender_id,
                        receiver_id,
                        kind: SaferKind::Heartbeat(_),
                        ..
                    } => (sender_id == server_id && receiver_id == my_id).then_some(()),
                    _ => None,
                }
            })
            .is_some();
        if ready {
            break;
        }
    }
    if !ready {
        return Err(format!(
            "{label}: no heartbeat after handshake 2\n{}",
            log()
        ));
    }

    // Data both ways, on our anti-replay sequence numbers.
    let conv = 0x0c0f_0001;
    let mut seq = 1_000_000u64;
    let mut last_wire = Vec::new();
    for (i, &len) in SIZES.iter().enumerate() {
        let d = datagram(b"ours-u2r", i as u32, len);
        seq += 1;
        last_wire = me.send_packet(&Packet::Safer {
            sender_id: my_id,
            receiver_id: server_id,
            seq,
            roller: 0,
            kind: SaferKind::Data { conv, payload: &d },
        });
        let deadline = Instant::now() + Duration::from_secs(3);
        let Some((r, from)) = udp_recv(&target, deadline) else {
            return Err(format!(
                "{label}: our datagram {i} ({len} bytes) never reached the target\n{}",
                log()
            ));
        };
        if r != d {
            return Err(format!("{label}: our datagram {i} arrived altered"));
        }
        let e = datagram(b"echo-ours", i as u32, len);
        target.send_to(&e, from).unwrap();
        let back = me.wait_for(50, Duration::from_secs(3), |f| {
            match Packet::parse(f.plain.as_deref()?).ok()? {
                Packet::Safer {
                    kind: SaferKind::Data { conv: c, payload },
                    ..
                } => (c == conv && payload == e).then_some(()),
                _ => None,
            }
        });
        if back.is_none() {
            return Err(format!(
                "{label}: echo {i} never came back to us\n{}",
                log()
            ));
        }
    }

    // Replay the last packet as is, then send a fresh one: the server must drop the replay
    // (deliver it too when anti-replay is off, under auth none), and deliver the fresh one.
    me.send(&last_wire, false);
    seq += 1;
    let fresh = datagram(b"fresh-u2r", 99, 10);
    me.send_packet(&Packet::Safer {
        sender_id: my_id,
        receiver_id: server_id,
        seq,
        roller: 0,
        kind: SaferKind::Data {
            conv,
            payload: &fresh,
        },
    });
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut replayed = false;
    loop {
        let Some((r, _)) = udp_recv(&target, deadline) else {
            return Err(format!(
                "{label}: the fresh datagram after the replay never arrived\n{}",
                log()
            ));
        };
        if r == fresh {
            break;
        }
        replayed |= check_datagram(&r, b"ours-u2r").is_some();
    }
    if replayed == case.auth.anti_replay() {
        return Err(format!(
            "{label}: replayed packet {} (anti-replay {})",
            if replayed { "delivered" } else { "dropped" },
            if case.auth.anti_replay() { "on" } else { "off" }
        ));
    }
    drop(ns);
    Ok(format!(
        "{label}: handshake, {} datagrams both ways, replay {}",
        SIZES.len(),
        if replayed { "delivered" } else { "dropped" }
    ))
}

#[test]
fn our_client_against_real_server() {
    let Some(bin) = binary() else {
        return skip("no udp2raw binary (UDP2RAW_BIN or ../shared/peers/bin/udp2raw)");
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("not root (raw sockets and network namespaces)");
    }
    if !have("ip", "-V") {
        return skip("no `ip` (iproute2) to make network namespaces");
    }
    let use_iptables = have("iptables", "-V");
    let filter = std::env::var("UDP2RAW_CASES").unwrap_or_default();
    let mut cases = VecDeque::new();
    for raw in RawMode::ALL {
        for cipher in CipherMode::ALL {
            for auth in AuthMode::ALL {
                let case = Case {
                    raw,
                    cipher,
                    auth,
                    v6: false,
                    gro: false,
                };
                if filter.is_empty() || case.label().contains(&filter) {
                    cases.push_back(case);
                }
            }
        }
    }
    let total = cases.len();
    let keys = Arc::new((
        Keys::derive(PASSWORD.as_bytes(), Role::Server),
        Keys::derive(PASSWORD.as_bytes(), Role::Client),
    ));
    let queue = Arc::new(Mutex::new(cases));
    let results = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, results, keys, bin) =
                (queue.clone(), results.clone(), keys.clone(), bin.clone());
            std::thread::spawn(move || {
                loop {
                    let Some(case) = queue.lock().unwrap().pop_front() else {
                        break;
                    };
                    let r = run_our_client(&bin, &case, use_iptables, &keys);
                    results.lock().unwrap().push(r);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let results = Arc::try_unwrap(results).unwrap().into_inner().unwrap();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    for r in &results {
        match r {
            Ok(line) => eprintln!("ok   {line}"),
            Err(e) => eprintln!("FAIL {e}"),
        }
    }
    assert_eq!(results.len(), total);
    assert!(
        failures.is_empty(),
        "{} of {total} cases failed",
        failures.len()
    );
    eprintln!("real udp2raw server: {total} cases accepted our client");
}
