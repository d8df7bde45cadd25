//! The `skiff` binary: run | check | bench | share | version | uuid | x25519 | tls cert.

mod cli;
mod logging;
mod share;
mod tls_cert;
mod uuid;
mod x25519;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use cli::{Cli, Command, ConfigArgs, TlsCommand};
use skiff_config::{Diagnostic, Loaded, Source};

fn main() -> ExitCode {
    let cli = Cli::parse_from(cli::normalize_args(std::env::args_os()));
    match cli.command {
        Command::Bench(args) => skiff_bench::main(*args),
        Command::Version => {
            println!("skiff {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Uuid { input } => {
            let u = match input {
                Some(text) if text.is_empty() || text.len() > 30 => {
                    eprintln!(
                        "error: the input must be 1 to 30 bytes long (got {})",
                        text.len()
                    );
                    return ExitCode::FAILURE;
                }
                Some(text) => uuid::from_string(&text),
                None => uuid::random(),
            };
            println!("{}", uuid::format(&u));
            ExitCode::SUCCESS
        }
        Command::X25519 {
            input,
            std_encoding,
        } => match x25519::report(input.as_deref(), std_encoding) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            // Xray prints this on stdout and exits 0; a script deserves a failure status.
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::FAILURE
            }
        },
        Command::Tls {
            command: TlsCommand::Cert(args),
        } => tls_cert::run(&args),
        Command::Share {
            config,
            inbound,
            user,
            address,
            pin,
            format,
        } => {
            let Some((loaded, _)) = load(&config) else {
                return ExitCode::FAILURE;
            };
            let selection = share::Selection {
                inbound,
                user,
                address,
                pin,
            };
            match share::render(&loaded.plan, &selection, format) {
                Ok((text, skipped)) => {
                    for note in skipped {
                        eprintln!("note: left out {note}");
                    }
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Check { config } => match load(&config) {
            Some((loaded, origin)) => {
                println!("{origin}\n\n{}", loaded.plan);
                println!("Configuration OK.");
                ExitCode::SUCCESS
            }
            None => ExitCode::FAILURE,
        },
        Command::Run {
            config,
            grace,
            threads,
        } => {
            let Some((loaded, origin)) = load(&config) else {
                return ExitCode::FAILURE;
            };
            if let Err(e) = logging::init(&loaded.plan.log) {
                eprintln!("error: cannot open the log file: {e}");
                return ExitCode::FAILURE;
            }
            run(
                loaded,
                &origin,
                &config,
                Duration::from_secs(grace),
                threads,
            )
        }
    }
}

/// Loads and validates the config, printing diagnostics. None means "errors were printed".
fn load(args: &ConfigArgs) -> Option<(Loaded, String)> {
    let (result, origin) = read_config(args);
    match result {
        Ok(loaded) => {
            print_diagnostics(&loaded.warnings);
            Some((loaded, origin))
        }
        Err(diagnostics) => {
            print_diagnostics(&diagnostics);
            eprintln!("The configuration has errors; nothing was started.");
            None
        }
    }
}

/// Reads and validates the config `args` name, or the embedded default; with a line that
/// says where it came from.
fn read_config(args: &ConfigArgs) -> (Result<Loaded, Vec<Diagnostic>>, String) {
    if args.files.is_empty() && args.confdir.is_none() {
        let source = Source {
            name: "<embedded default>".into(),
            text: skiff_config::DEFAULT_CONFIG.into(),
        };
        (
            skiff_config::load_sources(&[source]),
            "Using the embedded default config.".to_string(),
        )
    } else {
        let names: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
        let mut origin = format!("Config: {}", names.join(", "));
        if let Some(dir) = &args.confdir {
            origin.push_str(&format!("; confdir {}", dir.display()));
        }
        (
            skiff_config::load_paths(&args.files, args.confdir.as_deref()),
            origin,
        )
    }
}

fn print_diagnostics(list: &[Diagnostic]) {
    for d in list {
        eprintln!("{d}");
    }
}

fn run(
    loaded: Loaded,
    origin: &str,
    config: &ConfigArgs,
    grace: Duration,
    threads: Option<u16>,
) -> ExitCode {
    skiff_app::limits::raise_open_file_limit();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = threads {
        builder.worker_threads(n.into());
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let mut stop = StopSignal::install();
        let mut running = match skiff_app::Running::start(&loaded.plan).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!("{origin}");
        for l in running.listeners() {
            println!(
                "{} ({}) listening on {}/{}",
                l.tag, l.protocol, l.address, l.network
            );
        }
        while let Wake::Reload = stop.wait().await {
            reload(&mut running, config).await;
        }
        tracing::info!("stopping: no new connections; waiting up to {grace:?} for live ones");
        let left = running.shutdown(grace).await;
        if left > 0 {
            tracing::warn!("cut {left} connections still open at the end of the grace period (reset, not closed)");
        }
        ExitCode::SUCCESS
    })
}

/// `SIGHUP`: reads the config again and applies it (`skiff_app::Running::reload`). A config
/// with errors changes nothing; its diagnostics are logged with file, line and JSON path.
async fn reload(running: &mut skiff_app::Running, config: &ConfigArgs) {
    tracing::info!("SIGHUP: reloading the configuration");
    let (result, _) = read_config(config);
    let loaded = match result {
        Ok(loaded) => loaded,
        Err(diagnostics) => {
            for d in diagnostics.iter().filter(|d| d.is_error()) {
                tracing::error!("{d}");
            }
            tracing::error!("reload refused: the configuration has errors; nothing changed");
            return;
        }
    };
    for d in &loaded.warnings {
        tracing::warn!("{d}");
    }
    match running.reload(&loaded.plan).await {
        Ok(summary) => {
            tracing::info!("reloaded: {summary}");
            if !summary.not_applied.is_empty() {
                tracing::warn!(
                    "reload: changes to {} take effect at the next restart",
                    summary.not_applied.join(", ")
                );
            }
        }
        Err(e) => tracing::error!("reload failed: {e}"),
    }
}

/// What woke `skiff run` up.
enum Wake {
    Stop,
    Reload,
}

/// SIGINT or SIGTERM (stop) and SIGHUP (reload), listened for from the moment it is
/// created: a service manager may signal right after Skiff says it is listening, before any
/// await point is reached (and SIGHUP's default action would end the process).
struct StopSignal {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hangup: Option<tokio::signal::unix::Signal>,
}

impl StopSignal {
    fn install() -> StopSignal {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            StopSignal {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
                hangup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            StopSignal {}
        }
    }

    async fn wait(&mut self) -> Wake {
        #[cfg(unix)]
        {
            async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            tokio::select! {
                _ = next(&mut self.interrupt) => Wake::Stop,
                _ = next(&mut self.terminate) => Wake::Stop,
                _ = next(&mut self.hangup) => Wake::Reload,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Wake::Stop
        }
    }
}
