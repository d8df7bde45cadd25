//! Interop with the real Debian `kcptun-client`: we play the server's KCP layer on a UDP socket
//! on 127.0.0.1, answer with our own datagrams (acks), and check the smux bytes that arrive —
//! for every crypt we implement. One data datagram of the first FEC group is withheld on
//! purpose, so the test also proves our Reed-Solomon decoding of the binary's parity shards.
//!
//! Skips when /usr/bin/kcptun-client is absent. Every wait is bounded; the only process ended
//! is the child this test spawned, by its handle.

use std::io::Write;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use skiff_kcp::{Crypt, KcpConfig, KcpSession, peek_conv};

const CLIENT: &str = "/usr/bin/kcptun-client";

/// Kills and reaps the spawned kcptun-client (this PID only) however the test ends.
struct ChildGuard(Child);
impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_tcp_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// Parses smux v1 frames; returns (frames seen, PSH data of stream 3 concatenated).
fn smux_psh_data(stream: &[u8]) -> (Vec<(u8, u32)>, Vec<u8>) {
    let mut frames = Vec::new();
    let mut data = Vec::new();
    let mut rest = stream;
    while rest.len() >= 8 {
        let (ver, cmd) = (rest[0], rest[1]);
        let len = u16::from_le_bytes([rest[2], rest[3]]) as usize;
        let sid = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        assert_eq!(ver, 1, "smux v1");
        if rest.len() < 8 + len {
            break;
        }
        frames.push((cmd, sid));
        if cmd == 2 && sid == 3 {
            data.extend_from_slice(&rest[8..8 + len]);
        }
        rest = &rest[8 + len..];
    }
    (frames, data)
}

fn run_against_client(crypt_name: &str, crypt: Crypt) {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let tcp_port = free_tcp_port();
    let child = Command::new(CLIENT)
        .args(["-r", &format!("127.0.0.1:{udp_port}")])
        .args(["-l", &format!("127.0.0.1:{tcp_port}")])
        .args([
            "--crypt", crypt_name, "--key", "test", "--nocomp", "--quiet",
        ])
        .args(["--datashard", "10", "--parityshard", "3", "--mode", "fast"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = ChildGuard(child);

    let start = Instant::now();
    let mut tcp = loop {
        match TcpStream::connect(("127.0.0.1", tcp_port)) {
            Ok(s) => break s,
            Err(e) => {
                assert!(
                    start.elapsed() < Duration::from_secs(5),
                    "kcptun-client not listening: {e}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    let sent = payload(40_000);
    tcp.write_all(&sent).unwrap();

    let mut cfg = KcpConfig::kcptun_default(false);
    cfg.crypt = crypt;
    cfg.key = "test".to_string();
    let mut session: Option<KcpSession> = None;
    let mut peer = None;
    let mut received = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::new();
    let mut datagrams = 0u32;
    let mut withheld = false;
    let t0 = Instant::now();
    let now_ms = || t0.elapsed().as_millis() as u32;
    while t0.elapsed() < Duration::from_secs(10) {
        match udp.recv_from(&mut buf) {
            Ok((n, from)) => {
                datagrams += 1;
                let d = &buf[..n];
                let s = match session.as_mut() {
                    Some(s) => s,
                    None => {
                        let conv = peek_conv(&cfg, d).expect("first datagram decodes to a conv");
                        peer = Some(from);
                        session.insert(KcpSession::new(conv, &cfg).unwrap())
                    }
                };
                // Withhold the 3rd datagram (a data shard of group 0): FEC must rebuild it.
                if datagrams == 3 && !withheld {
                    withheld = true;
                    continue;
                }
                s.handle_datagram(d, now_ms());
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("udp: {e}"),
        }
        if let (Some(s), Some(p)) = (session.as_mut(), peer) {
            s.update(now_ms());
            while s.poll_datagram(&mut out) {
                udp.send_to(&out, p).unwrap();
            }
            loop {
                let n = s.recv(&mut buf);
                if n == 0 {
                    break;
                }
                received.extend_from_slice(&buf[..n]);
            }
            let (_, data) = smux_psh_data(&received);
            if data.len() >= sent.len() {
                break;
            }
        }
    }
    let s = session.expect("kcptun-client sent nothing");
    let stats = s.stats();
    if crypt == Crypt::Sm4 {
        // kcptun's sm4 occasionally emits a datagram with one corrupted block (see the
        // kcptun_server test): those are dropped by the CRC, never used.
        assert!(
            stats.dropped * 20 <= stats.datagrams_in,
            "{crypt_name}: {stats:?}"
        );
    } else {
        assert_eq!(
            stats.dropped, 0,
            "{crypt_name}: every datagram must pass CRC and parse: {stats:?}"
        );
    }
    let (frames, data) = smux_psh_data(&received);
    assert_eq!(
        frames.first(),
        Some(&(0u8, 3u32)),
        "{crypt_name}: smux SYN for stream 3 first"
    );
    assert_eq!(&received[..8], &[1, 0, 0, 0, 3, 0, 0, 0]);
    assert_eq!(
        data.len(),
        sent.len(),
        "{crypt_name}: all bytes through KCP"
    );
    assert!(data == sent, "{crypt_name}: bytes intact");
    assert!(
        stats.fec_recovered > 0,
        "{crypt_name}: parity from kcptun rebuilt the withheld shard"
    );
}

#[test]
fn real_kcptun_client_is_understood_for_every_crypt() {
    if !std::path::Path::new(CLIENT).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs kcptun: {CLIENT} is missing"
        );
        eprintln!("skipping: {CLIENT} not installed");
        return;
    }
    for (name, crypt) in [
        ("none", Crypt::None),
        ("aes", Crypt::Aes),
        ("aes-128", Crypt::Aes128),
        ("aes-192", Crypt::Aes192),
        ("salsa20", Crypt::Salsa20),
        ("xor", Crypt::Xor),
        ("tea", Crypt::Tea),
        ("xtea", Crypt::Xtea),
        ("blowfish", Crypt::Blowfish),
        ("twofish", Crypt::Twofish),
        ("sm4", Crypt::Sm4),
        ("cast5", Crypt::Cast5),
        ("3des", Crypt::TripleDes),
    ] {
        run_against_client(name, crypt);
    }
}
