//! The Debian package (issue 17, Packaging): the .deb `cargo deb -p skiff` makes (.ci/run builds
//! it once and names it in SKIFF_DEB) carries the binary, the hardened unit, the default config
//! as a conffile and the geodata directory; `dpkg -i` installs it, `systemd-analyze verify`
//! accepts the installed unit, the installed binary starts the way the unit starts it (its
//! ExecStart and Environment, as an unprivileged user) and listens, and `dpkg --purge` takes it
//! all away again.
//!
//! It installs into the real system, so it needs root and dpkg. Without them, or without
//! SKIFF_DEB, it is skipped with the reason; under CI (where .ci/run provides all three) any of
//! them missing is a failure.

mod common;

use common::{Proc, TempDir, free_port, listening};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const UNIT_SOURCE: &str = include_str!("../../../packaging/skiff.service");
const DEFAULT_CONFIG: &str = include_str!("../../skiff-config/src/default.json");
/// The default config's SOCKS5 and HTTP ports.
const DEFAULT_PORTS: [u16; 2] = [10808, 10809];

fn under_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Skips (returns false) with `reason`, or fails under CI.
fn precondition(ok: bool, reason: &str) -> bool {
    if !ok {
        assert!(!under_ci(), "CI must provide this: {reason}");
        eprintln!("skipped: {reason}");
    }
    ok
}

fn run(program: &str, args: &[&str]) -> Output {
    common::run_bounded(
        {
            let mut c = Command::new(program);
            c.args(args);
            c
        },
        b"",
        Duration::from_secs(120),
    )
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}):\n{}",
        out.status,
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn installed() -> bool {
    run("dpkg-query", &["-W", "-f=${db:Status-Status}", "skiff"]).stdout == b"installed"
}

/// Purges the package when the test ends, passed or not.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let out = run("dpkg", &["--purge", "skiff"]);
        if !out.status.success() {
            eprintln!("dpkg --purge skiff failed:\n{}", text(&out));
        }
    }
}

#[test]
fn deb_installs_verifies_starts_and_purges() {
    let deb = std::env::var_os("SKIFF_DEB").map(PathBuf::from);
    let is_root = unsafe { libc::geteuid() } == 0;
    let have = |tool: &str| Path::new("/usr/bin").join(tool).is_file();
    if !precondition(
        deb.as_ref().is_some_and(|d| d.is_file()),
        "SKIFF_DEB does not name a .deb (build one with `cargo deb -p skiff --locked`, then \
         SKIFF_DEB=target/debian/skiff_*.deb)",
    ) || !precondition(is_root, "dpkg -i needs root")
        || !precondition(
            have("dpkg") && have("dpkg-deb") && have("setpriv"),
            "dpkg, dpkg-deb or setpriv missing",
        )
        || !precondition(
            have("systemd-analyze"),
            "systemd-analyze missing (apt-get install systemd)",
        )
        || !precondition(
            !installed(),
            "a skiff package is already installed here; not replacing it",
        )
    {
        return;
    }
    let deb = deb.unwrap();
    let deb = deb.to_str().unwrap();

    // What the package says and holds.
    let info = ok("dpkg-deb", &["--info", deb]);
    for want in [
        "Package: skiff",
        "Section: net",
        "Depends: libc6",
        " conffiles",
        " postinst",
        " prerm",
        " postrm",
    ] {
        assert!(
            info.contains(want),
            "dpkg-deb --info lacks {want:?}:\n{info}"
        );
    }
    let listed = ok("dpkg-deb", &["--info", deb, "conffiles"]);
    assert_eq!(listed.trim(), "/etc/skiff/config.json", "conffiles");
    let contents = ok("dpkg-deb", &["--contents", deb]);
    let files: Vec<&str> = contents
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    let unit_path = files
        .iter()
        .find(|f| f.ends_with("/lib/systemd/system/skiff.service"))
        .unwrap_or_else(|| panic!("no systemd unit in the package:\n{contents}"))
        .trim_start_matches('.')
        .to_string();
    for want in [
        "./usr/bin/skiff",
        "./etc/skiff/config.json",
        "./usr/share/skiff/README",
        "./usr/share/doc/skiff/copyright",
    ] {
        assert!(
            files.contains(&want),
            "the package lacks {want}:\n{contents}"
        );
    }
    assert!(
        contents.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 6
                && f[0] == "-rwxr-xr-x"
                && (f[1] == "0/0" || f[1] == "root/root")
                && f[5] == "./usr/bin/skiff"
        }),
        "/usr/bin/skiff is not an executable owned by root:\n{contents}"
    );

    // Install. dpkg runs the maintainer scripts cargo-deb wrote: they enable the unit, and
    // start it only where systemd is running.
    let guard = Installed;
    ok("dpkg", &["-i", deb]);
    assert!(installed(), "dpkg -i left skiff not installed");
    assert_eq!(
        std::fs::read_to_string(&unit_path).unwrap(),
        UNIT_SOURCE,
        "the installed unit is not packaging/skiff.service (a stale .deb?)"
    );
    assert_eq!(
        std::fs::read_to_string("/etc/skiff/config.json").unwrap(),
        DEFAULT_CONFIG,
        "the installed config is not Skiff's default"
    );
    assert!(
        Path::new("/etc/systemd/system/multi-user.target.wants/skiff.service").exists(),
        "the postinst did not enable skiff.service"
    );

    // The installed unit passes systemd's own check, with nothing said about it.
    let out = run("systemd-analyze", &["verify", &unit_path]);
    let said = text(&out);
    assert!(
        out.status.success() && !said.contains("skiff"),
        "systemd-analyze verify {unit_path} ({}):\n{said}",
        out.status
    );

    start_as_the_unit_does(&unit_path);

    // Remove it all: binary, unit, config (a conffile goes on purge), the enablement link.
    drop(guard);
    assert!(!installed(), "dpkg --purge left skiff installed");
    for gone in [
        "/usr/bin/skiff",
        unit_path.as_str(),
        "/etc/skiff/config.json",
        "/etc/systemd/system/multi-user.target.wants/skiff.service",
    ] {
        assert!(
            !Path::new(gone).exists(),
            "{gone} is still there after purge"
        );
    }
}

/// Runs the installed unit's ExecStart with its Environment, as user nobody (the unit's
/// DynamicUser is an unprivileged user too; there is no systemd here to allocate one), and
/// checks that it listens, answers a SOCKS5 greeting and stops on SIGTERM.
fn start_as_the_unit_does(unit_path: &str) {
    let unit = std::fs::read_to_string(unit_path).unwrap();
    let value = |key: &str| -> Vec<String> {
        unit.lines()
            .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_string)
            .collect()
    };
    let exec = value("ExecStart");
    assert_eq!(exec.len(), 1, "one ExecStart: {exec:?}");
    let mut argv: Vec<String> = exec[0].split_whitespace().map(str::to_string).collect();
    assert_eq!(
        argv,
        ["/usr/bin/skiff", "run", "-c", "/etc/skiff/config.json"],
        "ExecStart"
    );

    // The installed config's ports, unless something else on this machine holds them: then
    // the same config with two free ports, in a temp dir user nobody can read.
    let dir = TempDir::new("package-deb");
    let mut ports = DEFAULT_PORTS;
    let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
    if !DEFAULT_PORTS.iter().all(|&p| free(p)) {
        ports = [free_port(), free_port()];
        eprintln!(
            "note: 127.0.0.1:10808/10809 are busy here; running the installed config on {ports:?}"
        );
        let config = DEFAULT_CONFIG
            .replace("\"port\": 10808", &format!("\"port\": {}", ports[0]))
            .replace("\"port\": 10809", &format!("\"port\": {}", ports[1]));
        let path = dir.path().join("config.json");
        std::fs::write(&path, config).unwrap();
        argv[3] = path.to_str().unwrap().to_string();
    }

    let log = dir.path().join("skiff.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new("/usr/bin/setpriv");
    cmd.args([
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "--no-new-privs",
        "--",
    ])
    .args(&argv)
    .env_clear()
    .env("PATH", "/usr/bin:/bin")
    .current_dir("/")
    .stdin(Stdio::null())
    .stdout(file.try_clone().unwrap())
    .stderr(file);
    for env in value("Environment") {
        let (k, v) = env.split_once('=').unwrap();
        cmd.env(k, v);
    }
    let mut proc = Proc {
        child: cmd.spawn().unwrap(),
        what: "installed skiff",
    };
    common::wait_ports(&mut proc, &ports, &log);
    let pid = proc.child.id();

    // It runs as nobody, not root.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(uid, "65534", "skiff runs as uid {uid}, not nobody");

    // The SOCKS5 inbound answers: no-auth greeting, no-auth chosen.
    let mut s = TcpStream::connect(("127.0.0.1", ports[0])).unwrap();
    s.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut reply = [0u8; 2];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply, [5, 0], "SOCKS5 greeting");
    drop(s);

    // Stop it by its PID as systemd does (SIGTERM), within the unit's TimeoutStopSec.
    // SAFETY: signalling the child this test started, by its PID.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = proc.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "skiff ignored SIGTERM for 20 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.success(),
        "skiff exited {status} on SIGTERM:\n{said}"
    );
    for port in ports {
        assert!(
            said.contains(&format!("127.0.0.1:{port}/tcp")),
            "no listening line for {port}:\n{said}"
        );
        assert!(!listening(port), "port {port} still listening after exit");
    }
}
