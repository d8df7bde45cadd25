//! A small udp2raw-compatible command line over `skiff_udp2raw::io`, for tests and manual
//! checks: `skiff-udp2raw -s|-c -l ADDR -r ADDR [-k KEY] [--raw-mode M] [--cipher-mode M]
//! [--auth-mode M] [--seq-mode N] [--fix-gro] [-a] [--state-dir DIR]`. SIGTERM and SIGINT
//! stop it normally (firewall rules removed).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use skiff_udp2raw::headers::RawMode;
use skiff_udp2raw::io::rules::{DEFAULT_STATE_DIR, Flow, Rules};
use skiff_udp2raw::io::{Config, Handle, client, server};
use skiff_udp2raw::{AuthMode, CipherMode};

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skiff-udp2raw: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut server_side = None;
    let (mut listen, mut remote) = (None, None);
    let mut key = "secret key".to_string();
    let (mut raw, mut cipher, mut auth) = (RawMode::FakeTcp, CipherMode::Aes128Cbc, AuthMode::Md5);
    let (mut seq_mode, mut gro, mut auto_rule) = (3u8, false, false);
    let mut state_dir = DEFAULT_STATE_DIR.to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| -> Result<String, String> {
            it.next().cloned().ok_or(format!("{name} needs a value"))
        };
        match a.as_str() {
            "-s" => server_side = Some(true),
            "-c" => server_side = Some(false),
            "-l" => listen = Some(val("-l")?),
            "-r" => remote = Some(val("-r")?),
            "-k" => key = val("-k")?,
            "--raw-mode" => {
                let v = val(a)?;
                raw = RawMode::from_name(&v).ok_or(format!("unknown raw mode {v}"))?;
            }
            "--cipher-mode" => {
                let v = val(a)?;
                cipher = CipherMode::from_name(&v).ok_or(format!("unknown cipher mode {v}"))?;
            }
            "--auth-mode" => {
                let v = val(a)?;
                auth = AuthMode::from_name(&v).ok_or(format!("unknown auth mode {v}"))?;
            }
            "--seq-mode" => {
                seq_mode = val(a)?
                    .parse()
                    .ok()
                    .filter(|m| *m <= 4)
                    .ok_or("--seq-mode takes 0..=4")?
            }
            "--fix-gro" => gro = true,
            "-a" => auto_rule = true,
            "--state-dir" => state_dir = val(a)?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let server_side = server_side.ok_or("-s or -c is required")?;
    let parse = |v: Option<String>, f: &str| -> Result<SocketAddr, String> {
        let v = v.ok_or(format!("{f} is required"))?;
        v.parse().map_err(|_| format!("{f} {v} is not ip:port"))
    };
    let (listen, remote) = (parse(listen, "-l")?, parse(remote, "-r")?);
    let mut cfg = Config::new(
        skiff_udp2raw::cli_password(key.as_bytes()),
        raw,
        listen,
        remote,
    );
    cfg.cipher = cipher;
    cfg.auth = auth;
    cfg.seq_mode = seq_mode;
    cfg.fix_gro = gro;
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    let rules = if auto_rule {
        let flow = if server_side {
            Flow::Server { listen }
        } else {
            Flow::Client { server: remote }
        };
        let r = Rules::install(raw, flow, std::path::Path::new(&state_dir))
            .map_err(|e| e.to_string())?;
        eprintln!("skiff-udp2raw: firewall rules in {}", r.chain());
        Some(r)
    } else {
        None
    };
    let handle = Handle::default();
    let h2 = handle.clone();
    std::thread::spawn(move || {
        while !SIGNALLED.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
        h2.stop();
    });
    let r = if server_side {
        server::run(&cfg, &handle)
    } else {
        client::run(&cfg, &handle)
    };
    drop(rules);
    r.map_err(|e| e.to_string())
}
