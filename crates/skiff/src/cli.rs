//! Command-line interface. Xray users type `-c`, `-config` and `-confdir` with one dash; those
//! spellings are accepted alongside the usual `--config`/`--confdir`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "skiff",
    version,
    about = "A lean, fast proxy and tunnel that runs Xray's JSON configs",
    long_about = "A lean, fast proxy and tunnel that runs Xray's JSON configs (TCP and UDP).\n\n\
                  Protocols: VLESS (with XTLS Vision and fallbacks), VMess AEAD, Trojan (with\n\
                  fallbacks), Shadowsocks AEAD and 2022, Mux.Cool, kcptun, UDPspeeder and\n\
                  udp2raw; SOCKS5/4, HTTP and dokodemo-door (tunnel) inbounds; freedom,\n\
                  blackhole and dns outbounds.\n\
                  Transports: TCP (with Xray's HTTP header obfuscation), TLS, REALITY,\n\
                  WebSocket, HTTPUpgrade, gRPC, XHTTP, mKCP and kcptun's KCP, in any\n\
                  combination, and udp2raw's fake TCP under the UDP ones.\n\
                  Routing as in Xray: rules with geoip/geosite lists, sniffing (HTTP, TLS, QUIC),\n\
                  balancers and the dns section (UDP, TCP, DoT and DoH servers, hosts); policy\n\
                  levels and multi-file configs. Panels drive it through Xray's gRPC API and\n\
                  traffic counters.\n\n\
                  Quick start: `skiff run` starts a SOCKS5 proxy on 127.0.0.1:10808 and an HTTP\n\
                  proxy on 127.0.0.1:10809, both going direct. `skiff check -c FILE` validates a\n\
                  config and names each problem's file, line and JSON path. `skiff bench` measures\n\
                  Skiff beside the Xray, v2ray, trojan, Shadowsocks and kcptun found here.\n\
                  `skiff share -c FILE --address HOST` prints the vless://, vmess://, trojan:// and\n\
                  ss:// links (and QR codes) clients import. `skiff uuid`, `skiff x25519` and\n\
                  `skiff tls cert` make ids, keys and self-signed certificates as Xray's\n\
                  commands do."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run with the given config files (or the embedded default when none is given).
    /// SIGHUP reads them again and applies the changes to inbounds, users and routing rules
    /// without dropping connections; a config with errors is refused and changes nothing.
    Run {
        #[command(flatten)]
        config: ConfigArgs,
        /// Seconds live connections get to finish after SIGTERM/SIGINT.
        #[arg(long, default_value_t = 10, value_name = "SECONDS")]
        grace: u64,
        /// Worker threads (default: one per CPU core, or TOKIO_WORKER_THREADS). One suits a
        /// process that carries a single UDP tunnel (a UDPspeeder or udp2raw replacement):
        /// its packets then never hop between threads, which saved about 13 % of its CPU in
        /// `skiff bench --udp-fec` on two cores.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        threads: Option<u16>,
    },
    /// Validate config files and print the resolved plan; exit status 1 on errors.
    Check {
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Measure Skiff (and the peers installed here) the way the community's reports do:
    /// source → proxy client → proxy server → sink, throughput, CPU per GiB and memory.
    ///
    /// Plain `skiff bench` runs every TCP combination with every peer found, 3 × 1 GiB per row:
    /// minutes (on 2 cores about 1 with Skiff alone, 3–6 with the peers CI installs and Xray).
    /// `--quick` is a first look in under a minute. Rows a peer cannot run in the chosen
    /// direction are skipped as "not supported by this peer" and listed at the end; they do
    /// not fail the run.
    Bench(Box<skiff_bench::BenchArgs>),
    /// Print the version.
    Version,
    /// Print a random UUID, or with -i the UUID Xray derives from any string.
    Uuid {
        /// Map this string (1-30 bytes) to a UUID the way Xray does for ids that are not UUIDs.
        #[arg(
            short = 'i',
            long = "input",
            value_name = "STRING",
            allow_hyphen_values = true
        )]
        input: Option<String>,
    },
    /// Print the share links (vless://, vmess://, trojan://, ss://) and QR codes that let
    /// clients reach the users of the config's inbounds, or a ready client config.
    Share {
        #[command(flatten)]
        config: ConfigArgs,
        /// Only this inbound (its tag).
        #[arg(long, value_name = "TAG")]
        inbound: Option<String>,
        /// Only this user (their email).
        #[arg(long, value_name = "EMAIL")]
        user: Option<String>,
        /// The host or IP clients dial (default: the inbound's listen address, when it is not
        /// 0.0.0.0 or ::).
        #[arg(long, value_name = "HOST")]
        address: Option<String>,
        /// Add the SHA-256 of the inbound's certificate (`pcs`), so that clients accept a
        /// self-signed one. The link stops working when the certificate changes.
        #[arg(long)]
        pin: bool,
        /// `text`: each link and its QR code; `links`: links only; `json`: a client config.
        #[arg(long, value_enum, default_value_t = crate::share::Format::Text)]
        format: crate::share::Format,
    },
    /// Print a new X25519 key pair for REALITY, or with -i the public key of a private key,
    /// in `xray x25519`'s format.
    X25519 {
        /// Derive from this private key (base64 URL-safe without padding, as Xray prints it).
        // One key in 64 starts with `-`: it is still the value, as Go's flag package takes it.
        #[arg(
            short = 'i',
            long = "input",
            value_name = "PRIVATE_KEY",
            allow_hyphen_values = true
        )]
        input: Option<String>,
        /// Read and print standard base64 (with `+`, `/` and padding) instead.
        #[arg(long = "std-encoding")]
        std_encoding: bool,
    },
    /// TLS tools, as `xray tls`: `cert` makes a self-signed certificate.
    Tls {
        #[command(subcommand)]
        command: TlsCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum TlsCommand {
    /// Print (as JSON) or write a new self-signed certificate and its ECDSA P-256 key, as
    /// `xray tls cert` makes them; its flags also take Xray's spellings (`-domain=NAME`,
    /// `--json=false`).
    Cert(crate::tls_cert::CertArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct ConfigArgs {
    /// Config file (JSON with comments); repeat to merge several, as Xray does.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Also load every *.json in this directory, in name order.
    #[arg(long = "confdir", value_name = "DIR")]
    pub confdir: Option<PathBuf>,
}

/// Rewrites Xray's single-dash long options to clap's spelling.
pub fn normalize_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let args = args
        .into_iter()
        .map(|a| match a.to_str() {
            Some("-config") => "--config".into(),
            Some("-confdir") => "--confdir".into(),
            Some(s) if s.starts_with("-config=") => format!("-{s}").into(),
            Some(s) if s.starts_with("-confdir=") => format!("-{s}").into(),
            _ => a,
        })
        .collect();
    crate::tls_cert::normalize_args(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xray_style_flags_parse() {
        let args = normalize_args(
            [
                "skiff", "run", "-c", "a.json", "-config", "b.json", "-confdir", "d",
            ]
            .map(OsString::from),
        );
        let cli = Cli::try_parse_from(args).unwrap();
        match cli.command {
            Command::Run { config, .. } => {
                assert_eq!(
                    config.files,
                    vec![PathBuf::from("a.json"), PathBuf::from("b.json")]
                );
                assert_eq!(config.confdir, Some(PathBuf::from("d")));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
