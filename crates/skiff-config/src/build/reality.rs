//! `realitySettings` → [`RealityPlan`], read as Xray's `REALITYConfig.Build`
//! (infra/conf/transport_security.go) reads it: the same keys, aliases, defaults and limits.
//! Xray tells the sides apart by whether `target` is given; here the side is known, so a key
//! of the other side is an error naming the key to use instead.

use base64::Engine as _;
use base64::alphabet::URL_SAFE;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::Deserialize;
use serde_json::Value;

use super::error_count;
use super::stream::Side;
use crate::diag::Diagnostic;
use crate::plan::{
    RealityClientPlan, RealityLimitPlan, RealityPlan, RealityServerPlan, RealityTarget,
};
use crate::raw::kind;
use crate::raw::values::{Int, out_of_range};
use crate::source::Loc;

/// Xray's default `minClientVer` (26.3.27): older clients, and clients of other projects
/// that put their own version in the session ID, are refused unless the config lowers it.
pub const DEFAULT_MIN_CLIENT_VER: [u8; 3] = [26, 3, 27];

/// The fingerprint names Xray's `tls.GetFingerprint` knows (lower case), less the two its
/// REALITY refuses (`unsafe`, `hellogolang`). Which of them skiff's client imitates is the
/// client's business; the config accepts what Xray accepts.
pub const FINGERPRINTS: &[&str] = &[
    "chrome",
    "firefox",
    "safari",
    "ios",
    "android",
    "edge",
    "360",
    "qq",
    "random",
    "randomized",
    "randomizednoalpn",
    "hellofirefox_120",
    "hellofirefox_148",
    "hellochrome_120",
    "hellochrome_131",
    "hellochrome_133",
    "helloios_13",
    "helloios_14",
    "helloedge_106",
    "hellosafari_26_3",
    "hello360_11_0",
    "helloqq_11_1",
    "hellorandomized",
    "hellorandomizedalpn",
    "hellorandomizednoalpn",
    "hellofirefox_auto",
    "hellofirefox_55",
    "hellofirefox_56",
    "hellofirefox_63",
    "hellofirefox_65",
    "hellofirefox_99",
    "hellofirefox_102",
    "hellofirefox_105",
    "hellochrome_auto",
    "hellochrome_58",
    "hellochrome_62",
    "hellochrome_70",
    "hellochrome_72",
    "hellochrome_83",
    "hellochrome_87",
    "hellochrome_96",
    "hellochrome_100",
    "hellochrome_102",
    "hellochrome_106_shuffle",
    "helloios_auto",
    "helloios_11_1",
    "helloios_12_1",
    "helloandroid_11_okhttp",
    "helloedge_85",
    "helloedge_auto",
    "hellosafari_16_0",
    "hellosafari_auto",
    "hello360_auto",
    "hello360_7_5",
    "helloqq_auto",
    "hellochrome_100_psk",
    "hellochrome_112_psk_shuf",
    "hellochrome_114_padding_psk_shuf",
    "hellochrome_115_pq",
    "hellochrome_115_pq_psk",
    "hellochrome_120_pq",
];

/// The ML-DSA-65 public key length (FIPS 204), as Xray checks `mldsa65Verify`.
const MLDSA65_PUBLIC_KEY_LEN: usize = 1952;

/// Go's `base64.RawURLEncoding`: URL-safe alphabet, no padding, and (Go not being strict)
/// non-zero trailing bits accepted.
const RAW_URL: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// `realitySettings` as given. Every Xray key is declared so none is reported as unknown.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRealitySettings {
    pub master_key_log: Option<String>,
    pub show: Option<bool>,
    pub target: Option<Value>,
    pub dest: Option<Value>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub xver: Option<Int>,
    pub server_names: Option<Vec<String>>,
    pub private_key: Option<String>,
    pub min_client_ver: Option<String>,
    pub max_client_ver: Option<String>,
    pub max_time_diff: Option<Int>,
    pub short_ids: Option<Vec<String>>,
    pub mldsa65_seed: Option<String>,
    pub limit_fallback_upload: Option<RawLimitFallback>,
    pub limit_fallback_download: Option<RawLimitFallback>,
    pub fingerprint: Option<String>,
    pub server_name: Option<String>,
    pub password: Option<String>,
    pub public_key: Option<String>,
    pub short_id: Option<String>,
    pub mldsa65_verify: Option<String>,
    pub spider_x: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawLimitFallback {
    pub after_bytes: Option<Int>,
    pub bytes_per_sec: Option<Int>,
    pub burst_bytes_per_sec: Option<Int>,
}

pub fn reality_plan(
    raw: RawRealitySettings,
    loc: &Loc,
    side: Side,
    diags: &mut Vec<Diagnostic>,
) -> Option<RealityPlan> {
    let before = error_count(diags);
    if raw
        .master_key_log
        .as_deref()
        .is_some_and(|s| !s.trim().is_empty())
    {
        diags.push(loc.key("masterKeyLog").warning(
            "masterKeyLog is not supported by this version of skiff and is ignored (no key log is written)",
        ));
    }
    let (server, client) = match side {
        Side::Inbound => {
            wrong_side_keys(
                &raw,
                loc,
                side,
                &[
                    ("serverName", "serverNames"),
                    ("publicKey", "privateKey"),
                    ("password", "privateKey"),
                    ("shortId", "shortIds"),
                    ("spiderX", ""),
                    ("fingerprint", ""),
                    ("mldsa65Verify", "mldsa65Seed"),
                ],
                diags,
            );
            (server_plan(&raw, loc, diags), None)
        }
        Side::Outbound => {
            wrong_side_keys(
                &raw,
                loc,
                side,
                &[
                    ("target", ""),
                    ("dest", ""),
                    ("serverNames", "serverName"),
                    ("privateKey", "publicKey"),
                    ("shortIds", "shortId"),
                    ("mldsa65Seed", "mldsa65Verify"),
                    ("minClientVer", ""),
                    ("maxClientVer", ""),
                    ("maxTimeDiff", ""),
                    ("xver", ""),
                    ("limitFallbackUpload", ""),
                    ("limitFallbackDownload", ""),
                ],
                diags,
            );
            (None, client_plan(&raw, loc, diags))
        }
    };
    (error_count(diags) == before).then_some(RealityPlan {
        show: raw.show.unwrap_or(false),
        server,
        client,
    })
}

/// Keys of the other side that carry a value: an error pointing at the key this side uses.
fn wrong_side_keys(
    raw: &RawRealitySettings,
    loc: &Loc,
    side: Side,
    keys: &[(&str, &str)],
    diags: &mut Vec<Diagnostic>,
) {
    let present = |key: &str| -> bool {
        let given_str = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.is_empty());
        let given_int = |i: &Option<Int>| i.is_some_and(|i| i != Int::Exact(0));
        let given_limit = |l: &Option<RawLimitFallback>| {
            l.as_ref().is_some_and(|l| {
                [l.after_bytes, l.bytes_per_sec, l.burst_bytes_per_sec]
                    .iter()
                    .any(given_int)
            })
        };
        match key {
            "serverName" => given_str(&raw.server_name),
            "publicKey" => given_str(&raw.public_key),
            "password" => given_str(&raw.password),
            "shortId" => given_str(&raw.short_id),
            "spiderX" => given_str(&raw.spider_x),
            "fingerprint" => given_str(&raw.fingerprint),
            "mldsa65Verify" => given_str(&raw.mldsa65_verify),
            "target" => raw.target.as_ref().is_some_and(|v| !v.is_null()),
            "dest" => raw.dest.as_ref().is_some_and(|v| !v.is_null()),
            "serverNames" => raw.server_names.as_ref().is_some_and(|l| !l.is_empty()),
            "privateKey" => given_str(&raw.private_key),
            "shortIds" => raw.short_ids.as_ref().is_some_and(|l| !l.is_empty()),
            "mldsa65Seed" => given_str(&raw.mldsa65_seed),
            "minClientVer" => given_str(&raw.min_client_ver),
            "maxClientVer" => given_str(&raw.max_client_ver),
            "maxTimeDiff" => given_int(&raw.max_time_diff),
            "xver" => given_int(&raw.xver),
            "limitFallbackUpload" => given_limit(&raw.limit_fallback_upload),
            "limitFallbackDownload" => given_limit(&raw.limit_fallback_download),
            _ => false,
        }
    };
    let (this, other) = match side {
        Side::Inbound => ("an inbound", "outbound"),
        Side::Outbound => ("an outbound", "inbound"),
    };
    for (key, instead) in keys {
        if !present(key) {
            continue;
        }
        let message = if instead.is_empty() {
            format!("`{key}` is a REALITY {other} key and has no meaning on {this}")
        } else {
            format!("`{key}` is a REALITY {other} key: {this} uses `{instead}`")
        };
        diags.push(loc.key(key).error(message));
    }
}

fn server_plan(
    raw: &RawRealitySettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<RealityServerPlan> {
    let before = error_count(diags);
    // `target` wins over `dest` when both are given, as in Xray.
    let (target_key, target_value) = match (&raw.target, &raw.dest) {
        (Some(t), _) if !t.is_null() => ("target", Some(t)),
        (_, Some(d)) if !d.is_null() => ("dest", Some(d)),
        _ => ("target", None),
    };
    let target = match target_value {
        None => {
            diags.push(loc.key("target").error(
                "a REALITY inbound needs `target` (alias `dest`): the site's \"host:port\", a port, or a unix socket path",
            ));
            None
        }
        Some(value) => parse_target(value, raw.kind.as_deref(), &loc.key(target_key), diags),
    };
    let xver = match raw.xver {
        None => 0,
        Some(v) => match v.get::<u8>().filter(|v| *v <= 2) {
            Some(v) => v,
            None => {
                diags.push(loc.key("xver").error(out_of_range(
                    v,
                    "a PROXY protocol version 0, 1 or 2 (0: none)",
                )));
                0
            }
        },
    };
    let server_names = raw.server_names.clone().unwrap_or_default();
    if server_names.is_empty() {
        diags.push(loc.key("serverNames").error(
            "a REALITY inbound needs `serverNames`: the SNIs its clients send (the target's names)",
        ));
    }
    let private_key =
        match raw.private_key.as_deref() {
            None | Some("") => {
                diags.push(loc.key("privateKey").error(
                    "a REALITY inbound needs `privateKey` (generate one with `skiff x25519`)",
                ));
                None
            }
            Some(s) => key32(s, "privateKey", &loc.key("privateKey"), diags),
        };
    let min_client_ver = match raw.min_client_ver.as_deref() {
        None | Some("") => Some(DEFAULT_MIN_CLIENT_VER),
        Some(s) => client_version(s, &loc.key("minClientVer"), diags),
    };
    let max_client_ver = match raw.max_client_ver.as_deref() {
        None | Some("") => None,
        Some(s) => client_version(s, &loc.key("maxClientVer"), diags),
    };
    let max_time_diff_ms = match raw.max_time_diff {
        None => 0,
        Some(v) => v.get::<u64>().unwrap_or_else(|| {
            diags.push(loc.key("maxTimeDiff").error(out_of_range(
                v,
                "milliseconds 0–18446744073709551615 (0: not checked)",
            )));
            0
        }),
    };
    let mut short_ids = Vec::new();
    match raw.short_ids.as_deref() {
        None | Some([]) => diags.push(
            loc.key("shortIds")
                .error("a REALITY inbound needs `shortIds` (\"\" allows the empty short id)"),
        ),
        Some(list) => {
            for (i, s) in list.iter().enumerate() {
                if let Some(id) = short_id(s, &loc.key("shortIds").index(i), diags) {
                    short_ids.push(id);
                }
            }
        }
    }
    let limit_fallback_upload = limit(
        raw.limit_fallback_upload.as_ref(),
        &loc.key("limitFallbackUpload"),
        diags,
    );
    let limit_fallback_download = limit(
        raw.limit_fallback_download.as_ref(),
        &loc.key("limitFallbackDownload"),
        diags,
    );
    let mldsa65_seed = match raw.mldsa65_seed.as_deref() {
        None | Some("") => None,
        Some(s) => {
            let sloc = loc.key("mldsa65Seed");
            if raw.private_key.as_deref() == Some(s) {
                diags.push(sloc.error("`mldsa65Seed` and `privateKey` must not be the same value"));
                None
            } else {
                let seed = key32(s, "mldsa65Seed", &sloc, diags);
                if seed.is_some() {
                    diags.push(sloc.error(
                        "mldsa65Seed (ML-DSA-65 signed REALITY certificates) is not supported by this version of skiff yet",
                    ));
                }
                seed
            }
        }
    };
    for name in &server_names {
        let lower = name.to_ascii_lowercase();
        if [".ru", ".ir", ".cn"].iter().any(|s| lower.ends_with(s))
            || ["apple", "icloud", "microsoft"]
                .iter()
                .any(|s| lower.contains(s))
        {
            diags.push(loc.key("serverNames").warning(format!(
                "REALITY: choosing `{name}` as the target increases the likelihood of the server's IP being blocked (Xray warns the same)"
            )));
        }
    }
    if error_count(diags) != before {
        return None;
    }
    Some(RealityServerPlan {
        target: target?,
        xver,
        server_names,
        private_key: private_key?,
        min_client_ver: min_client_ver?,
        max_client_ver,
        max_time_diff_ms,
        short_ids,
        limit_fallback_upload,
        limit_fallback_download,
        mldsa65_seed,
    })
}

fn client_plan(
    raw: &RawRealitySettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<RealityClientPlan> {
    let before = error_count(diags);
    let fingerprint = raw
        .fingerprint
        .as_deref()
        .map(str::to_ascii_lowercase)
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| "chrome".to_owned());
    if fingerprint == "unsafe" || fingerprint == "hellogolang" {
        diags.push(loc.key("fingerprint").error(format!(
            "fingerprint `{fingerprint}` is refused by REALITY (as in Xray): use a browser's, such as \"chrome\""
        )));
    } else if !FINGERPRINTS.contains(&fingerprint.as_str()) {
        diags.push(loc.key("fingerprint").error(format!(
            "unknown fingerprint `{fingerprint}` (such as \"chrome\", \"firefox\", \"safari\", \"random\")"
        )));
    }
    // `password` is Xray's newer name for `publicKey` and wins when both are given.
    let (key_name, key) = match (raw.password.as_deref(), raw.public_key.as_deref()) {
        (Some(p), _) if !p.is_empty() => ("password", Some(p)),
        (_, Some(k)) if !k.is_empty() => ("publicKey", Some(k)),
        _ => ("publicKey", None),
    };
    let public_key = match key {
        None => {
            diags.push(loc.key("publicKey").error(
                "a REALITY outbound needs `publicKey` (alias `password`): the server's, from `skiff x25519 -i <privateKey>`",
            ));
            None
        }
        Some(k) => key32(k, key_name, &loc.key(key_name), diags),
    };
    let short_id = short_id(
        raw.short_id.as_deref().unwrap_or(""),
        &loc.key("shortId"),
        diags,
    );
    let mldsa65_verify = match raw.mldsa65_verify.as_deref() {
        None | Some("") => None,
        Some(s) => match RAW_URL.decode(s) {
            Ok(k) if k.len() == MLDSA65_PUBLIC_KEY_LEN => Some(k),
            _ => {
                diags.push(loc.key("mldsa65Verify").error(format!(
                    "`mldsa65Verify` must be an ML-DSA-65 public key: {MLDSA65_PUBLIC_KEY_LEN} bytes in unpadded URL-safe base64"
                )));
                None
            }
        },
    };
    let spider = spider(
        raw.spider_x.as_deref().unwrap_or(""),
        &loc.key("spiderX"),
        diags,
    );
    let server_name = raw
        .server_name
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    if error_count(diags) != before {
        return None;
    }
    let (spider_x, spider_y) = spider?;
    Some(RealityClientPlan {
        server_name,
        public_key: public_key?,
        short_id: short_id?,
        spider_x,
        spider_y,
        fingerprint,
        mldsa65_verify,
    })
}

/// `target`/`dest`: a JSON port number, or a string: `"443"` (→ `localhost:443`),
/// `"host:port"`, or a unix socket (`/path`, `@abstract`, `@@padded`). `type` ("tcp" or
/// "unix") may say which explicitly, as in Xray.
fn parse_target(
    value: &Value,
    kind_given: Option<&str>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<RealityTarget> {
    let text = match value {
        Value::Number(n) => match n.as_u64().and_then(|p| u16::try_from(p).ok()) {
            Some(p) => p.to_string(),
            None => {
                diags.push(loc.error(out_of_range(n, "a port number 1–65535")));
                return None;
            }
        },
        Value::String(s) => s.clone(),
        other => {
            diags.push(loc.error(format!(
                "invalid type: {}, expected \"host:port\", a port or a unix socket path",
                kind(other)
            )));
            return None;
        }
    };
    if text.is_empty() {
        diags.push(loc.error("`target` is empty: give the site's \"host:port\""));
        return None;
    }
    let kind = match kind_given.filter(|k| !k.is_empty()) {
        Some(k) => k.to_ascii_lowercase(),
        None if text.starts_with('/') || text.starts_with('@') => "unix".to_owned(),
        None => "tcp".to_owned(),
    };
    match kind.as_str() {
        "unix" => Some(RealityTarget::Unix(text)),
        "tcp" => {
            let with_host = if text.bytes().all(|b| b.is_ascii_digit()) {
                format!("localhost:{text}")
            } else {
                text.clone()
            };
            match split_host_port(&with_host) {
                Some((host, port)) => Some(RealityTarget::Tcp { host, port }),
                None => {
                    diags.push(loc.error(format!(
                        "`{text}` is not a valid target: expected \"host:port\" (IPv6 as \"[::1]:443\"), a port, or a unix socket path"
                    )));
                    None
                }
            }
        }
        other => {
            diags.push(loc.error(format!(
                "unknown target `type` \"{other}\" (one of \"tcp\", \"unix\")"
            )));
            None
        }
    }
}

/// `host:port` with a port 1–65535; `[v6]:port` for IPv6; an empty host means localhost.
fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (host, rest) = rest.split_once(']')?;
        (host, rest.strip_prefix(':')?)
    } else {
        let (host, port) = s.rsplit_once(':')?;
        if host.contains(':') {
            return None;
        }
        (host, port)
    };
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    if host.bytes().any(|b| b.is_ascii_whitespace() || b == b'/') {
        return None;
    }
    let host = if host.is_empty() { "localhost" } else { host };
    Some((host.to_owned(), port))
}

/// A 32-byte key in Go's `base64.RawURLEncoding`.
fn key32(s: &str, key: &str, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<[u8; 32]> {
    match RAW_URL.decode(s.trim()) {
        Ok(bytes) => match <[u8; 32]>::try_from(bytes.as_slice()) {
            Ok(k) => Some(k),
            Err(_) => {
                diags.push(loc.error(format!(
                    "`{key}` must be 32 bytes (43 characters of unpadded URL-safe base64), this is {} bytes",
                    bytes.len()
                )));
                None
            }
        },
        Err(_) => {
            diags.push(loc.error(format!(
                "`{key}` is not unpadded URL-safe base64 (43 characters of A–Z, a–z, 0–9, - and _, as `skiff x25519` prints)"
            )));
            None
        }
    }
}

/// A short id: up to 16 hex digits, an even count ("" is allowed), decoded into 8 bytes and
/// zero-padded on the right, exactly as Xray's `hex.Decode` into an 8-byte buffer.
pub fn short_id(s: &str, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<[u8; 8]> {
    if s.len() > 16 {
        diags.push(loc.error(format!(
            "short id `{s}` is too long: at most 16 hex digits (8 bytes)"
        )));
        return None;
    }
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        diags.push(loc.error(format!(
            "short id `{s}` must be hex digits in pairs (an even count, at most 16; \"\" allowed)"
        )));
        return None;
    }
    let mut id = [0u8; 8];
    for (i, pair) in s.as_bytes().chunks(2).enumerate() {
        let hex = std::str::from_utf8(pair).ok()?;
        id[i] = u8::from_str_radix(hex, 16).ok()?;
    }
    Some(id)
}

/// `minClientVer` / `maxClientVer`: "x.y.z", each part 0–255; fewer parts leave zeros.
fn client_version(s: &str, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<[u8; 3]> {
    let mut version = [0u8; 3];
    for (i, part) in s.split('.').enumerate() {
        if i == 3 {
            diags.push(loc.error(format!(
                "`{s}` is not a client version: at most three parts, \"x.y.z\""
            )));
            return None;
        }
        match part.parse::<u8>() {
            Ok(v) => version[i] = v,
            Err(_) => {
                diags.push(loc.error(format!(
                    "`{s}` is not a client version: part {} must be a number 0–255",
                    i + 1
                )));
                return None;
            }
        }
    }
    Some(version)
}

/// `limitFallbackUpload` / `limitFallbackDownload`. A limit that would apply is refused
/// until skiff implements Xray's rate limiting of the forwarded connection.
fn limit(
    raw: Option<&RawLimitFallback>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> RealityLimitPlan {
    let Some(raw) = raw else {
        return RealityLimitPlan::default();
    };
    let mut field = |key: &str, v: Option<Int>| -> u64 {
        let Some(v) = v else { return 0 };
        v.get::<u64>().unwrap_or_else(|| {
            diags.push(
                loc.key(key)
                    .error(out_of_range(v, "an integer 0–18446744073709551615")),
            );
            0
        })
    };
    let plan = RealityLimitPlan {
        after_bytes: field("afterBytes", raw.after_bytes),
        bytes_per_sec: field("bytesPerSec", raw.bytes_per_sec),
        burst_bytes_per_sec: field("burstBytesPerSec", raw.burst_bytes_per_sec),
    };
    if plan.bytes_per_sec != 0 {
        diags.push(loc.key("bytesPerSec").error(
            "rate limiting the forwarded connection is not supported by this version of skiff yet (leave bytesPerSec 0)",
        ));
    }
    plan
}

/// `spiderX`: a path starting with `/` whose query's `p`, `c`, `t`, `i`, `r` (each "n" or
/// "low-high") become Xray's `SpiderY` and are removed from the path; a number that does not
/// parse is 0, as in Xray.
fn spider(s: &str, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<(String, [i64; 10])> {
    let s = if s.is_empty() { "/" } else { s };
    if !s.starts_with('/') {
        diags.push(loc.error(format!("spiderX `{s}` must start with \"/\"")));
        return None;
    }
    let (before_fragment, fragment) = match s.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (s, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((p, q)) => (p, q),
        None => (before_fragment, ""),
    };
    let mut spider_y = [0i64; 10];
    let mut kept: Vec<(&str, &str)> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let index = match key {
            "p" => 0,
            "c" => 2,
            "t" => 4,
            "i" => 6,
            "r" => 8,
            _ => {
                kept.push((key, value));
                continue;
            }
        };
        if value.is_empty() {
            continue;
        }
        let number = |n: &str| n.parse::<i64>().unwrap_or(0);
        let (low, high) = match value.split_once('-') {
            Some((l, h)) => (number(l), number(h.split('-').next().unwrap_or(""))),
            None => (number(value), number(value)),
        };
        spider_y[index] = low;
        spider_y[index + 1] = high;
    }
    // Go's url.Values.Encode sorts by key.
    kept.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = path.to_owned();
    if !kept.is_empty() {
        out.push('?');
        let pairs: Vec<String> = kept.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&pairs.join("&"));
    }
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    Some((out, spider_y))
}
