//! SIGTERM: stop accepting at once, let a live connection finish within the grace period,
//! then exit 0.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("skiff-shutdown-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        format!(
            r#"{{ "inbounds": [{{ "tag": "fwd", "listen": "127.0.0.1", "port": {port},
                   "protocol": "tunnel", "settings": {{ "address": "127.0.0.1", "port": {target_port} }} }}],
                 "outbounds": [{{ "protocol": "freedom" }}] }}"#
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["run", "--grace", "10", "-c"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.map(|l| l.contains("listening on")).unwrap_or(false)));

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

    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "did not exit after its connection ended"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status}");
    let _ = std::fs::remove_dir_all(&dir);
}
