//! `SIGHUP` reloads the config under load (issue 17, "Reload"): during a 30 s VLESS transfer
//! and 500 idle connections, four reloads in turn: (a) a changed user list, (b) a new
//! inbound and a routing rule, (c) a broken config, (d) changed outbounds. The transfer
//! completes intact, every idle connection still echoes, the counters keep counting, the
//! removed user's open connection is closed and the new user gets in, the new inbound
//! serves, the broken config is refused with its file, line and JSON path while the running
//! one goes on, and the rule whose outbound became a freedom lets its port through.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{
    READ_TIMEOUT, TempDir, assert_healthy, curl, echo_server, free_port, noise, start_skiff,
    vless_request, wait_ports,
};
use sha2::{Digest, Sha256};

const IDLE: usize = 500;
/// The long transfer: this many chunks, one every `PACE`, about 30 s in all.
const CHUNKS: usize = 60;
const CHUNK: usize = 256 << 10;
const PACE: Duration = Duration::from_millis(500);

/// The users, each its own id: a carries the transfer, b the idle connections, c is removed
/// by the first reload and d added by it.
const USERS: [(&str, u8); 4] = [("a@x", 0xa), ("b@x", 0xb), ("c@x", 0xc), ("d@x", 0xd)];

fn id(tag: u8) -> [u8; 16] {
    let mut id = [tag; 16];
    id[6] = 0x40 | (tag & 0x0f);
    id[8] = 0x80 | (tag & 0x3f);
    id
}

fn uuid(tag: u8) -> String {
    let h: String = id(tag).iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

struct Ports {
    vless: u16,
    socks: u16,
    metrics: u16,
}

/// `block`: a routing rule sends connections to that port to the blackhole.
fn config(ports: &Ports, users: &[&str], socks: bool, block: Option<u16>) -> String {
    let clients: Vec<_> = USERS
        .iter()
        .filter(|(email, _)| users.contains(email))
        .map(|(email, tag)| serde_json::json!({ "id": uuid(*tag), "email": email }))
        .collect();
    let mut inbounds = vec![serde_json::json!({
        "tag": "vless-in", "listen": "127.0.0.1", "port": ports.vless, "protocol": "vless",
        "settings": { "decryption": "none", "clients": clients }
    })];
    if socks {
        inbounds.push(serde_json::json!({
            "tag": "socks-in", "listen": "127.0.0.1", "port": ports.socks, "protocol": "socks",
            "settings": { "auth": "noauth" }
        }));
    }
    serde_json::to_string_pretty(&serde_json::json!({
        "log": { "loglevel": "info" },
        "metrics": { "listen": format!("127.0.0.1:{}", ports.metrics) },
        "stats": {},
        "policy": {
            "levels": { "0": { "statsUserUplink": true, "statsUserDownlink": true } },
            "system": { "statsInboundUplink": true, "statsInboundDownlink": true }
        },
        "inbounds": inbounds,
        "outbounds": [{ "tag": "direct", "protocol": "freedom" },
                      { "tag": "block", "protocol": "blackhole" }],
        "routing": { "rules": block.map(|port| vec![serde_json::json!(
            { "type": "field", "port": port.to_string(), "outboundTag": "block" })])
            .unwrap_or_default() }
    }))
    .unwrap()
}

/// A VLESS connection of user `tag` to the echo server that has echoed `hello` back.
fn open(ports: &Ports, echo: u16, tag: u8, hello: &[u8]) -> std::io::Result<TcpStream> {
    let mut conn = TcpStream::connect(("127.0.0.1", ports.vless))?;
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    conn.write_all(&vless_request(&id(tag), echo, hello))?;
    let mut back = vec![0u8; 2 + hello.len()];
    conn.read_exact(&mut back)?;
    assert_eq!(&back[2..], hello, "echo through a fresh connection");
    Ok(conn)
}

/// Sends `ping` on an open connection and reads it back.
fn ping(conn: &mut TcpStream, ping: &[u8]) -> std::io::Result<()> {
    conn.write_all(ping)?;
    let mut back = vec![0u8; ping.len()];
    conn.read_exact(&mut back)?;
    assert_eq!(back, ping);
    Ok(())
}

fn sighup(pid: u32) {
    // SAFETY: a signal to the process this test started.
    let r = unsafe { libc::kill(pid as libc::pid_t, libc::SIGHUP) };
    assert_eq!(r, 0, "kill -HUP {pid}");
}

/// Waits (bounded) for the `n`th occurrence of `needle` in the log; returns the log.
fn wait_log(log: &Path, needle: &str, n: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.matches(needle).count() >= n {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {n}th `{needle}` in the log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `user>>>EMAIL>>>traffic>>>uplink` from the metrics endpoint's `/debug/vars`.
fn uplink(ports: &Ports, email: &str) -> u64 {
    let out = curl(&[
        "-sf",
        &format!("http://127.0.0.1:{}/debug/vars", ports.metrics),
    ]);
    assert!(out.status.success(), "GET /debug/vars");
    let vars: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    vars["stats"]["user"][email]["uplink"]
        .as_u64()
        .unwrap_or_default()
}

/// The uplink of `email` once it is past `from` (the transfer sends a chunk every `PACE`);
/// fails if it stays put for 5 s.
fn grown(ports: &Ports, email: &str, from: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = uplink(ports, email);
        if now > from {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{email}'s uplink stopped at {from}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sighup_reloads_users_and_inbounds_and_refuses_a_broken_config() {
    let dir = TempDir::new("reload");
    let echo = echo_server(IDLE + 32, Duration::from_secs(120));
    let ports = Ports {
        vless: free_port(),
        socks: free_port(),
        metrics: free_port(),
    };
    let path = dir.path().join("server.json");
    let (mut server, log) = start_skiff(
        dir.path(),
        "server",
        &config(&ports, &["a@x", "b@x", "c@x"], false, None),
        &[ports.vless, ports.metrics],
    );
    let pid = server.child.id();

    // The long transfer, paced over about 30 s, in a thread of its own.
    let transfer = {
        let vless = ports.vless;
        std::thread::spawn(move || {
            let mut conn = TcpStream::connect(("127.0.0.1", vless)).unwrap();
            conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
            conn.write_all(&vless_request(&id(0xa), echo, &[])).unwrap();
            let mut reader = conn.try_clone().unwrap();
            let receiving = std::thread::spawn(move || {
                let mut hash = Sha256::new();
                let mut buf = vec![0u8; 64 << 10];
                let mut total = 0usize;
                let mut header = [0u8; 2];
                reader.read_exact(&mut header).unwrap();
                loop {
                    let n = reader.read(&mut buf).expect("the transfer's echo");
                    if n == 0 {
                        break;
                    }
                    hash.update(&buf[..n]);
                    total += n;
                }
                (total, hash.finalize())
            });
            let mut hash = Sha256::new();
            for i in 0..CHUNKS {
                let chunk = noise(i as u64 + 1, CHUNK);
                hash.update(&chunk);
                conn.write_all(&chunk).expect("the transfer's upload");
                std::thread::sleep(PACE);
            }
            conn.shutdown(Shutdown::Write).unwrap();
            let (total, echoed) = receiving.join().unwrap();
            (total, echoed == hash.finalize())
        })
    };

    // 500 idle connections of user b, and one of user c.
    let mut idle: Vec<TcpStream> = (0..IDLE)
        .map(|i| open(&ports, echo, 0xb, &(i as u32).to_be_bytes()).expect("idle connection"))
        .collect();
    let mut doomed = open(&ports, echo, 0xc, b"c").expect("user c connects");
    std::thread::sleep(Duration::from_secs(2));
    let before = uplink(&ports, "a@x");
    assert!(before > 0, "the transfer is counted while it runs");

    // (a) The user list changes: c goes, d comes.
    std::fs::write(&path, config(&ports, &["a@x", "b@x", "d@x"], false, None)).unwrap();
    sighup(pid);
    let text = wait_log(&log, "reloaded:", 1);
    assert!(
        text.contains("1 kept, 0 added, 0 restarted, 0 removed; users: 1 added, 1 removed"),
        "{text}"
    );
    // c's open connection is closed within a second or so, and c cannot come back.
    doomed
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut byte = [0u8; 1];
    let _ = doomed.write_all(b"x");
    assert!(
        matches!(doomed.read(&mut byte), Ok(0) | Err(_)),
        "the removed user's connection stays open"
    );
    assert!(
        open(&ports, echo, 0xc, b"c again").is_err(),
        "a removed user connects"
    );
    open(&ports, echo, 0xd, b"d").expect("the added user connects");
    let after_a = grown(&ports, "a@x", before);

    // A second echo server, reachable until reload (b) adds a rule that blocks it.
    let other_echo = echo_server(IDLE + 32, Duration::from_secs(120));
    open(&ports, echo, 0xd, b"d").expect("the first echo, before the rule");
    open(&ports, other_echo, 0xd, b"d").expect("the second echo, before the rule");

    // (b) A new inbound, and a routing rule.
    std::fs::write(
        &path,
        config(&ports, &["a@x", "b@x", "d@x"], true, Some(other_echo)),
    )
    .unwrap();
    sighup(pid);
    let text = wait_log(&log, "reloaded:", 2);
    assert!(
        text.contains(
            "1 kept, 1 added, 0 restarted, 0 removed; users: 0 added, 0 removed; routing: 1 rules"
        ),
        "{text}"
    );
    assert!(
        open(&ports, other_echo, 0xd, b"blocked").is_err(),
        "the reloaded rule does not route to the blackhole"
    );
    open(&ports, echo, 0xd, b"not blocked").expect("the rule blocks more than its port");
    wait_ports(&mut server, &[ports.socks], &log);
    {
        // SOCKS5, no auth, CONNECT 127.0.0.1:echo.
        let mut conn = TcpStream::connect(("127.0.0.1", ports.socks)).unwrap();
        conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        conn.write_all(&[5, 1, 0]).unwrap();
        let mut reply = [0u8; 2];
        conn.read_exact(&mut reply).unwrap();
        assert_eq!(reply, [5, 0]);
        let mut request = vec![5, 1, 0, 1, 127, 0, 0, 1];
        request.extend_from_slice(&echo.to_be_bytes());
        conn.write_all(&request).unwrap();
        let mut reply = [0u8; 10];
        conn.read_exact(&mut reply).unwrap();
        assert_eq!(reply[1], 0, "SOCKS reply {reply:?}");
        ping(&mut conn, b"through the new inbound").unwrap();
    }

    // (c) A broken config: refused with its place, and the running one goes on.
    let broken = config(&ports, &["a@x", "b@x", "d@x"], true, Some(other_echo)).replacen(
        &format!("\"port\": {}", ports.socks),
        "\"port\": \"not a port\"",
        1,
    );
    assert_ne!(
        broken,
        config(&ports, &["a@x", "b@x", "d@x"], true, Some(other_echo))
    );
    let line = broken
        .lines()
        .position(|l| l.contains("not a port"))
        .unwrap()
        + 1;
    std::fs::write(&path, &broken).unwrap();
    sighup(pid);
    let text = wait_log(&log, "reload refused", 1);
    let place = format!("{}:{line}", path.display());
    assert!(
        text.contains(&place) && text.contains("inbounds[1].port"),
        "the refusal names neither {place} nor inbounds[1].port:\n{text}"
    );
    open(&ports, echo, 0xd, b"still d").expect("the running config goes on");
    assert!(TcpStream::connect(("127.0.0.1", ports.socks)).is_ok());

    // (d) Outbounds: `block` becomes a freedom (the rule naming it now lets the second echo
    // through), `extra` is new, `direct` (which the transfer and the idle connections use)
    // is kept.
    let mut changed: serde_json::Value = serde_json::from_str(&config(
        &ports,
        &["a@x", "b@x", "d@x"],
        true,
        Some(other_echo),
    ))
    .unwrap();
    changed["outbounds"][1]["protocol"] = "freedom".into();
    changed["outbounds"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({ "tag": "extra", "protocol": "blackhole" }));
    std::fs::write(&path, serde_json::to_string_pretty(&changed).unwrap()).unwrap();
    sighup(pid);
    let text = wait_log(&log, "reloaded:", 3);
    assert!(
        text.contains("outbounds: 1 kept, 1 added, 1 replaced, 0 removed; routing: 1 rules"),
        "{text}"
    );
    open(&ports, other_echo, 0xd, b"now through a freedom")
        .expect("the rule's outbound, replaced by a freedom, lets the second echo through");

    // Everything that was open is still there, and the transfer completes whole.
    for (i, conn) in idle.iter_mut().enumerate() {
        ping(conn, &(i as u32 + 7).to_be_bytes())
            .unwrap_or_else(|e| panic!("idle connection {i} was lost: {e}"));
    }
    let (total, intact) = transfer.join().expect("the transfer");
    assert_eq!(total, CHUNKS * CHUNK, "the transfer's echo is short");
    assert!(intact, "the transfer's echo differs from what was sent");
    let end = uplink(&ports, "a@x");
    assert!(
        end >= (CHUNKS * CHUNK) as u64 && end > after_a && after_a > before,
        "a@x uplink {end} after {} bytes",
        CHUNKS * CHUNK
    );
    assert_healthy(&mut server, &log);
}
