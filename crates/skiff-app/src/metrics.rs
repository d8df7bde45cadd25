//! The `metrics` endpoint (Xray's `metrics` object with `listen`): HTTP/1.1 with hyper on a
//! TCP listener. `GET /metrics` answers the Prometheus text exposition format (version 0.0.4),
//! `GET /debug/vars` Xray's expvar JSON (`{"stats": {"inbound": {TAG: {"uplink": N, …}}, …}}`);
//! anything else 404. The rendering is sans-IO ([`TrafficLines`], [`render_prometheus`],
//! [`render_debug_vars`]):
//! counters and gauges in, text out.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use skiff_config::MetricsPlan;
use skiff_core::stats::{Counter, Stats};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

/// What the endpoint reads on each request: the live counters and the connection cap's count.
pub struct Source {
    pub stats: Arc<Stats>,
    pub permits: Arc<Semaphore>,
    pub max_connections: usize,
    pub accepted: Arc<AtomicU64>,
    /// The process's arguments, for `/debug/vars`' `cmdline` (as Go's expvar has it).
    pub cmdline: Vec<String>,
    /// `/metrics`' counter lines, kept between scrapes.
    pub traffic: std::sync::Mutex<TrafficLines>,
}

/// The values beside the traffic counters, read at the time of a scrape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// TCP connections being served now, all inbounds together (no per-inbound count is kept).
    pub open_connections: u64,
    /// TCP connections accepted since start, all inbounds together.
    pub accepted_connections: u64,
    /// Bytes the relay moved with splice(2) and through user-space buffers.
    pub spliced_bytes: u64,
    pub copied_bytes: u64,
    /// From /proc/self (None where there is no procfs).
    pub resident_memory_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    /// Each user with an online map (`statsUserOnline`) and how many distinct IPs it is
    /// connected from now, by email.
    pub online_users: Vec<(String, u64)>,
    /// Failed inbound handshakes by reason (`bad_auth`, `replay`, `timeout`, `fallback`,
    /// `rejected`, `other`).
    pub handshake_failures: Vec<(&'static str, u64)>,
    /// Connections being served now by inbound tag, and by user email (users with none are
    /// left out).
    pub inbound_connections: Vec<(Arc<str>, u64)>,
    pub user_connections: Vec<(Arc<str>, u64)>,
}

const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";
/// Concurrent scrape connections; more wait in the listen backlog.
const MAX_SCRAPERS: usize = 16;
/// A connection (keep-alive included) is closed after this long, and a request's head must
/// arrive within HEADER_TIMEOUT.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `plan.listen` (failing start when it cannot) and serves there until `shutdown`.
pub async fn start(
    plan: &MetricsPlan,
    source: Source,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<JoinHandle<()>> {
    let addr = plan.listen;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("metrics: cannot listen on {addr}: {e}")))?;
    info!(
        "metrics listening on {} (/metrics, /debug/vars)",
        listener.local_addr()?
    );
    let source = Arc::new(source);
    let scrapers = Arc::new(Semaphore::new(MAX_SCRAPERS));
    Ok(tokio::spawn(async move {
        loop {
            let permit = tokio::select! {
                _ = shutdown.changed() => return,
                permit = scrapers.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => return,
                },
            };
            let stream = tokio::select! {
                _ = shutdown.changed() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of descriptors and the like: wait instead of spinning.
                        warn!("metrics: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let source = source.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let response = respond(&source, request.method(), request.uri().path());
                    async move { Ok::<_, Infallible>(response) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service);
                // A connection past its lifetime is dropped (closed); errors are the client's.
                if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_LIFETIME, connection).await {
                    debug!("metrics: connection ended: {e}");
                }
            });
        }
    }))
}

fn respond(source: &Source, method: &Method, path: &str) -> Response<Full<Bytes>> {
    let (content_type, body) = match (method, path) {
        (&Method::GET, "/metrics") => {
            let gauges = gauges(source);
            let mut traffic = source
                .traffic
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            traffic.refresh(&source.stats);
            (
                PROMETHEUS_CONTENT_TYPE,
                render_prometheus(&traffic, &gauges),
            )
        }
        (&Method::GET, "/debug/vars") => (
            JSON_CONTENT_TYPE,
            source
                .stats
                .visit(|counters| render_debug_vars(counters, &source.cmdline)),
        ),
        _ => {
            let mut response =
                Response::new(Full::new(Bytes::from_static(b"404 page not found\n")));
            *response.status_mut() = StatusCode::NOT_FOUND;
            return response;
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn gauges(source: &Source) -> Gauges {
    let stats = &source.stats;
    Gauges {
        open_connections: (source.max_connections - source.permits.available_permits()) as u64,
        accepted_connections: source.accepted.load(Ordering::Relaxed),
        spliced_bytes: stats.spliced().get(),
        copied_bytes: stats.copied().get(),
        resident_memory_bytes: resident_memory_bytes(),
        open_fds: open_fds(),
        handshake_failures: stats.handshake_failures().read().to_vec(),
        inbound_connections: stats.live().inbounds(),
        user_connections: stats.live().users_connected(),
        online_users: stats
            .online()
            .all()
            .into_iter()
            .map(|(name, map)| {
                let email = name
                    .strip_prefix("user>>>")
                    .and_then(|n| n.strip_suffix(">>>online"))
                    .unwrap_or(&name);
                (email.to_owned(), map.count() as u64)
            })
            .collect(),
    }
}

/// A gauge family with one label, a line per value; the family is left out when empty.
fn labelled_gauge(
    out: &mut String,
    name: &str,
    help: &str,
    label: &str,
    values: &[(Arc<str>, u64)],
) {
    if values.is_empty() {
        return;
    }
    family(out, name, "gauge", help);
    for (value_name, value) in values {
        out.push_str(name);
        out.push('{');
        out.push_str(label);
        out.push_str("=\"");
        escape_label(out, value_name);
        out.push_str("\"} ");
        push_u64(out, *value);
        out.push('\n');
    }
}

/// Resident set size: the second field of /proc/self/statm, in pages.
fn resident_memory_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().map(|page| pages * page)
}

/// Entries of /proc/self/fd (the one reading it included, as Prometheus' Go client counts).
fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// One of Xray's traffic counter names, `KIND>>>NAME>>>traffic>>>DIRECTION`, in parts.
fn traffic_parts(name: &str) -> Option<(&str, &str, &str)> {
    let mut parts = name.split(">>>");
    let (kind, who, what, direction) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && what == "traffic").then_some((kind, who, direction))
}

/// The traffic counters' lines of the Prometheus text, each line's text up to its value made
/// once per counter: at 10 000 users a scrape then copies 20 000 prepared strings and writes
/// 20 000 numbers, instead of splitting and escaping every name again. Remade when a counter
/// has been created since (the registry's generation says so).
#[derive(Default)]
pub struct TrafficLines {
    /// The registry's generation these lines were made at; None before the first.
    generation: Option<u64>,
    /// Every line's text up to its value, one after another in the order they are listed
    /// (sorted, so a scrape lists the counters in a stable order): one block to copy from
    /// rather than 20 000 small ones.
    text: String,
    /// Per line: where its text ends in `text`, and its counter.
    ends: Vec<(usize, Arc<Counter>)>,
}

impl TrafficLines {
    /// Brings the lines up to date with `stats`' counters (a no-op when none was created).
    pub fn refresh(&mut self, stats: &Stats) {
        // Read before the counters: one created meanwhile makes the next refresh look again.
        let generation = stats.generation();
        if self.generation == Some(generation) {
            return;
        }
        let mut lines: Vec<(String, Arc<Counter>)> = stats.visit_counters(|counters| {
            counters
                .filter_map(|(name, counter)| {
                    let (kind, who, direction) = traffic_parts(name)?;
                    let mut line = String::with_capacity(64 + name.len());
                    line.push_str("skiff_traffic_bytes_total{kind=\"");
                    escape_label(&mut line, kind);
                    line.push_str("\",name=\"");
                    escape_label(&mut line, who);
                    line.push_str("\",direction=\"");
                    escape_label(&mut line, direction);
                    line.push_str("\"} ");
                    Some((line, counter.clone()))
                })
                .collect()
        });
        lines.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        self.text.clear();
        self.ends.clear();
        for (line, counter) in lines {
            self.text.push_str(&line);
            self.ends.push((self.text.len(), counter));
        }
        self.generation = Some(generation);
    }

    /// The bytes the counters' lines take: their text, and room for each value.
    fn text_len(&self) -> usize {
        self.text.len() + self.ends.len() * 21
    }

    /// Each line's text up to its value, and its counter.
    fn lines(&self) -> impl Iterator<Item = (&str, &Counter)> {
        let mut start = 0;
        self.ends.iter().map(move |(end, counter)| {
            let text = self.text.get(start..*end).unwrap_or_default();
            start = *end;
            (text, &**counter)
        })
    }
}

/// The Prometheus text exposition format (0.0.4) of the traffic counters (Xray's names,
/// others are left out; see [`TrafficLines`]) and `gauges`: every family with its HELP and
/// TYPE lines, label values escaped.
pub fn render_prometheus(traffic: &TrafficLines, gauges: &Gauges) -> String {
    let mut out = String::with_capacity(2048 + traffic.text_len());
    family(
        &mut out,
        "skiff_traffic_bytes_total",
        "counter",
        "Bytes carried, by Xray's traffic counters (kind inbound, outbound or user; name the tag or email; direction uplink or downlink).",
    );
    for (text, counter) in traffic.lines() {
        out.push_str(text);
        push_u64(&mut out, counter.get());
        out.push('\n');
    }
    family(
        &mut out,
        "skiff_handshake_failures_total",
        "counter",
        "Inbound connections whose handshake failed, by why: bad_auth, replay, timeout, fallback (handed to a fallback), rejected (closed, no fallback), other.",
    );
    for (reason, count) in &gauges.handshake_failures {
        let _ = writeln!(
            out,
            "skiff_handshake_failures_total{{reason=\"{reason}\"}} {count}"
        );
    }
    labelled_gauge(
        &mut out,
        "skiff_inbound_connections_open",
        "Connections being served now by inbound, from accept to close (a gRPC, XHTTP or mux tunnel counts as one; UDP is not counted).",
        "inbound",
        &gauges.inbound_connections,
    );
    labelled_gauge(
        &mut out,
        "skiff_user_connections_open",
        "Connections being served now by user, from authentication to close; users with none are not listed.",
        "user",
        &gauges.user_connections,
    );
    if !gauges.online_users.is_empty() {
        family(
            &mut out,
            "skiff_user_online_ips",
            "gauge",
            "Distinct client IPs a user is connected from now (statsUserOnline; 127.0.0.1 and ::1 are not counted, as in Xray).",
        );
        for (email, ips) in &gauges.online_users {
            out.push_str("skiff_user_online_ips{name=\"");
            escape_label(&mut out, email);
            out.push_str("\"} ");
            push_u64(&mut out, *ips);
            out.push('\n');
        }
    }
    family(
        &mut out,
        "skiff_relay_bytes_total",
        "counter",
        "Bytes the relay moved, by how: splice(2) in the kernel or copy through user space.",
    );
    for (how, value) in [
        ("splice", gauges.spliced_bytes),
        ("copy", gauges.copied_bytes),
    ] {
        let _ = writeln!(out, "skiff_relay_bytes_total{{path=\"{how}\"}} {value}");
    }
    family(
        &mut out,
        "skiff_connections_open",
        "gauge",
        "TCP connections being served now, all inbounds together.",
    );
    let _ = writeln!(out, "skiff_connections_open {}", gauges.open_connections);
    family(
        &mut out,
        "skiff_connections_accepted_total",
        "counter",
        "TCP connections accepted since start, all inbounds together.",
    );
    let _ = writeln!(
        out,
        "skiff_connections_accepted_total {}",
        gauges.accepted_connections
    );
    if let Some(rss) = gauges.resident_memory_bytes {
        family(
            &mut out,
            "skiff_process_resident_memory_bytes",
            "gauge",
            "Resident memory size of the process in bytes.",
        );
        let _ = writeln!(out, "skiff_process_resident_memory_bytes {rss}");
    }
    if let Some(fds) = gauges.open_fds {
        family(
            &mut out,
            "skiff_process_open_fds",
            "gauge",
            "Open file descriptors of the process.",
        );
        let _ = writeln!(out, "skiff_process_open_fds {fds}");
    }
    family(
        &mut out,
        "skiff_build_info",
        "gauge",
        "Always 1; the version is in its label.",
    );
    out.push_str("skiff_build_info{version=\"");
    escape_label(&mut out, env!("CARGO_PKG_VERSION"));
    out.push_str("\"} 1\n");
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value as the text format quotes it: backslash, double quote and line feed escaped.
fn escape_label(out: &mut String, value: &str) {
    if !value.contains(['\\', '"', '\n']) {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// `n` in decimal, two digits per division (a scrape writes 20 000 of them at 10 000 users).
fn push_u64(out: &mut String, mut n: u64) {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + n as u8;
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or("0"));
}

/// Xray's `/debug/vars` body: `{"cmdline": [ARG…], "observatory": null, "stats": {"inbound":
/// {TAG: {DIRECTION: N}}, "outbound": {…}, "user": {EMAIL: {…}}}}`. As in Xray (app/metrics),
/// a counter name is split at `>>>` and one of fewer than four parts is left out; the three
/// kinds are always there, empty or not. `observatory` is null, as in Xray without one; Go's
/// `memstats` has no counterpart.
pub fn render_debug_vars(
    counters: &mut dyn Iterator<Item = (&str, u64)>,
    cmdline: &[String],
) -> String {
    use serde_json::{Map, Value};
    let mut kinds = Map::new();
    for kind in ["inbound", "outbound", "user"] {
        kinds.insert(kind.to_owned(), Value::Object(Map::new()));
    }
    for (name, value) in counters {
        let parts: Vec<&str> = name.split(">>>").collect();
        if parts.len() < 4 {
            continue;
        }
        let (kind, who, direction) = (parts[0], parts[1], parts[3]);
        let items = kinds
            .entry(kind)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(items) = items {
            let item = items
                .entry(who)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(item) = item {
                item.insert(direction.to_owned(), Value::from(value));
            }
        }
    }
    let mut vars = Map::new();
    vars.insert("cmdline".to_owned(), Value::from(cmdline.to_vec()));
    vars.insert("observatory".to_owned(), Value::Null);
    vars.insert("stats".to_owned(), Value::Object(kinds));
    Value::Object(vars).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gauges() -> Gauges {
        Gauges {
            open_connections: 3,
            accepted_connections: 9,
            spliced_bytes: 100,
            copied_bytes: 20,
            resident_memory_bytes: Some(4096),
            open_fds: Some(12),
            online_users: vec![("a@x".into(), 2)],
            handshake_failures: vec![("replay", 4), ("other", 0)],
            inbound_connections: vec![(Arc::from("in"), 2)],
            user_connections: vec![(Arc::from("a\"b"), 1)],
        }
    }

    #[test]
    fn prometheus_text_has_every_family_and_escapes_labels() {
        let stats = Stats::new();
        for (name, value) in [
            ("inbound>>>in>>>traffic>>>uplink", 5),
            ("user>>>a\"b\\c\nd>>>traffic>>>downlink", 7),
            ("user>>>x>>>online", 1),
        ] {
            stats.counter(name).add(value);
        }
        let mut traffic = TrafficLines::default();
        traffic.refresh(&stats);
        let text = render_prometheus(&traffic, &gauges());
        assert!(text.contains(
            "skiff_traffic_bytes_total{kind=\"inbound\",name=\"in\",direction=\"uplink\"} 5\n"
        ));
        assert!(text.contains(
            "skiff_traffic_bytes_total{kind=\"user\",name=\"a\\\"b\\\\c\\nd\",direction=\"downlink\"} 7\n"
        ));
        // The counters' names never make a family of their own; online users come from
        // the gauges.
        assert!(!text.contains("name=\"x\""), "{text}");
        for line in [
            "# TYPE skiff_traffic_bytes_total counter",
            "skiff_relay_bytes_total{path=\"splice\"} 100",
            "skiff_relay_bytes_total{path=\"copy\"} 20",
            "skiff_connections_open 3",
            "skiff_connections_accepted_total 9",
            "skiff_process_resident_memory_bytes 4096",
            "skiff_process_open_fds 12",
            "# TYPE skiff_user_online_ips gauge",
            "skiff_user_online_ips{name=\"a@x\"} 2",
            "skiff_handshake_failures_total{reason=\"replay\"} 4",
            "skiff_handshake_failures_total{reason=\"other\"} 0",
            "# TYPE skiff_inbound_connections_open gauge",
            "skiff_inbound_connections_open{inbound=\"in\"} 2",
            "skiff_user_connections_open{user=\"a\\\"b\"} 1",
            &format!(
                "skiff_build_info{{version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            ),
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in {text}");
        }
        // Every sample's family has HELP and TYPE before it.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(text.contains(&format!("# HELP {name} ")), "{name}");
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}");
        }
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn numbers_are_written_whole() {
        for n in [
            0,
            9,
            10,
            11,
            99,
            100,
            101,
            999,
            1000,
            12345,
            1234567890,
            u64::MAX,
        ] {
            let mut s = String::new();
            push_u64(&mut s, n);
            assert_eq!(s, n.to_string());
        }
    }

    #[test]
    fn debug_vars_have_xrays_shape() {
        let counters = [
            ("inbound>>>in>>>traffic>>>uplink", 5),
            ("inbound>>>in>>>traffic>>>downlink", 6),
            ("user>>>a@b>>>traffic>>>uplink", 7),
            ("relay>>>spliced", 8),
        ];
        let json: serde_json::Value = serde_json::from_str(&render_debug_vars(
            &mut counters.iter().copied(),
            &["skiff".into()],
        ))
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"cmdline": ["skiff"], "observatory": null, "stats": {
                "inbound": {"in": {"uplink": 5, "downlink": 6}},
                "outbound": {},
                "user": {"a@b": {"uplink": 7}},
            }})
        );
    }

    #[test]
    fn the_stats_registry_feeds_the_renderers() {
        let stats = Stats::new();
        stats
            .counter("outbound>>>direct>>>traffic>>>downlink")
            .add(42);
        let mut traffic = TrafficLines::default();
        traffic.refresh(&stats);
        let text = render_prometheus(&traffic, &Gauges::default());
        assert!(text.contains("{kind=\"outbound\",name=\"direct\",direction=\"downlink\"} 42\n"));
        // Live values on every scrape; a counter created since is listed at the next one.
        stats
            .counter("outbound>>>direct>>>traffic>>>downlink")
            .add(1);
        stats.counter("user>>>new@x>>>traffic>>>uplink").add(3);
        traffic.refresh(&stats);
        let text = render_prometheus(&traffic, &Gauges::default());
        assert!(text.contains("direction=\"downlink\"} 43\n"), "{text}");
        assert!(
            text.contains("{kind=\"user\",name=\"new@x\",direction=\"uplink\"} 3\n"),
            "{text}"
        );
        let json = stats.visit(|c| render_debug_vars(c, &[]));
        assert!(json.contains("\"direct\":{\"downlink\":43}"), "{json}");
    }
}
