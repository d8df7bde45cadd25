//! results.md: the run written up for a person reading it on GitHub or in an editor.

use std::fmt::Write;

use crate::model::{BenchRun, Row, Stat};

use super::format::{self, impl_label, kib_to_mib, measured, median_range, num};
use super::layout::{self, ran};

/// The dash between min and max: GitHub renders an en dash, and results.md is not a terminal.
const DASH: &str = "–";

pub fn markdown(run: &BenchRun) -> String {
    let mut md = String::new();
    // `write!` into a String cannot fail; the results are ignored with `let _`.
    let _ = writeln!(md, "# Skiff bench results\n");
    let _ = writeln!(md, "Run started {} (UTC).\n", esc(&run.started));
    options(&mut md, run);
    machine(&mut md, run);
    binaries(&mut md, run);
    results(&mut md, run);
    md
}

fn options(md: &mut String, run: &BenchRun) {
    let o = &run.options;
    let _ = writeln!(md, "## Options\n");
    let mut item = |k: &str, v: String| {
        let _ = writeln!(md, "- {k}: {}", esc(&v));
    };
    if let Some(n) = o.size_bytes {
        item("size per run", format!("{} ({n} bytes)", format::bytes(n)));
    }
    if let Some(s) = o.duration_secs {
        item("duration per run", format!("{} s", num(s)));
    }
    item("repeats", o.repeats.to_string());
    item("parallel streams", o.parallel.to_string());
    item("direction", o.direction.clone());
    item("payload", o.payload.clone());
    item(
        "emulated link",
        o.link.clone().unwrap_or_else(|| "none".into()),
    );
    item(
        "CPU limit",
        o.cpu_limit.clone().unwrap_or_else(|| "none".into()),
    );
    item(
        "TCP congestion control (every hop, every implementation)",
        o.tcp_congestion
            .clone()
            .unwrap_or_else(|| "not recorded".into()),
    );
    md.push('\n');
}

fn machine(md: &mut String, run: &BenchRun) {
    let m = &run.machine;
    let _ = writeln!(md, "## Machine\n");
    let _ = writeln!(md, "- CPU: {} ({} cores)", esc(&m.cpu_model), m.cores);
    let _ = writeln!(
        md,
        "- memory: {}",
        format::bytes(m.memory_kib.saturating_mul(1024))
    );
    let _ = writeln!(md, "- kernel: {}\n", esc(&m.kernel));
}

fn binaries(md: &mut String, run: &BenchRun) {
    let _ = writeln!(md, "## Binaries\n");
    if run.binaries.is_empty() {
        let _ = writeln!(md, "None recorded.\n");
        return;
    }
    let _ = writeln!(md, "| name | version | path |\n| --- | --- | --- |");
    for b in &run.binaries {
        let _ = writeln!(
            md,
            "| {} | {} | `{}` |",
            esc(&b.name),
            esc(&b.version),
            code(&b.path)
        );
    }
    md.push('\n');
}

fn results(md: &mut String, run: &BenchRun) {
    let layout = layout::layout(run);
    let rows = || layout.groups.iter().flat_map(|g| g.rows.iter());
    let idle = rows().any(|r| r.summary.idle_kib_per_conn.is_some());
    let latency = rows().any(|r| r.summary.latency.is_some());
    let rate = rows().find_map(|r| r.summary.rate);
    let error = rows().any(|r| r.error.is_some());
    let verdict = layout.groups.iter().any(|g| g.skiff_vs_peer.is_some());

    let _ = writeln!(md, "## Results\n");
    let _ = writeln!(
        md,
        "Each figure is `median (min{DASH}max)` over the repeats. Mbit/s counts 10^6 bits; \
         CPU-s/GiB is CPU-seconds spent per GiB moved; B is the proxy client, C the proxy \
         server. The repeats of a combination's implementations were taken in turns (A B A B \
         …). **Bold**: the fastest proxy in its combination, clearly: its slowest run beat \
         every other proxy's fastest, with enough runs that equals would do that under 5 % of \
         the time. \"Skiff vs best peer\" gives the ratio of medians and whether the \
         difference is clear, within noise (the ranges overlap), or from too few runs to say.\n"
    );
    if let Some(r) = rate {
        let _ = writeln!(
            md,
            "conn/s: short connections per second, {} clients at once, each one connect, a 1 \
             KiB request, a 1 KiB response and close, one run of them in each turn; CPU-s/1k \
             conn is the CPU-seconds B and C spent per 1000 of them; TTFB is from connect to \
             the response's first byte (the median of the runs' percentiles).\n",
            r.clients
        );
    }
    let _ = writeln!(
        md,
        "![throughput and CPU cost per implementation](chart.svg)\n"
    );

    let mut header = vec![
        "combination",
        "implementation",
        "Mbit/s",
        "CPU-s/GiB B",
        "CPU-s/GiB C",
        "peak RSS MiB B",
        "peak RSS MiB C",
    ];
    if verdict {
        header.extend(["Skiff vs best peer", "Skiff's CPU/GiB vs that peer"]);
    }
    if idle {
        header.extend(["idle KiB/conn B", "idle KiB/conn C"]);
    }
    if latency {
        header.extend([
            "latency p50 ms",
            "latency p99 ms",
            "CPU ms/conn B",
            "CPU ms/conn C",
        ]);
    }
    if rate.is_some() {
        header.extend([
            "conn/s",
            "CPU-s/1k conn B",
            "CPU-s/1k conn C",
            "TTFB p50 ms",
            "TTFB p99 ms",
        ]);
    }
    if error {
        header.push("error");
    }
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let align: Vec<&str> = header
        .iter()
        .map(|h| {
            if matches!(
                *h,
                "combination"
                    | "implementation"
                    | "error"
                    | "Skiff vs best peer"
                    | "Skiff's CPU/GiB vs that peer"
            ) {
                "---"
            } else {
                "---:"
            }
        })
        .collect();
    let _ = writeln!(md, "| {} |", align.join(" | "));

    for group in &layout.groups {
        let label = group.label(&layout);
        for (i, row) in group.rows.iter().enumerate() {
            let mut cells = vec![esc(&label), esc(impl_label(&row.implementation))];
            cells.extend(figures(row, group.best == Some(i) && group.best_clear));
            if verdict {
                let v = group
                    .skiff_vs_peer
                    .as_ref()
                    .filter(|_| row.implementation == layout::SKIFF);
                cells.push(v.map_or(String::new(), |v| esc(&v.describe("×"))));
                cells.push(v.map_or(String::new(), |v| esc(&v.describe_cpu("×"))));
            }
            if idle {
                let m = row.summary.idle_kib_per_conn.filter(|_| ran(row));
                cells.push(m.map_or("-".into(), |m| num(m.client_kib)));
                cells.push(m.map_or("-".into(), |m| num(m.server_kib)));
            }
            if latency {
                let l = row.summary.latency.filter(|_| ran(row));
                cells.push(l.map_or("-".into(), |l| num(l.p50_ms)));
                cells.push(l.map_or("-".into(), |l| num(l.p99_ms)));
                cells.push(l.map_or("-".into(), |l| num(l.client_cpu_ms)));
                cells.push(l.map_or("-".into(), |l| num(l.server_cpu_ms)));
            }
            if rate.is_some() {
                let r = row.summary.rate.filter(|_| ran(row));
                let spread = row.summary.rate_spread;
                cells.push(r.map_or("-".into(), |r| {
                    esc(&format::conn_rate(&r, spread.as_ref(), DASH))
                }));
                cells.push(r.map_or("-".into(), |r| {
                    let s = spread.and_then(|s| s.client_cpu_s_per_1k);
                    format::rate_cpu(r.client_cpu_s_per_1k, s, DASH)
                }));
                cells.push(r.map_or("-".into(), |r| {
                    let s = spread.and_then(|s| s.server_cpu_s_per_1k);
                    format::rate_cpu(r.server_cpu_s_per_1k, s, DASH)
                }));
                cells.push(r.map_or("-".into(), |r| num(r.ttfb_p50_ms)));
                cells.push(r.map_or("-".into(), |r| num(r.ttfb_p99_ms)));
            }
            if error {
                cells.push(row.error.as_deref().map_or(String::new(), esc));
            }
            let _ = writeln!(md, "| {} |", cells.join(" | "));
        }
    }
    if let Some(line) = format::skipped(&run.skipped) {
        let _ = writeln!(md, "\n{}", esc(&capitalized(&line)));
    }
}

/// `line` with its first letter upper-case, to start a paragraph.
fn capitalized(line: &str) -> String {
    let mut chars = line.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// The five `median (min–max)` cells every row has, "-" where there is nothing to show.
fn figures(row: &Row, best: bool) -> Vec<String> {
    let s = &row.summary;
    let ok = ran(row);
    let fig = |v: &Stat| {
        if ok && measured(v) {
            median_range(v, DASH)
        } else {
            "-".into()
        }
    };
    let mbps = fig(&s.mbps);
    vec![
        if best { format!("**{mbps}**") } else { mbps },
        fig(&s.client_cpu_per_gib),
        fig(&s.server_cpu_per_gib),
        fig(&kib_to_mib(&s.client_peak_rss_kib)),
        fig(&kib_to_mib(&s.server_peak_rss_kib)),
    ]
}

/// Text made safe for a markdown table cell or list item: `|` would end the cell, `<` could
/// open HTML, `*`, `_` and `` ` `` could start emphasis or code, and a newline would end the row.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '|' | '*' | '_' | '`' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

/// Text for inside a code span in a table: backslashes are literal there, but `|` still ends
/// the cell and a backtick would end the span.
fn code(s: &str) -> String {
    s.replace('|', "\\|")
        .replace('`', "'")
        .replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn table_line<'a>(md: &'a str, needle: &str) -> &'a str {
        md.lines()
            .find(|l| l.starts_with('|') && l.contains(needle))
            .unwrap_or_else(|| panic!("no table line with {needle:?} in\n{md}"))
    }

    #[test]
    fn has_title_options_machine_binaries_and_results() {
        let run = fixture::run();
        let md = markdown(&run);
        println!("{md}");
        assert!(md.starts_with("# Skiff bench results\n"));
        for section in ["## Options", "## Machine", "## Binaries", "## Results"] {
            assert!(md.contains(section), "{section}");
        }
        assert!(md.contains("- repeats: 3"));
        assert!(md.contains("- size per run: 1 GiB (1073741824 bytes)"));
        assert!(md.contains("- kernel: 6.1.0-test"));
        // The CPU model is escaped, not read as HTML.
        assert!(md.contains("AMD EPYC 7B13 &lt;test&gt; &amp; co"));
        assert!(md.contains("| xray | 1.8.24 | `/usr/local/bin/xray` |"));
        assert!(md.contains("| ss-rust | 1.21.2 |"));
    }

    #[test]
    fn results_show_median_min_max_and_bold_best() {
        let md = markdown(&fixture::run());
        let skiff = table_line(&md, "| vless-tcp | skiff |");
        assert!(skiff.contains("| **9400 (9100–9650)** |"), "{skiff}");
        // CPU B: median 0.8 of 0.78–0.85.
        assert!(skiff.contains("| 0.800 (0.780–0.850) |"), "{skiff}");
        // RSS the same every repeat: just the number.
        assert!(skiff.contains("| 10.0 | 20.0 |"), "{skiff}");
        assert!(
            skiff
                .contains("| 1.31× xray, clear win | B 0.50× clearly less, C 0.51× clearly less |"),
            "{skiff}"
        );
        // Best median without a clear win: not bold.
        let libev = table_line(&md, "| ss-aes-128-gcm | ss-libev |");
        assert!(libev.contains("| 6550 (6500–6600) |"), "{libev}");
        assert!(
            table_line(&md, "| ss-aes-128-gcm | skiff |").contains("0.92× ss-libev, too few runs")
        );
        assert!(md.contains("- TCP congestion control (every hop, every implementation): cubic"));
        // The failed row: dashes and its error, with the pipe escaped.
        let failed = table_line(&md, "| ss-aes-128-gcm | ss-rust |");
        assert!(failed.contains("| - | - |"), "{failed}");
        assert!(
            failed.ends_with("status 1 \\| bind: address in use |"),
            "{failed}"
        );
        // Every line of the results table has as many cells as its header.
        let cells = |l: &str| l.replace("\\|", "").matches('|').count();
        let mut lines = md.lines().skip_while(|l| !l.starts_with("| combination |"));
        let header = cells(lines.next().unwrap());
        let body: Vec<&str> = lines.take_while(|l| l.starts_with('|')).collect();
        assert_eq!(body.len(), 1 + fixture::run().rows.len());
        for l in body {
            assert_eq!(cells(l), header, "{l}");
        }
        // The skipped row is not in the table but named below it, with its reason, escaped.
        assert!(!md.contains("| ss-chacha20 |"));
        assert!(
            md.contains(
                "\nSkipped 1 row: ss-chacha20 with ss-libev (upload): not supported by this \
                 peer: no half-close \\| use -d download\n"
            ),
            "{md}"
        );
    }

    #[test]
    fn rate_columns_only_when_measured() {
        let md = markdown(&fixture::run());
        assert!(md.contains("| conn/s | CPU-s/1k conn B | CPU-s/1k conn C | TTFB p50 ms |"));
        assert!(md.contains("conn/s: short connections per second, 16 clients at once"));
        let skiff = table_line(&md, "| vless-tcp | skiff |");
        assert!(
            skiff.contains(
                "| 2500 (2000–2600) | 0.250 (0.200–0.300) | 0.600 (0.550–0.700) | 1.50 | 4.20 |"
            ),
            "{skiff}"
        );
        let raw = table_line(&md, "| no proxy |");
        assert!(
            raw.contains("| 9000 (2 failed) | - | - | 0.300 | 0.800 |"),
            "{raw}"
        );
        let xray = table_line(&md, "| vless-tcp | xray |");
        assert!(xray.contains("| - | - | - | - | - |"), "{xray}");

        let mut run = fixture::run();
        for r in &mut run.rows {
            r.summary.rate = None;
        }
        let md = markdown(&run);
        assert!(!md.contains("conn/s") && !md.contains("TTFB") && !md.contains("1k conn"));
    }

    #[test]
    fn escapes_markdown_specials() {
        assert_eq!(esc("a|b*c_d<e>"), "a\\|b\\*c\\_d&lt;e&gt;");
        assert_eq!(esc("two\nlines"), "two lines");
    }
}
