//! Shadowsocks Skiff ↔ Skiff through the binary: every method TCP (64 MiB each way, SHA-256)
//! and UDP (200 datagrams echoed), xchacha20-ietf-poly1305 included, a multi-user 2022 server
//! with identity headers; and a server facing replays and probes: a captured request sent
//! again is refused (its destination never hears of it), garbage gets neither a byte nor a
//! close while the prober keeps talking; SOCKS5 UDP ASSOCIATE through a Shadowsocks outbound
//! reaching two destinations over one association. (Stale 2022 timestamps are refused in
//! skiff-proto's tests/shadowsocks_io.rs, which can forge them.)

mod ss_common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use ss_common::{
    DATAGRAMS, Dir, Echo, MIB, Peer, Setup, datagram, find, free_port, psk, run_tcp, run_udp,
    start_client, start_server, wait_bound,
};

const BULK: u64 = 64 * MIB;

fn password(method: &str) -> String {
    match method {
        "2022-blake3-aes-128-gcm" => psk(16, 3),
        m if m.starts_with("2022") => psk(32, 3),
        _ => "skiff-to-skiff".into(),
    }
}

fn both(method: &str) {
    let setup = Setup::simple(Peer::Skiff, Peer::Skiff, method, &password(method));
    run_tcp(&setup, BULK);
    run_udp(&setup);
}

#[test]
fn aes_128_gcm() {
    both("aes-128-gcm");
}
#[test]
fn aes_256_gcm() {
    both("aes-256-gcm");
}
#[test]
fn chacha20_ietf_poly1305() {
    both("chacha20-ietf-poly1305");
}
#[test]
fn xchacha20_ietf_poly1305() {
    both("xchacha20-ietf-poly1305");
}
#[test]
fn blake3_aes_128_gcm() {
    both("2022-blake3-aes-128-gcm");
}
#[test]
fn blake3_aes_256_gcm() {
    both("2022-blake3-aes-256-gcm");
}
#[test]
fn blake3_chacha20_poly1305() {
    both("2022-blake3-chacha20-poly1305");
}
#[test]
fn multi_user_2022_with_identity_headers() {
    for method in ["2022-blake3-aes-128-gcm", "2022-blake3-aes-256-gcm"] {
        let len = if method.contains("128") { 16 } else { 32 };
        let setup = Setup {
            user_key: Some(psk(len, 42)),
            ..Setup::simple(Peer::Skiff, Peer::Skiff, method, &psk(len, 41))
        };
        run_tcp(&setup, 4 * MIB);
        run_udp(&setup);
    }
}

/// What a Skiff client sends first for `payload`: captured by a listener posing as C.
fn capture_request(
    setup: &Setup<'_>,
    dir: &Dir,
    d: std::net::SocketAddr,
    payload: &[u8],
) -> Vec<u8> {
    let fake_c = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = fake_c.local_addr().unwrap().port();
    let b = free_port();
    let (skiff, _) = find(Peer::Skiff).unwrap();
    let _client = start_client(setup, &skiff, &dir.0, b, c, d, false);
    let mut a = TcpStream::connect(("127.0.0.1", b)).unwrap();
    a.write_all(payload).unwrap();
    let (mut s, _) = fake_c.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    assert!(request.len() > payload.len(), "nothing captured");
    request
}

/// Sends `bytes` to C; true when C answered nothing and did not close within 500 ms.
fn silent(c: u16, bytes: &[u8]) -> (TcpStream, bool) {
    let mut s = TcpStream::connect(("127.0.0.1", c)).unwrap();
    s.write_all(bytes).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut one = [0u8; 1];
    let quiet = matches!(s.read(&mut one), Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
    (s, quiet)
}

#[test]
fn a_replayed_request_is_refused_and_probes_are_drained() {
    for method in ["2022-blake3-aes-128-gcm", "aes-128-gcm"] {
        let setup = Setup::simple(Peer::Skiff, Peer::Skiff, method, &password(method));
        let dir = Dir::new(&format!("replay-{method}"));
        let d_listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let d = d_listener.local_addr().unwrap();
        let request = capture_request(&setup, &dir, d, b"first and only request");
        let c = free_port();
        let (skiff, _) = find(Peer::Skiff).unwrap();
        let server_dir = Dir::new(&format!("replay-server-{method}"));
        let mut server = start_server(&setup, &skiff, &server_dir.0, c);

        // First use: C opens it and connects to D with the payload.
        let (_first, _) = silent(c, &request);
        d_listener.set_nonblocking(false).unwrap();
        let (mut at_d, _) = d_listener.accept().unwrap();
        at_d.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = [0u8; 22];
        at_d.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"first and only request");

        // The same bytes again: refused, silently, and D hears nothing.
        let (_again, quiet) = silent(c, &request);
        assert!(quiet, "{method}: a replay got an answer or a close");
        d_listener.set_nonblocking(true).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(d_listener.accept().is_err(), "{method}: a replay reached D");

        // Garbage and a plain HTTP request: drained, no byte, no close.
        for probe in [&[0x16u8; 600][..], b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"] {
            let (mut s, quiet) = silent(c, probe);
            assert!(quiet, "{method}: a probe got an answer or a close");
            s.write_all(b"still talking").unwrap();
        }
        server.assert_alive();
    }
}

/// SOCKS5 UDP datagram header for an IPv4 address.
fn socks_header(to: std::net::SocketAddr) -> Vec<u8> {
    let std::net::SocketAddr::V4(v4) = to else {
        panic!("IPv4 only")
    };
    let mut out = vec![0, 0, 0, 1];
    out.extend_from_slice(&v4.ip().octets());
    out.extend_from_slice(&v4.port().to_be_bytes());
    out
}

/// One SOCKS5 UDP association on a Skiff client, its outbound Shadowsocks 2022 to a Skiff
/// server: datagrams alternate between two echo servers, and every reply must come back
/// from (and name) the one it was sent to.
#[test]
fn socks_udp_through_shadowsocks_reaches_many_destinations() {
    for method in ["2022-blake3-aes-256-gcm", "aes-128-gcm"] {
        let setup = Setup::simple(Peer::Skiff, Peer::Skiff, method, &password(method));
        let dir = Dir::new(&format!("socks-udp-{method}"));
        let (skiff, _) = find(Peer::Skiff).unwrap();
        let c = free_port();
        let _server = start_server(&setup, &skiff, &dir.0, c);
        let s = free_port();
        let config = format!(
            r#"{{ "inbounds": [{{ "listen": "127.0.0.1", "port": {s}, "protocol": "socks",
                               "settings": {{ "udp": true, "ip": "127.0.0.1" }} }}],
                 "outbounds": [{{ "protocol": "shadowsocks",
                                  "settings": {{ "servers": [{{ "address": "127.0.0.1", "port": {c},
                                                               "method": "{method}", "password": "{}" }}] }} }}] }}"#,
            password(method)
        );
        std::fs::write(dir.0.join("b.json"), config).unwrap();
        let log = dir.0.join("b.log");
        let child = std::process::Command::new(&skiff)
            .args(["run", "-c"])
            .arg(dir.0.join("b.json"))
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut client = ss_common::Proc {
            child,
            what: "skiff SOCKS client".into(),
            log,
        };
        wait_bound(&mut client, s, false);

        let mut control = TcpStream::connect(("127.0.0.1", s)).unwrap();
        control
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        control.write_all(&[5, 1, 0]).unwrap();
        let mut greeting = [0u8; 2];
        control.read_exact(&mut greeting).unwrap();
        control.write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0]).unwrap();
        let mut reply = [0u8; 10];
        control.read_exact(&mut reply).unwrap();
        assert_eq!(&reply[..4], &[5, 0, 0, 1], "UDP ASSOCIATE refused");
        let relay = std::net::SocketAddr::from((
            [reply[4], reply[5], reply[6], reply[7]],
            u16::from_be_bytes([reply[8], reply[9]]),
        ));
        let echoes = [Echo::start(), Echo::start()];
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let mut buf = vec![0u8; 65_536];
        let mut resends = 0;
        for i in 0..DATAGRAMS {
            let to = echoes[i % 2].addr;
            let header = socks_header(to);
            let want = datagram(i);
            let packet = [&header[..], &want[..]].concat();
            let mut echoed = false;
            'tries: for attempt in 0..3 {
                resends += usize::from(attempt > 0);
                socket.send_to(&packet, relay).unwrap();
                while let Ok((n, _)) = socket.recv_from(&mut buf) {
                    let (head, body) = buf[..n].split_at(10);
                    if body == want.as_slice() {
                        assert_eq!(
                            head,
                            header.as_slice(),
                            "{method}: reply names the wrong source"
                        );
                        echoed = true;
                        break 'tries;
                    }
                }
            }
            assert!(echoed, "{method}: datagram {i} never came back");
        }
        eprintln!("{method}: SOCKS5 UDP to two destinations, {DATAGRAMS} echoed, {resends} resent");
        client.assert_alive();
        drop(control);
    }
}
