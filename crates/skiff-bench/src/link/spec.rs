//! What an emulated link does to each direction, written as the CLI text
//! `delay=100ms,loss=9%[,rate=100mbit][,queue=N][,mtu=N][,cc=NAME]`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Packets the link holds (in flight through the delay plus queued), like netem's `limit`.
/// netem's default of 1000 would cap 1500-byte packets at ~1.2 Gbit/s over 10 ms and
/// ~120 Mbit/s over 100 ms, below what the clean-link rows must carry; 10 000 does not bind.
pub const DEFAULT_QUEUE_PACKETS: usize = 10_000;

/// The TUN MTU: a wire-sized 1500, so loss hits each Ethernet-sized packet as on the links
/// the reports measured, and TCP is not favoured over KCP (whose UDP packets are ~1400 bytes)
/// by losing one 64 KB packet where a real link loses one of ~44. One forwarding thread per
/// direction still carries ~1 Gbit/s. `mtu=65000` trades that realism for several Gbit/s.
pub const DEFAULT_MTU: u32 = 1500;

/// Largest `queue=` accepted.
const MAX_QUEUE: u64 = 100_000;
/// Smallest MTU accepted: IPv4's minimum datagram every host must take.
const MIN_MTU: u32 = 576;
/// Largest MTU accepted: the biggest IPv4 datagram (and the TUN driver's maximum).
const MAX_MTU: u32 = 65535;
/// Longest congestion control name the kernel takes (TCP_CA_NAME_MAX, 16 with the NUL).
const MAX_CC_NAME: usize = 15;

/// One link's behaviour; each direction gets the same values independently (like netem on both
/// ends), so a round trip sees twice the delay and 1-(1-loss)^2 loss.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// One-way propagation delay, each direction.
    pub delay: Duration,
    /// Round-trip loss in 0..=1, as a ping across the link reports it (the reports' "9% loss"
    /// is what their ping showed). Each direction drops independently with
    /// [`LinkSpec::loss_each_way`], which compounds to this over a round trip.
    pub loss: f64,
    /// Bottleneck rate in bits per second, each direction; `None` = as fast as we can forward.
    pub rate_bps: Option<u64>,
    /// Packets the link holds per direction (in flight plus waiting for the rate), like netem's
    /// `limit`; one more is tail-dropped.
    pub queue_packets: usize,
    /// MTU of both TUN devices (see [`DEFAULT_MTU`]).
    pub mtu: u32,
    /// TCP congestion control made the default (`net.ipv4.tcp_congestion_control`) in both
    /// namespaces, e.g. "cubic" or "bbr"; `None` = leave the system default.
    pub cc: Option<String>,
}

impl Default for LinkSpec {
    fn default() -> Self {
        LinkSpec {
            delay: Duration::ZERO,
            loss: 0.0,
            rate_bps: None,
            queue_packets: DEFAULT_QUEUE_PACKETS,
            mtu: DEFAULT_MTU,
            cc: None,
        }
    }
}

/// Why a link text was refused; the message names the offending part and what would be valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseLinkSpecError(String);

impl fmt::Display for ParseLinkSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad link spec: {}", self.0)
    }
}

impl std::error::Error for ParseLinkSpecError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ParseLinkSpecError> {
    Err(ParseLinkSpecError(msg.into()))
}

impl FromStr for LinkSpec {
    type Err = ParseLinkSpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.is_empty() {
            return err(
                "empty; expected e.g. delay=100ms,loss=9%[,rate=100mbit][,queue=1000][,cc=bbr]",
            );
        }
        let mut spec = LinkSpec::default();
        let mut seen: Vec<&str> = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let Some((key, value)) = part.split_once('=') else {
                return err(format!("`{part}` is not key=value"));
            };
            let (key, value) = (key.trim(), value.trim());
            // A repeated key is almost surely a typo; refusing it beats silently taking one.
            if seen.contains(&key) {
                return err(format!("`{key}` given twice"));
            }
            match key {
                "delay" => spec.delay = parse_delay(value)?,
                "loss" => spec.loss = parse_loss(value)?,
                "rate" => spec.rate_bps = Some(parse_rate(value)?),
                // Bounded because each held packet may be an MTU-sized buffer: 100k of them at
                // the default MTU is already 6.5 GB per direction.
                "queue" => spec.queue_packets = parse_count(key, value, 1, MAX_QUEUE)? as usize,
                "mtu" => spec.mtu = parse_count(key, value, MIN_MTU as u64, MAX_MTU as u64)? as u32,
                "cc" => spec.cc = Some(parse_cc(value)?),
                _ => {
                    return err(format!(
                        "unknown key `{key}`; known: delay, loss, rate, queue, mtu, cc"
                    ));
                }
            }
            seen.push(key);
        }
        Ok(spec)
    }
}

/// Splits `12.5ms` into (12.5, "ms"); the number may have a fraction but no sign or exponent.
fn split_number(value: &str) -> Option<(f64, &str)> {
    let end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (num, unit) = value.split_at(end);
    if num.is_empty() || num.starts_with('.') || num.ends_with('.') {
        return None;
    }
    num.parse::<f64>().ok().map(|n| (n, unit.trim()))
}

fn parse_delay(value: &str) -> Result<Duration, ParseLinkSpecError> {
    let Some((n, unit)) = split_number(value) else {
        return err(format!(
            "delay `{value}` is not a number with a unit, e.g. 100ms"
        ));
    };
    let ns_per_unit = match unit.to_ascii_lowercase().as_str() {
        "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "" => return err(format!("delay `{value}` needs a unit: s, ms or us")),
        other => return err(format!("delay unit `{other}` unknown; use s, ms or us")),
    };
    let ns = (n * ns_per_unit).round();
    // An hour is far beyond any link worth emulating; the cap also keeps the nanosecond
    // arithmetic of the scheduler away from overflow.
    if ns > 3600e9 {
        return err(format!("delay `{value}` is over an hour"));
    }
    Ok(Duration::from_nanos(ns as u64))
}

fn parse_loss(value: &str) -> Result<f64, ParseLinkSpecError> {
    let (text, percent) = match value.strip_suffix('%') {
        Some(t) => (t.trim(), true),
        None => (value, false),
    };
    let Some((n, "")) = split_number(text) else {
        return err(format!(
            "loss `{value}` is not a percentage (9%) or a fraction (0.09)"
        ));
    };
    let fraction = if percent { n / 100.0 } else { n };
    if fraction > 1.0 {
        return if percent {
            err(format!("loss `{value}` is above 100%"))
        } else {
            err(format!(
                "loss `{value}` is above 1; write `{value}%` for a percentage"
            ))
        };
    }
    Ok(fraction)
}

fn parse_rate(value: &str) -> Result<u64, ParseLinkSpecError> {
    let Some((n, unit)) = split_number(value) else {
        return err(format!(
            "rate `{value}` is not a number with a unit, e.g. 100mbit"
        ));
    };
    // SI multiples as in tc. `bps` is bits per second here (tc reads it as bytes: avoid it there).
    let bits_per_unit = match unit.to_ascii_lowercase().as_str() {
        "bit" | "bps" => 1e0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "" => {
            return err(format!(
                "rate `{value}` needs a unit: bps, kbit, mbit or gbit"
            ));
        }
        other => {
            return err(format!(
                "rate unit `{other}` unknown; use bps, kbit, mbit or gbit (bits/s)"
            ));
        }
    };
    let bps = (n * bits_per_unit).round();
    if bps < 1.0 {
        return err(format!("rate `{value}` is below 1 bit/s"));
    }
    if bps > 1e13 {
        return err(format!("rate `{value}` is above 10 Tbit/s"));
    }
    Ok(bps as u64)
}

fn parse_count(key: &str, value: &str, min: u64, max: u64) -> Result<u64, ParseLinkSpecError> {
    match value.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => err(format!(
            "{key} `{value}` is not a whole number in {min}..={max}"
        )),
    }
}

/// A congestion control name as the kernel spells them (`cubic`, `bbr`, `reno`, `htcp`…):
/// whether this kernel offers it is checked when the link comes up.
fn parse_cc(value: &str) -> Result<String, ParseLinkSpecError> {
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    if value.is_empty() || value.len() > MAX_CC_NAME || !value.chars().all(valid) {
        return err(format!(
            "cc `{value}` is not a congestion control name (1..={MAX_CC_NAME} of a-z, 0-9, _; \
             e.g. cubic, bbr; see /proc/sys/net/ipv4/tcp_available_congestion_control)"
        ));
    }
    Ok(value.to_string())
}

/// Writes a fraction with at most six decimals and no trailing zeros, so `0.09 * 100` prints as
/// `9`, not `9.000000000000002`.
fn short_decimal(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

impl fmt::Display for LinkSpec {
    /// Writes the canonical text: `delay` and `loss` always, the rest only when not default, each
    /// in the largest unit that is exact, so that parsing it back gives the same spec.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.delay.as_nanos();
        let delay = if ns.is_multiple_of(1_000_000_000) {
            format!("{}s", ns / 1_000_000_000)
        } else if ns.is_multiple_of(1_000_000) {
            format!("{}ms", ns / 1_000_000)
        } else {
            format!("{}us", short_decimal(ns as f64 / 1e3))
        };
        write!(
            f,
            "delay={delay},loss={}%",
            short_decimal(self.loss * 100.0)
        )?;
        if let Some(bps) = self.rate_bps {
            let rate = if bps.is_multiple_of(1_000_000_000) {
                format!("{}gbit", bps / 1_000_000_000)
            } else if bps.is_multiple_of(1_000_000) {
                format!("{}mbit", bps / 1_000_000)
            } else if bps.is_multiple_of(1_000) {
                format!("{}kbit", bps / 1_000)
            } else {
                format!("{bps}bps")
            };
            write!(f, ",rate={rate}")?;
        }
        if self.queue_packets != DEFAULT_QUEUE_PACKETS {
            write!(f, ",queue={}", self.queue_packets)?;
        }
        if self.mtu != DEFAULT_MTU {
            write!(f, ",mtu={}", self.mtu)?;
        }
        if let Some(cc) = &self.cc {
            write!(f, ",cc={cc}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> LinkSpec {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn error(s: &str) -> String {
        s.parse::<LinkSpec>().unwrap_err().to_string()
    }

    #[test]
    fn parses_the_bench_rows() {
        let s = parse("delay=100ms,loss=9%");
        assert_eq!(s.delay, Duration::from_millis(100));
        assert!((s.loss - 0.09).abs() < 1e-12);
        assert_eq!(s.rate_bps, None);
        assert_eq!(s.queue_packets, DEFAULT_QUEUE_PACKETS);
        assert_eq!(s.mtu, DEFAULT_MTU);
        assert_eq!(s.cc, None);

        let s = parse("delay=100ms,loss=9%,cc=cubic");
        assert_eq!(s.cc.as_deref(), Some("cubic"));
        assert_eq!(s.delay, Duration::from_millis(100));
        assert_eq!(parse("cc=bbr, delay=100ms").cc.as_deref(), Some("bbr"));
        assert_eq!(parse("cc = htcp").cc.as_deref(), Some("htcp"));

        let s = parse("delay=1s, loss=0.25 ,rate=100mbit,queue=50,mtu=1500");
        assert_eq!(s.delay, Duration::from_secs(1));
        assert_eq!(s.loss, 0.25);
        assert_eq!(s.rate_bps, Some(100_000_000));
        assert_eq!(s.queue_packets, 50);
        assert_eq!(s.mtu, 1500);
    }

    #[test]
    fn units() {
        assert_eq!(parse("delay=250us").delay, Duration::from_micros(250));
        assert_eq!(parse("delay=1.5ms").delay, Duration::from_micros(1500));
        assert_eq!(parse("delay=0ms").delay, Duration::ZERO);
        assert_eq!(parse("loss=0").loss, 0.0);
        assert_eq!(parse("loss=100%").loss, 1.0);
        assert_eq!(parse("loss=0.5%").loss, 0.005);
        assert_eq!(parse("rate=64kbit").rate_bps, Some(64_000));
        assert_eq!(parse("rate=1.5gbit").rate_bps, Some(1_500_000_000));
        assert_eq!(parse("rate=12345bps").rate_bps, Some(12_345));
        assert_eq!(parse("rate=10Mbit").rate_bps, Some(10_000_000));
    }

    #[test]
    fn clear_errors() {
        assert!(error("").contains("empty"));
        assert!(error("delay=100").contains("needs a unit"));
        assert!(error("delay=100min").contains("unit `min` unknown"));
        assert!(error("delay=-5ms").contains("not a number"));
        assert!(error("loss=9").contains("write `9%`"));
        assert!(error("loss=120%").contains("above 100%"));
        assert!(error("loss=abc").contains("percentage"));
        assert!(error("rate=100").contains("needs a unit"));
        assert!(error("rate=100mbps").contains("unit `mbps` unknown"));
        assert!(error("rate=0mbit").contains("below 1"));
        assert!(error("queue=0").contains("1..="));
        assert!(error("queue=100001").contains("1..=100000"));
        assert!(error("mtu=100").contains("576..=65535"));
        assert!(error("jitter=5ms").contains("unknown key `jitter`"));
        assert!(error("delay=5ms,delay=6ms").contains("twice"));
        assert!(error("delay").contains("key=value"));
        assert!(error("cc=").contains("not a congestion control name"));
        assert!(error("cc=BBR").contains("a-z"));
        assert!(error("cc=../bbr").contains("not a congestion control name"));
        assert!(error("cc=bbr cubic").contains("not a congestion control name"));
        assert!(error("cc=abcdefghijklmnop").contains("1..=15"));
        assert!(error("cc=bbr,cc=cubic").contains("twice"));
        assert!(error("congestion=bbr").contains("known: delay, loss, rate, queue, mtu, cc"));
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "delay=100ms,loss=9%",
            "delay=0ms,loss=0%",
            "delay=2s,loss=0.5%,rate=100mbit,queue=64",
            "delay=1500us,loss=100%,rate=12345bps,mtu=1500",
            "delay=1.5us,loss=12.345%,rate=3kbit",
            "delay=10ms,loss=0%,rate=10gbit",
            "delay=100ms,loss=9%,cc=cubic",
            "delay=100ms,loss=9%,rate=100mbit,mtu=9000,cc=bbr",
        ] {
            let spec = parse(text);
            let shown = spec.to_string();
            assert_eq!(parse(&shown), spec, "{text} -> {shown}");
        }
        assert_eq!(
            parse("loss=0.09,delay=0.1s").to_string(),
            "delay=100ms,loss=9%"
        );
        assert_eq!(parse("delay=0ms").to_string(), "delay=0s,loss=0%");
        assert_eq!(
            parse("cc=bbr,loss=9%,delay=100ms").to_string(),
            "delay=100ms,loss=9%,cc=bbr"
        );
    }
}

impl LinkSpec {
    /// The per-direction drop probability whose round trip loses `loss`: 1 - sqrt(1 - loss).
    pub fn loss_each_way(&self) -> f64 {
        1.0 - (1.0 - self.loss.clamp(0.0, 1.0)).sqrt()
    }
}

#[cfg(test)]
mod round_trip_tests {
    use super::LinkSpec;

    #[test]
    fn loss_is_round_trip() {
        let s: LinkSpec = "delay=100ms,loss=9%".parse().unwrap();
        let each: f64 = s.loss_each_way();
        assert!((1.0 - (1.0 - each) * (1.0 - each) - 0.09).abs() < 1e-12);
        let none: LinkSpec = "loss=0".parse().unwrap();
        assert_eq!(none.loss_each_way(), 0.0);
    }
}
