//! The table `skiff bench` prints when it is done: one line per row, grouped by combination.

use std::io::IsTerminal;

use comfy_table::{Cell, CellAlignment, Table, presets};

use crate::model::{BenchRun, Row, Stat};

use super::format::{self, impl_label, kib_to_mib, measured, num};
use super::layout::{self, Layout, ran};

/// Which characters the table may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charset {
    /// Box drawing, ★ for the best row and – in ranges: for a terminal.
    Unicode,
    /// ASCII only: for a pipe, a log file or a terminal of unknown abilities.
    Ascii,
}

impl Charset {
    fn best_mark(self) -> &'static str {
        match self {
            Charset::Unicode => "★ ",
            Charset::Ascii => "* ",
        }
    }

    fn times(self) -> &'static str {
        match self {
            Charset::Unicode => "×",
            Charset::Ascii => "x",
        }
    }

    /// The fastest median, but not clearly ahead of the rest (see [`crate::verdict`]).
    fn noise_mark(self) -> &'static str {
        match self {
            Charset::Unicode => "≈ ",
            Charset::Ascii => "~ ",
        }
    }

    fn dash(self) -> &'static str {
        match self {
            Charset::Unicode => "–",
            Charset::Ascii => "-",
        }
    }
}

/// The table for stdout: Unicode when stdout is a terminal, ASCII when it goes elsewhere (a
/// log, CI output), where box drawing often arrives as mojibake.
pub fn terminal_table(run: &BenchRun) -> String {
    let charset = if std::io::stdout().is_terminal() {
        Charset::Unicode
    } else {
        Charset::Ascii
    };
    terminal_table_with(run, charset)
}

/// An error longer than this is cut in the table (results.json keeps all of it): one
/// failure must not make every line of the table wrap.
const MAX_ERROR_CHARS: usize = 60;

/// The table in the given charset: a header line (when, where, with what options), the table,
/// and a line that says what the marks and columns mean.
pub fn terminal_table_with(run: &BenchRun, charset: Charset) -> String {
    let layout = layout::layout(run);
    let cols = Columns::of(&layout);
    let mut table = Table::new();
    table.load_style(match charset {
        Charset::Unicode => presets::UTF8_FULL_CONDENSED,
        Charset::Ascii => presets::ASCII_FULL_CONDENSED,
    });
    table.set_header(cols.header(charset));
    for group in &layout.groups {
        let label = group.label(&layout);
        for (i, row) in group.rows.iter().enumerate() {
            // The combination only on its group's first line: the blank below it groups rows.
            let name = if i == 0 { label.as_str() } else { "" };
            let mark = match (group.best == Some(i), group.best_clear) {
                (false, _) => "",
                (true, true) => charset.best_mark(),
                (true, false) => charset.noise_mark(),
            };
            let verdict = group
                .skiff_vs_peer
                .as_ref()
                .filter(|_| row.implementation == layout::SKIFF)
                .map(|v| v.describe(charset.times()));
            table.add_row(cols.cells(name, row, mark, verdict, charset));
        }
    }
    // Every column after the implementation holds numbers; the error column is text.
    for (i, column) in table.column_iter_mut().enumerate() {
        if i >= 2 && !(cols.error && i == cols.count() - 1) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = format!(
        "skiff bench, started {} on {}\noptions: {}\n",
        run.started,
        format::machine(&run.machine),
        format::options(&run.options),
    );
    out.push_str(&table.trim_fmt());
    out.push('\n');
    out.push_str(&format!(
        "{}= best Mbit/s in its combination, clearly: every run beat every run of the others, \
         with enough runs that chance would do it under 5 % of the time; {}= best median, \
         within noise. Mbit/s is the median of the repeats, taken in turns; \
         B = proxy client, C = proxy server; CPU-s/GiB = CPU-seconds per GiB moved\n",
        charset.best_mark(),
        charset.noise_mark()
    ));
    if let Some(r) = layout
        .groups
        .iter()
        .flat_map(|g| g.rows.iter())
        .find_map(|r| r.summary.rate)
    {
        out.push_str(&format!(
            "conn/s = short connections per second ({} clients at once, each: connect, 1 KiB \
             each way, close); CPU-s/1k conn = CPU-seconds per 1000 of them; TTFB = connect \
             to the response's first byte\n",
            r.clients
        ));
    }
    out
}

/// Which of the optional columns this run needs: idle memory and latency are only measured
/// on request, and an error column in a run where nothing failed is noise.
struct Columns {
    /// Skiff against the best peer, where a group has both.
    verdict: bool,
    idle: bool,
    latency: bool,
    rate: bool,
    error: bool,
}

impl Columns {
    fn of(layout: &Layout<'_>) -> Columns {
        let rows = || layout.groups.iter().flat_map(|g| g.rows.iter());
        Columns {
            verdict: layout.groups.iter().any(|g| g.skiff_vs_peer.is_some()),
            idle: rows().any(|r| r.summary.idle_kib_per_conn.is_some()),
            latency: rows().any(|r| r.summary.latency.is_some()),
            rate: rows().any(|r| r.summary.rate.is_some()),
            error: rows().any(|r| r.error.is_some()),
        }
    }

    fn count(&self) -> usize {
        7 + usize::from(self.verdict)
            + usize::from(self.idle)
            + 2 * usize::from(self.latency)
            + 3 * usize::from(self.rate)
            + usize::from(self.error)
    }

    /// B and C share a column where they come as a pair, to keep the table within a
    /// terminal's width.
    fn header(&self, charset: Charset) -> Vec<String> {
        let mut h = vec![
            "combination".to_owned(),
            "implementation".to_owned(),
            "Mbit/s".to_owned(),
            format!("min{}max", charset.dash()),
            "CPU-s/GiB B".to_owned(),
            "CPU-s/GiB C".to_owned(),
            "peak RSS MiB B / C".to_owned(),
        ];
        if self.verdict {
            h.push("Skiff vs best peer".to_owned());
        }
        if self.idle {
            h.push("idle KiB/conn B / C".to_owned());
        }
        if self.latency {
            h.push("latency ms p50 / p99".to_owned());
            h.push("CPU ms/conn B / C".to_owned());
        }
        if self.rate {
            h.push("conn/s".to_owned());
            h.push("CPU-s/1k conn B / C".to_owned());
            h.push("TTFB ms p50 / p99".to_owned());
        }
        if self.error {
            h.push("error".to_owned());
        }
        h
    }

    fn cells(
        &self,
        name: &str,
        row: &Row,
        mark: &str,
        verdict: Option<String>,
        charset: Charset,
    ) -> Vec<Cell> {
        let s = &row.summary;
        let ok = ran(row);
        // Only a row that ran has figures; a stat never measured (the raw row's B and C) is "-".
        let fig = |v: &Stat| {
            if ok && measured(v) {
                num(v.median)
            } else {
                "-".into()
            }
        };
        let pair = |b: String, c: String| {
            if b == "-" && c == "-" {
                b
            } else {
                format!("{b} / {c}")
            }
        };
        // The peak over the repeats: what the machine had to have free.
        let peak = |v: &Stat| {
            if ok && measured(v) {
                num(v.max)
            } else {
                "-".into()
            }
        };
        let mut c = vec![
            name.to_owned(),
            impl_label(&row.implementation).to_owned(),
            if ok {
                format!("{mark}{}", num(s.mbps.median))
            } else {
                "-".into()
            },
            if ok {
                format::range(&s.mbps, charset.dash())
            } else {
                "-".into()
            },
            fig(&s.client_cpu_per_gib),
            fig(&s.server_cpu_per_gib),
            pair(
                peak(&kib_to_mib(&s.client_peak_rss_kib)),
                peak(&kib_to_mib(&s.server_peak_rss_kib)),
            ),
        ];
        if self.verdict {
            c.push(verdict.unwrap_or_default());
        }
        if self.idle {
            let idle = s.idle_kib_per_conn.filter(|_| ok);
            c.push(idle.map_or("-".into(), |m| pair(num(m.client_kib), num(m.server_kib))));
        }
        if self.latency {
            let lat = s.latency.filter(|_| ok);
            c.push(lat.map_or("-".into(), |l| pair(num(l.p50_ms), num(l.p99_ms))));
            c.push(lat.map_or("-".into(), |l| {
                pair(num(l.client_cpu_ms), num(l.server_cpu_ms))
            }));
        }
        if self.rate {
            let rate = s.rate.filter(|_| ok);
            let spread = s.rate_spread;
            c.push(rate.map_or("-".into(), |r| {
                format::conn_rate(&r, spread.as_ref(), charset.dash())
            }));
            let opt = |v: Option<f64>| v.map_or("-".into(), num);
            c.push(rate.map_or("-".into(), |r| {
                pair(opt(r.client_cpu_s_per_1k), opt(r.server_cpu_s_per_1k))
            }));
            c.push(rate.map_or("-".into(), |r| pair(num(r.ttfb_p50_ms), num(r.ttfb_p99_ms))));
        }
        if self.error {
            c.push(row.error.as_deref().map_or(String::new(), short_error));
        }
        c.into_iter().map(Cell::new).collect()
    }
}

/// An error on one line and at most [`MAX_ERROR_CHARS`] characters.
fn short_error(e: &str) -> String {
    let one_line: String = e.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= MAX_ERROR_CHARS {
        one_line
    } else {
        let cut: String = one_line.chars().take(MAX_ERROR_CHARS - 3).collect();
        format!("{cut}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn line_of<'a>(table: &'a str, needle: &str) -> &'a str {
        table
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{table}"))
    }

    #[test]
    fn one_line_per_row_with_header_and_marks() {
        let run = fixture::run();
        let t = terminal_table_with(&run, Charset::Unicode);
        println!("{t}");
        assert!(t.starts_with("skiff bench, started 2025-06-01T12:00:00Z on AMD EPYC"));
        assert!(t.contains("kernel 6.1.0-test"));
        assert!(t.contains("options: 1 GiB per run, 3 repeats"));
        // Skiff is fastest in vless-tcp, clearly: median of 9100 … 9650, all above Xray's
        // 7000 … 7350 in five runs each, and v2ray's three.
        let skiff = line_of(&t, "vless-tcp");
        assert!(
            skiff.contains("skiff") && skiff.contains("★ 9400"),
            "{skiff}"
        );
        assert!(skiff.contains("1.31× xray, clear win"), "{skiff}");
        assert!(skiff.contains("9100–9650"), "{skiff}");
        // B 0.8 s/GiB and C 0.9 s/GiB; 10 MiB and 20 MiB; idle and latency present.
        assert!(
            skiff.contains("0.800") && skiff.contains("0.900"),
            "{skiff}"
        );
        assert!(skiff.contains("10.0 / 20.0"), "{skiff}");
        assert!(skiff.contains("9.50 / 11.5"), "{skiff}");
        assert!(skiff.contains("0.210 / 0.900"), "{skiff}");
        // Connection rate: 2500 conn/s (three runs, 2000–2600), B 0.25 and C 0.6 CPU-s per
        // 1000, TTFB 1.50 / 4.20 ms.
        assert!(skiff.contains("2500 (2000–2600)"), "{skiff}");
        assert!(skiff.contains("0.250 / 0.600"), "{skiff}");
        assert!(skiff.contains("1.50 / 4.20"), "{skiff}");
        assert!(t.contains("conn/s = short connections per second (16 clients"));
        // The raw row has no B or C to measure.
        let raw = line_of(&t, "no proxy");
        assert!(raw.contains("9000 (2 failed)"), "{raw}");
        assert!(raw.contains("0.300 / 0.800"), "{raw}");
        // ss-libev has the best median in its combination, but two runs each cannot show it
        // is more than chance: it gets the within-noise mark, and no one the star.
        assert!(line_of(&t, "≈ 6550").contains("ss-libev"));
        assert!(!t.contains("★ 6550"));
        let ss_skiff = line_of(&t, "ss-aes-128-gcm");
        assert!(!ss_skiff.contains('★') && !ss_skiff.contains('≈'));
        assert!(
            ss_skiff.contains("0.92× ss-libev, too few runs"),
            "{ss_skiff}"
        );
        // The failed row says why, on one line.
        let failed = line_of(&t, "ss-rust");
        assert!(failed.contains("server exited: status 1"), "{failed}");
        // Raw: throughput, but no proxy to measure.
        let raw = line_of(&t, "no proxy");
        assert!(raw.contains("40500") && raw.contains(" - "), "{raw}");
        // Every row, and the combination once per group.
        for r in &run.rows {
            assert!(t.contains(impl_label(&r.implementation)));
        }
        assert_eq!(t.matches("vless-tcp").count(), 1);
    }

    #[test]
    fn groups_come_raw_first_then_in_run_order() {
        let t = terminal_table_with(&fixture::run(), Charset::Ascii);
        let at = |s: &str| t.find(s).unwrap();
        assert!(at("no proxy") < at("vless-tcp"));
        assert!(at("vless-tcp") < at("ss-aes-128-gcm"));
        assert!(at("ss-aes-128-gcm") < at("tunnel"));
        // Skiff's line comes before the peers it is measured against.
        assert!(at("| skiff") < at("| v2ray"));
    }

    #[test]
    fn ascii_table_is_ascii() {
        let t = terminal_table_with(&fixture::run(), Charset::Ascii);
        println!("{t}");
        assert!(t.is_ascii(), "{t}");
        assert!(line_of(&t, "| skiff").contains("* 9400"));
    }

    #[test]
    fn optional_columns_appear_only_when_measured() {
        let mut run = fixture::run();
        for r in &mut run.rows {
            r.summary.idle_kib_per_conn = None;
            r.summary.latency = None;
            r.summary.rate = None;
            r.error = None;
        }
        let t = terminal_table_with(&run, Charset::Ascii);
        assert!(!t.contains("idle") && !t.contains("latency") && !t.contains("error"));
        assert!(!t.contains("conn/s") && !t.contains("TTFB") && !t.contains("1k conn"));
    }

    #[test]
    fn long_errors_are_cut_to_one_line() {
        let e = short_error(&format!("line one\nline two {}", "x".repeat(100)));
        assert!(!e.contains('\n'));
        assert_eq!(e.chars().count(), MAX_ERROR_CHARS);
        assert!(e.starts_with("line one line two") && e.ends_with("..."));
    }
}
