//! The binary as a user meets it: config errors, examples, uuid, the embedded default.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn skiff() -> Command {
    Command::new(env!("CARGO_BIN_EXE_skiff"))
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file in tests/broken-configs starts with `// expect: PATH @ LINE`; `skiff check` must
/// exit 1 and name that JSON path and line.
#[test]
fn broken_configs_fail_with_path_and_line() {
    let dir = repo_root().join("tests/broken-configs");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        // Read as bytes: one of them is deliberately not UTF-8.
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let header = text.lines().next().unwrap_or_default();
        let expect = header
            .strip_prefix("// expect:")
            .expect("expect header")
            .trim();
        let (json_path, line) = expect.split_once('@').expect("PATH @ LINE");
        let (json_path, line) = (json_path.trim(), line.trim());
        let out = skiff().arg("check").arg("-c").arg(&path).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: exit status; stderr:\n{stderr}",
            path.display()
        );
        let wanted_line = format!(":{line}:");
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(&wanted_line) && l.contains(json_path)),
            "{}: no diagnostic naming `{json_path}` at line {line}:\n{stderr}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} broken configs");
}

/// Every example passes `skiff check` from the repository root (`-c examples/x.json`, as the
/// README says) and from an unrelated directory (`-c /abs/path/examples/x.json`): the TLS
/// examples' relative certificate paths are found beside the example.
#[test]
fn examples_pass_check_from_any_directory() {
    let elsewhere = std::env::temp_dir();
    let mut checked = 0;
    let mut tls = 0;
    for entry in std::fs::read_dir(repo_root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let absolute = std::fs::canonicalize(&path).unwrap();
        for (dir, config) in [
            (repo_root(), PathBuf::from("examples").join(&name)),
            (elsewhere.clone(), absolute),
        ] {
            let out = skiff()
                .current_dir(&dir)
                .arg("check")
                .arg("-c")
                .arg(&config)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{} from {}: {}",
                config.display(),
                dir.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(String::from_utf8_lossy(&out.stdout).contains("Configuration OK."));
        }
        if std::fs::read_to_string(&path)
            .unwrap()
            .contains("certificateFile")
        {
            tls += 1;
        }
        checked += 1;
    }
    assert!(checked >= 12, "only {checked} examples");
    assert!(tls >= 3, "only {tls} examples with certificate files");
}

#[test]
fn uuid_maps_strings_like_xray() {
    let out = skiff().args(["uuid", "-i", "example"]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "feb54431-301b-52bb-a6dd-e1e93e81bb9e"
    );
    let out = skiff().arg("uuid").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim().len(), 36);
}

/// A private key may start with `-` (one in 64 do): it is the value of `-i`, not an option.
/// The key and its output are from `xray x25519 -i` (Xray 26.7.28).
#[test]
fn x25519_takes_a_key_that_starts_with_a_dash() {
    let key = "-FK2IQvfuYYIE1wvkotKjifBdh_U3VE0QTnZcbyiClk";
    let out = skiff().args(["x25519", "-i", key]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "PrivateKey: {key}\n\
             Password (PublicKey): 6c4JQ-akvtWcLLfC6SmRc8p6lpV833GAoUQcAYf-gjo\n\
             Hash32: 74_z3P3qni6e1YkrKYmgalmb5otmciZubyh5Z7xfzyY\n"
        )
    );
}

#[test]
fn version_and_help() {
    let out = skiff().arg("version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("skiff "));
    let out = skiff().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for word in ["run", "check", "uuid", "version"] {
        assert!(help.contains(word), "--help lists {word}");
    }
}

/// `skiff run` with no config: the embedded default listens on 127.0.0.1:10808 (SOCKS5) and
/// :10809 (HTTP), says so, and exits 0 on SIGTERM.
#[test]
fn default_config_runs_and_stops_on_sigterm() {
    if std::net::TcpListener::bind("127.0.0.1:10808").is_err()
        || std::net::TcpListener::bind("127.0.0.1:10809").is_err()
    {
        eprintln!("skipped: ports 10808/10809 are busy on this machine");
        return;
    }
    let mut child = skiff()
        .arg("run")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < 3 && Instant::now() < deadline {
        match lines.next() {
            Some(Ok(l)) => seen.push(l),
            _ => break,
        }
    }
    let text = seen.join("\n");
    assert!(text.contains("127.0.0.1:10808/tcp"), "{text}");
    assert!(text.contains("127.0.0.1:10809/tcp"), "{text}");
    // SAFETY: signalling the child we started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(Instant::now() < deadline, "did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--threads N` sets the runtime's worker threads (3 here, which is not this machine's
/// default of one per core unless it has three), and 0 is refused.
#[test]
fn run_threads_sets_the_worker_count() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("skiff-cli-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("c.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"inbounds":[{{"listen":"127.0.0.1","port":{port},"protocol":"socks"}}],
               "outbounds":[{{"protocol":"freedom"}}]}}"#
        ),
    )
    .unwrap();
    let refused = skiff()
        .args(["run", "--threads", "0", "-c"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let wanted = if cores == 3 { 4 } else { 3 };
    let mut child = skiff()
        .args(["run", "--threads", &wanted.to_string(), "-c"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let listening = lines
        .by_ref()
        .take(10)
        .map_while(Result::ok)
        .any(|l| l.contains(&format!("127.0.0.1:{port}/tcp")));
    // A new thread carries its parent's name until it runs far enough to set its own, so
    // on a busy machine a worker can still be called "skiff" here: look again for a while.
    let count_workers = || {
        std::fs::read_dir(format!("/proc/{}/task", child.id()))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "tokio-rt-worker")
            })
            .count()
    };
    let mut workers = count_workers();
    for _ in 0..100 {
        if workers == wanted {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        workers = count_workers();
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(listening, "skiff did not report its listener");
    assert_eq!(workers, wanted);
}
