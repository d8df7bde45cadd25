//! `skiff tls cert`: a self-signed certificate made as `xray tls cert` makes it, so guides that
//! use Xray's command work unchanged. An ECDSA P-256 key; subject O and CN ("Xray Inc" unless
//! given); the `--domain` names as subjectAltNames; valid from an hour ago for `--expire`
//! (90 days); key usage digitalSignature and keyEncipherment (plus keyCertSign with `--ca`),
//! extended key usage serverAuth, critical basic constraints. Printed as Xray's JSON (each
//! PEM as an array of lines) and with `--file=PATH` written to `PATH.crt` and `PATH.key`.
//!
//! Two deliberate differences: the key's PEM says `PRIVATE KEY`, what its PKCS#8 content is
//! (Xray labels the same bytes `RSA PRIVATE KEY`, which PKCS#1-strict readers refuse; Xray
//! itself reads either label), and a `--domain` that is an IP address becomes an IP address
//! subjectAltName (Xray writes it as a DNS name, which a client checking an IP never matches).

use std::ffi::OsString;
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::string::{Ia5String, PrintableString};
use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};

/// `xray tls cert`'s default `--expire`: 90 days.
const DEFAULT_EXPIRE: &str = "2160h";

#[derive(clap::Args, Debug, Clone)]
pub struct CertArgs {
    /// A name for the certificate's subjectAltName; repeat for several (an IP address
    /// becomes an IP address entry).
    #[arg(
        long = "domain",
        value_name = "DOMAIN",
        allow_hyphen_values = true,
        value_parser = parse_domain
    )]
    pub domains: Vec<Domain>,
    /// The subject's common name (CN); empty for none.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "Xray Inc",
        allow_hyphen_values = true
    )]
    pub name: String,
    /// The subject's organization (O).
    #[arg(
        long,
        value_name = "ORG",
        default_value = "Xray Inc",
        allow_hyphen_values = true
    )]
    pub org: String,
    /// Make a CA certificate (basic constraints CA:TRUE, key usage keyCertSign).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value = "false",
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub ca: bool,
    /// Print the certificate and key as JSON (`--json=false` to print nothing).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value = "true",
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub json: bool,
    /// Also write the certificate to PATH.crt and the key to PATH.key (replacing them), as
    /// Xray does: with the permissions the umask leaves (0644 under umask 022), so that a
    /// service running as another user can read them; `chmod 600 PATH.key` otherwise.
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    pub file: Option<String>,
    /// How long the certificate is valid, as a Go duration (`240h`, `90m`, `1h30m`).
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_EXPIRE, value_parser = parse_expire)]
    pub expire: Duration,
}

/// One `--domain`: a DNS name (IA5, i.e. ASCII) or an IP address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Domain {
    Dns(String),
    Ip(IpAddr),
}

fn parse_domain(text: &str) -> Result<Domain, String> {
    if text.is_empty() {
        return Err("empty; give a name such as example.com".into());
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Domain::Ip(ip));
    }
    if !text.is_ascii() {
        return Err("not ASCII; write an internationalized name in its xn-- form".into());
    }
    Ok(Domain::Dns(text.to_string()))
}

/// Go's `strconv.ParseBool`, which Go's flag package uses for `--flag=value`.
fn parse_go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err("expected true or false (or 1, 0, t, f)".into()),
    }
}

fn parse_expire(text: &str) -> Result<Duration, String> {
    match parse_go_duration(text)? {
        (false, nanos) if nanos > 0 => Ok(Duration::from_nanos(
            u64::try_from(nanos).expect("bounded by i64::MAX"),
        )),
        _ => Err("the certificate must stay valid for some time: give more than 0".into()),
    }
}

/// Go's `time.ParseDuration`: an optional sign, then one or more decimal numbers (fractions
/// allowed) each with a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`); a bare `0` is allowed.
/// Returns (negative, nanoseconds), the magnitude at most `i64::MAX` as in Go.
fn parse_go_duration(text: &str) -> Result<(bool, u128), String> {
    let bad =
        || "not a duration such as 240h, 90m or 1h30m (units ns, us, ms, s, m, h)".to_string();
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok((negative, 0));
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let whole_len = digits(rest);
        let whole = &rest[..whole_len];
        rest = &rest[whole_len..];
        let mut fraction = "";
        if let Some(after) = rest.strip_prefix('.') {
            let len = digits(after);
            fraction = &after[..len];
            rest = &after[len..];
        }
        if whole.is_empty() && fraction.is_empty() {
            return Err(bad());
        }
        let unit_len = rest
            .char_indices()
            .find(|&(_, c)| c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let unit: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        let too_long = || "longer than Go's largest duration (about 292 years)".to_string();
        let mut value: u128 = 0;
        for d in whole.bytes() {
            value = value * 10 + u128::from(d - b'0');
            if value > i64::MAX as u128 {
                return Err(too_long());
            }
        }
        value *= unit;
        // The fraction's nanoseconds, truncated; digits past the 30th cannot matter.
        let (mut numerator, mut scale) = (0u128, 1u128);
        for d in fraction.bytes().take(30) {
            numerator = numerator * 10 + u128::from(d - b'0');
            scale *= 10;
        }
        value += numerator * unit / scale;
        total += value;
        if total > i64::MAX as u128 {
            return Err(too_long());
        }
    }
    Ok((negative, total))
}

/// A generated certificate and its key, each as PEM text.
pub struct Generated {
    pub certificate: String,
    pub key: String,
}

pub fn generate(args: &CertArgs) -> Result<Generated, String> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| format!("cannot generate the key: {e}"))?;
    let mut params = CertificateParams::default();

    let mut subject = DistinguishedName::new();
    // Go writes the organization even when empty, the common name only when set.
    subject.push(DnType::OrganizationName, dn_string(&args.org));
    if !args.name.is_empty() {
        subject.push(DnType::CommonName, dn_string(&args.name));
    }
    params.distinguished_name = subject;

    params.subject_alt_names = args
        .domains
        .iter()
        .map(|d| match d {
            Domain::Ip(ip) => Ok(SanType::IpAddress(*ip)),
            Domain::Dns(name) => Ia5String::try_from(name.as_str())
                .map(SanType::DnsName)
                .map_err(|e| format!("--domain {name}: {e}")),
        })
        .collect::<Result<_, String>>()?;

    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| "the system clock is before 1970".to_string())?;
    let now = rcgen::date_time_ymd(1970, 1, 1) + since_epoch;
    // An hour's slack for clocks behind ours, as Xray gives.
    params.not_before = now - Duration::from_secs(3600);
    params.not_after = now + args.expire;

    // A random positive serial below 2^128, as Go's x509 users commonly draw it.
    let mut serial = [0u8; 16];
    skiff_crypto::random::fill(&mut serial);
    params.serial_number = Some(SerialNumber::from_slice(&serial));

    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    if args.ca {
        params.key_usages.push(KeyUsagePurpose::KeyCertSign);
        // rcgen adds the subject key identifier to a CA certificate, as Go does.
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    } else {
        // Critical CA:FALSE without the subject key identifier rcgen's ExplicitNoCa adds
        // (Xray's leaf has none): basicConstraints (2.5.29.19) = SEQUENCE {}.
        params.is_ca = IsCa::NoCa;
        let mut constraints = CustomExtension::from_oid_content(&[2, 5, 29, 19], vec![0x30, 0x00]);
        constraints.set_criticality(true);
        params.custom_extensions.push(constraints);
    }

    let certificate = params
        .self_signed(&key)
        .map_err(|e| format!("cannot make the certificate: {e}"))?;
    Ok(Generated {
        certificate: pem("CERTIFICATE", certificate.der()),
        key: pem("PRIVATE KEY", &key.serialize_der()),
    })
}

/// PrintableString when the text allows it, else UTF8String, as Go chooses.
fn dn_string(text: &str) -> DnValue {
    match PrintableString::try_from(text) {
        Ok(s) => DnValue::PrintableString(s),
        Err(_) => DnValue::Utf8String(text.to_string()),
    }
}

/// PEM as Go's encoding/pem writes it: 64-column base64, `\n` line ends.
fn pem(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// `xray tls cert`'s JSON: `certificate` and `key`, each the PEM's lines, two-space indent.
pub fn json(generated: &Generated) -> String {
    let lines = |pem: &str| pem.lines().map(str::to_string).collect::<Vec<_>>();
    let value = serde_json::json!({
        "certificate": lines(&generated.certificate),
        "key": lines(&generated.key),
    });
    let mut text = serde_json::to_string_pretty(&value).expect("strings serialize");
    text.push('\n');
    text
}

pub fn run(args: &CertArgs) -> ExitCode {
    let generated = match generate(args) {
        Ok(g) => g,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        print!("{}", json(&generated));
    }
    if let Some(path) = args.file.as_deref().filter(|p| !p.is_empty()) {
        for (suffix, text) in [(".crt", &generated.certificate), (".key", &generated.key)] {
            let name = format!("{path}{suffix}");
            if let Err(e) = std::fs::write(&name, text) {
                eprintln!("error: cannot write {name}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Flags `tls cert` takes, as Go's flag package lets them be spelled with one dash too.
const FLAGS: &[&str] = &["domain", "name", "org", "ca", "json", "file", "expire"];
/// Those that take the next argument as their value when written without `=`.
const VALUE_FLAGS: &[&str] = &["domain", "name", "org", "file", "expire"];

/// Rewrites `-domain=x`, `-ca` and the like after `tls cert` to clap's `--` spelling. Like
/// Go's flag package, a value flag's separate value is left as it is (even if it starts with
/// `-`), and rewriting stops at the first argument that is not a flag, or at `--`.
pub fn normalize_args(args: Vec<OsString>) -> Vec<OsString> {
    let is_tls_cert =
        args.get(1).is_some_and(|a| a == "tls") && args.get(2).is_some_and(|a| a == "cert");
    if !is_tls_cert {
        return args;
    }
    let mut out = Vec::with_capacity(args.len());
    let mut iter = args.into_iter();
    out.extend(iter.by_ref().take(3));
    while let Some(arg) = iter.next() {
        let Some(text) = arg.to_str() else {
            out.push(arg);
            break;
        };
        let Some(flag) = text.strip_prefix("--").or_else(|| text.strip_prefix('-')) else {
            out.push(arg);
            break;
        };
        if flag.is_empty() {
            out.push(arg);
            break;
        }
        let name = flag.split_once('=').map_or(flag, |(n, _)| n);
        if !FLAGS.contains(&name) {
            out.push(arg);
            continue;
        }
        let takes_next = VALUE_FLAGS.contains(&name) && !flag.contains('=');
        out.push(format!("--{flag}").into());
        if takes_next && let Some(value) = iter.next() {
            out.push(value);
        }
    }
    out.extend(iter);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ns = |s: &str| {
            parse_go_duration(s).map(|(neg, n)| if neg { -(n as i128) } else { n as i128 })
        };
        assert_eq!(ns("240h"), Ok(240 * 3_600_000_000_000));
        assert_eq!(ns("1h30m"), ns("90m"));
        assert_eq!(ns("1.5h"), ns("90m"));
        assert_eq!(ns(".5s"), Ok(500_000_000));
        assert_eq!(ns("5.s"), Ok(5_000_000_000));
        assert_eq!(ns("1µs"), Ok(1_000));
        assert_eq!(ns("-1h"), Ok(-3_600_000_000_000));
        assert_eq!(ns("+2ms3ns"), Ok(2_000_003));
        assert_eq!(ns("0"), Ok(0));
        assert_eq!(ns("2562047h"), Ok(2562047 * 3_600_000_000_000));
        for bad in [
            "", "0x", "10d", "abc", "1", ".h", "h", "-", "2562048h", "1h-1m",
        ] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_expire("0").is_err());
        assert!(parse_expire("-1h").is_err());
        assert_eq!(
            parse_expire(DEFAULT_EXPIRE),
            Ok(Duration::from_secs(90 * 86400))
        );
    }

    #[test]
    fn go_flag_spellings_become_clap_ones() {
        let norm = |args: &[&str]| -> Vec<String> {
            normalize_args(args.iter().map(OsString::from).collect())
                .into_iter()
                .map(|a| a.into_string().unwrap())
                .collect()
        };
        assert_eq!(
            norm(&[
                "skiff",
                "tls",
                "cert",
                "-domain=a",
                "-ca",
                "-json=false",
                "-expire",
                "1h"
            ]),
            [
                "skiff",
                "tls",
                "cert",
                "--domain=a",
                "--ca",
                "--json=false",
                "--expire",
                "1h"
            ]
        );
        // A separate value stays a value; a non-flag ends the flags, as in Go.
        assert_eq!(
            norm(&["skiff", "tls", "cert", "-name", "-ca", "x", "-org=y"]),
            ["skiff", "tls", "cert", "--name", "-ca", "x", "-org=y"]
        );
        // Other commands are left alone.
        assert_eq!(
            norm(&["skiff", "uuid", "-i", "-ca"]),
            ["skiff", "uuid", "-i", "-ca"]
        );
    }

    #[test]
    fn pem_lines_are_64_columns() {
        let text = pem("X", &[7u8; 100]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "-----BEGIN X-----");
        assert_eq!(lines[1].len(), 64);
        assert_eq!(lines.last(), Some(&"-----END X-----"));
        assert!(text.ends_with("-----\n"));
    }
}
