//! SIGTERM: stop accepting at once, let a live connection finish within the grace period,
//! then exit 0.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `skiff run --grace GRACE` with a tunnel on a free port to `target_port`, once it says it
/// is listening; its stderr (the log) goes to `log` when given. Returns the child, the
/// tunnel's port and the temp dir.
fn start_tunnel(
    name: &str,
    grace: &str,
    target_port: u16,
    log: Option<&str>,
) -> (std::process::Child, u16, std::path::PathBuf) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("skiff-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        format!(
            r#"{{ "log": {{ "loglevel": "info" }},
                 "inbounds": [{{ "tag": "fwd", "listen": "127.0.0.1", "port": {port},
                   "protocol": "tunnel", "settings": {{ "address": "127.0.0.1", "port": {target_port} }} }}],
                 "outbounds": [{{ "protocol": "freedom" }}] }}"#
        ),
    )
    .unwrap();
    let stderr = match log {
        Some(file) => Stdio::from(std::fs::File::create(dir.join(file)).unwrap()),
        None => Stdio::null(),
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["run", "--grace", grace, "-c"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.map(|l| l.contains("listening on")).unwrap_or(false)));
    (child, port, dir)
}

/// Waits (at most 15 s) for `child` to exit and says it exited 0.
fn assert_exits_zero(child: &mut std::process::Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "did not exit {what}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status}");
}

#[test]
fn sigterm_drains_live_connections_then_exits_zero() {
    // The destination: echoes one message after a pause, so the connection is busy when the
    // signal arrives.
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    let target_port = target.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = target.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        s.write_all(&buf).unwrap();
    });

    let (mut child, port, dir) = start_tunnel("shutdown", "10", target_port, None);

    let mut live = TcpStream::connect(("127.0.0.1", port)).unwrap();
    live.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    live.write_all(b"hello").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling the child we started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(300));

    // No new connections…
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "still accepting after SIGTERM"
    );
    // …but the live one gets its answer.
    let mut answer = [0u8; 5];
    live.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"hello");
    server.join().unwrap();
    drop(live);

    assert_exits_zero(&mut child, "after its connection ended");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A download still running when the grace period ends is cut with a reset, so the client
/// can tell it from a complete one (a clean FIN would look like the end of the file).
#[test]
fn connections_cut_by_the_grace_limit_are_reset_not_closed() {
    // The destination: streams bytes until its peer goes away (bounded: at most 10 s).
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    let target_port = target.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = target.accept().unwrap();
        let chunk = [7u8; 16 * 1024];
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if s.write_all(&chunk).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });

    let (mut child, port, dir) = start_tunnel("shutdown-cut", "1", target_port, Some("skiff.log"));
    let log = dir.join("skiff.log");

    let mut live = TcpStream::connect(("127.0.0.1", port)).unwrap();
    live.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    live.read_exact(&mut buf[..1024]).unwrap();
    // SAFETY: signalling the child we started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    // Keep reading: the download goes on through the grace period, then must end in a reset.
    let started = Instant::now();
    let end = loop {
        match live.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(_) => {}
            Err(e) => break Err(e),
        }
        assert!(started.elapsed() < Duration::from_secs(8), "never cut");
    };
    let error = end.expect_err("a cut download ended with a clean FIN");
    assert_eq!(
        error.kind(),
        std::io::ErrorKind::ConnectionReset,
        "expected a reset, got {error}"
    );
    assert_exits_zero(&mut child, "after the cut");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("cut 1 connections"),
        "the cut is logged with its count; log:\n{text}"
    );
    drop(live);
    server.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// With the API (on its own port and behind a routed inbound) and the metrics endpoint, as
/// panels run it: SIGTERM still ends the process. The API's server tasks used to run on, and
/// `skiff run` waited for them for ever (systemd would SIGKILL it after its stop timeout).
#[test]
fn sigterm_exits_with_the_api_and_metrics_running() {
    let free = || {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (api, door, metrics) = (free(), free(), free());
    let dir = std::env::temp_dir().join(format!("skiff-stop-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        format!(
            r#"{{ "log": {{ "loglevel": "info" }}, "stats": {{}},
                 "api": {{ "tag": "api", "listen": "127.0.0.1:{api}",
                           "services": ["HandlerService", "StatsService"] }},
                 "metrics": {{ "listen": "127.0.0.1:{metrics}" }},
                 "inbounds": [{{ "tag": "api-in", "listen": "127.0.0.1", "port": {door},
                   "protocol": "dokodemo-door", "settings": {{ "address": "127.0.0.1" }} }}],
                 "outbounds": [{{ "protocol": "freedom" }}],
                 "routing": {{ "rules": [{{ "type": "field", "inboundTag": ["api-in"],
                   "outboundTag": "api" }}] }} }}"#
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["run", "--grace", "2", "-c"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.map(|l| l.contains("listening on")).unwrap_or(false)));
    // Something in flight on each: an open connection to the API's port and to its door.
    let _held = [
        TcpStream::connect(("127.0.0.1", api)).unwrap(),
        TcpStream::connect(("127.0.0.1", door)).unwrap(),
    ];
    // SAFETY: signalling our own child by PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("skiff run with the API did not exit within 15 s of SIGTERM");
    };
    assert!(status.success(), "exit status {status}");
    let _ = std::fs::remove_dir_all(&dir);
}
