//! Interop with the real Debian `kcptun-server`: our KcpSession plays kcptun-client's KCP layer
//! (hand-written smux v1 frames, no compression) towards a TCP echo target on 127.0.0.1 and
//! must get its bytes back — for every crypt we implement, with deterministic loss both ways.
//!
//! Skips when /usr/bin/kcptun-server is absent. Every wait is bounded; the only process ended
//! is the child this test spawned, by its handle.

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use skiff_kcp::{Crypt, KcpConfig, KcpSession};

const SERVER: &str = "/usr/bin/kcptun-server";

struct ChildGuard(Child);
impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Echoes the first accepted connection back until EOF or 20 s, on its own thread.
fn echo_target() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        l.set_nonblocking(false).ok();
        if let Ok((mut s, _)) = l.accept() {
            s.set_read_timeout(Some(Duration::from_secs(20))).ok();
            let mut buf = [0u8; 16384];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 || s.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    });
    port
}

fn smux_frame(cmd: u8, sid: u32, data: &[u8]) -> Vec<u8> {
    let mut f = vec![1, cmd];
    f.extend_from_slice(&(data.len() as u16).to_le_bytes());
    f.extend_from_slice(&sid.to_le_bytes());
    f.extend_from_slice(data);
    f
}

/// PSH data of stream 3 in a smux v1 byte stream (frames may still be incomplete at the end).
fn psh_data(stream: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    let mut rest = stream;
    while rest.len() >= 8 {
        let len = u16::from_le_bytes([rest[2], rest[3]]) as usize;
        if rest.len() < 8 + len {
            break;
        }
        let sid = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if rest[1] == 2 && sid == 3 {
            data.extend_from_slice(&rest[8..8 + len]);
        }
        rest = &rest[8 + len..];
    }
    data
}

fn run_against_server(crypt_name: &str, crypt: Crypt) {
    let target = echo_target();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    let server_port = {
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let child = Command::new(SERVER)
        .args(["-l", &format!("127.0.0.1:{server_port}")])
        .args(["-t", &format!("127.0.0.1:{target}")])
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
    udp.connect(("127.0.0.1", server_port)).unwrap();

    let mut cfg = KcpConfig::kcptun_default(true);
    cfg.crypt = crypt;
    cfg.key = "test".to_string();
    let mut s = KcpSession::new(0x5eed_1234, &cfg).unwrap();
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i ^ (i >> 9)) as u8).collect();
    let mut stream = smux_frame(0, 3, &[]);
    for chunk in payload.chunks(16_000) {
        stream.extend_from_slice(&smux_frame(2, 3, chunk));
    }
    let mut queued = 0;
    let mut received = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::new();
    let (mut sent_count, mut recv_count) = (0u64, 0u64);
    let t0 = Instant::now();
    let now_ms = || t0.elapsed().as_millis() as u32;
    // kcptun-server needs a moment to bind; lost first datagrams are simply resent by KCP.
    while t0.elapsed() < Duration::from_secs(20) {
        if queued < stream.len() {
            queued += s.send(&stream[queued..]);
        }
        s.update(now_ms());
        while s.poll_datagram(&mut out) {
            sent_count += 1;
            // Lose every 7th datagram on the way out: kcptun must recover (FEC or resend).
            if sent_count % 7 != 0 {
                let _ = udp.send(&out); // ECONNREFUSED before the server binds: KCP resends.
            }
        }
        match udp.recv(&mut buf) {
            Ok(n) => {
                recv_count += 1;
                // …and every 9th on the way in: our FEC decodes kcptun's parity.
                if recv_count % 9 != 0 {
                    s.handle_datagram(&buf[..n], now_ms());
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::ConnectionRefused
                ) => {}
            Err(e) => panic!("udp: {e}"),
        }
        loop {
            let n = s.recv(&mut buf);
            if n == 0 {
                break;
            }
            received.extend_from_slice(&buf[..n]);
        }
        if psh_data(&received).len() >= payload.len() {
            break;
        }
        assert!(!s.is_dead(), "{crypt_name}: dead link");
    }
    let echoed = psh_data(&received);
    assert_eq!(
        echoed.len(),
        payload.len(),
        "{crypt_name}: echo incomplete, stats {:?}",
        s.stats()
    );
    assert!(echoed == payload, "{crypt_name}: echo corrupted");
    let stats = s.stats();
    if crypt == Crypt::Sm4 {
        // kcptun 20210922's sm4 now and then emits a full-size datagram with one wrong 16-byte
        // block (OpenSSL's SM4-CFB decrypts those wire bytes exactly as we do and the CRC
        // fails too: the sender is at fault, likely its SM4 scratch state shared between the
        // encrypting and decrypting goroutines). Such datagrams must be dropped, never used.
        // Being a race, its rate grows with load: 15 of 256 were seen on a busy machine, so
        // the bound only catches a decryption that is wrong across the board.
        assert!(
            stats.dropped * 4 <= stats.datagrams_in,
            "{crypt_name}: too many bad datagrams: {stats:?}"
        );
    } else {
        assert_eq!(
            stats.dropped, 0,
            "{crypt_name}: server datagrams all valid: {stats:?}"
        );
    }
    assert!(
        s.stats().fec_recovered > 0,
        "{crypt_name}: kcptun's parity rebuilt lost data: {:?}",
        s.stats()
    );
}

#[test]
fn real_kcptun_server_echoes_through_our_session_for_every_crypt() {
    if !std::path::Path::new(SERVER).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs kcptun: {SERVER} is missing"
        );
        eprintln!("skipping: {SERVER} not installed");
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
        run_against_server(name, crypt);
    }
}
