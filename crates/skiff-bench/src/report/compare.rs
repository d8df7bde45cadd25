//! Comparing two runs (say, before and after a change to the relay): which rows got faster or
//! cheaper, by how much, and which rows exist in only one of them.

use std::io::IsTerminal;

use comfy_table::{Cell, CellAlignment, Table, presets};

use crate::model::{BenchRun, Row, Stat};

use super::format::{self, impl_label, measured, num};
use super::layout::{self, ran};
use super::table::Charset;

/// A new/old ratio further than this from 1 is flagged: repeats on one machine typically agree
/// within a few percent, so smaller moves are more likely noise than change.
const THRESHOLD: f64 = 0.05;

/// The comparison for stdout: Unicode when stdout is a terminal, ASCII otherwise.
pub fn compare(old: &BenchRun, new: &BenchRun) -> String {
    let charset = if std::io::stdout().is_terminal() {
        Charset::Unicode
    } else {
        Charset::Ascii
    };
    compare_with(old, new, charset)
}

/// Two rows are the same measurement when all of these agree.
fn key(r: &Row) -> (&str, &str, &str, u32) {
    (&r.combination, &r.implementation, &r.direction, r.parallel)
}

/// The comparison in the given charset: a line per run, a warning when the runs differ in
/// machine or options, a table of the rows both runs have, then the rows only one has.
pub fn compare_with(old: &BenchRun, new: &BenchRun, charset: Charset) -> String {
    let mut out = String::new();
    for (name, run) in [("old", old), ("new", new)] {
        out.push_str(&format!(
            "{name}: started {} on {}; {}\n",
            run.started,
            format::machine(&run.machine),
            format::options(&run.options)
        ));
    }
    if format::machine(&old.machine) != format::machine(&new.machine) {
        out.push_str(
            "warning: the runs were on different machines; ratios compare unlike things\n",
        );
    }
    if format::options(&old.options) != format::options(&new.options) {
        out.push_str("warning: the runs used different options; ratios compare unlike things\n");
    }

    // Rows in the order the new run's reports show them.
    let new_layout = layout::layout(new);
    let new_rows: Vec<&Row> = new_layout
        .groups
        .iter()
        .flat_map(|g| g.rows.iter().copied())
        .collect();
    let old_rows: Vec<&Row> = layout::layout(old)
        .groups
        .iter()
        .flat_map(|g| g.rows.iter().copied())
        .collect();
    let find = |rows: &[&'_ Row], r: &Row| rows.iter().position(|o| key(o) == key(r));
    // Direction and parallel join the label only when the runs mix them.
    let all = || old.rows.iter().chain(&new.rows);
    let first = all().next();
    let vary_dir = all().any(|r| Some(&r.direction) != first.map(|f| &f.direction));
    let vary_par = all().any(|r| Some(r.parallel) != first.map(|f| f.parallel));
    let label = |r: &Row| {
        let mut s = r.combination.clone();
        if vary_dir {
            s.push_str(&format!(" {}", r.direction));
        }
        if vary_par {
            s.push_str(&format!(" ×{}", r.parallel));
        }
        s
    };

    let mut table = Table::new();
    table.load_style(match charset {
        Charset::Unicode => presets::UTF8_FULL_CONDENSED,
        Charset::Ascii => presets::ASCII_FULL_CONDENSED,
    });
    table.set_header(vec![
        "combination",
        "implementation",
        "Mbit/s old",
        "Mbit/s new",
        "Mbit/s new/old",
        "CPU-s/GiB B new/old",
        "CPU-s/GiB C new/old",
        "beyond ±5%",
    ]);
    let mut both = 0;
    for n in &new_rows {
        let Some(o) = find(&old_rows, n).map(|i| old_rows[i]) else {
            continue;
        };
        both += 1;
        table.add_row(compared(&label(n), o, n));
    }
    for (i, column) in table.column_iter_mut().enumerate() {
        if (2..7).contains(&i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    if both > 0 {
        let mut t = table.trim_fmt();
        if charset == Charset::Ascii {
            t = t.replace('±', "+-");
        }
        out.push_str(&t);
        out.push('\n');
    } else {
        out.push_str("no row is in both runs\n");
    }

    for (side, this, other) in [("old", &old_rows, &new_rows), ("new", &new_rows, &old_rows)] {
        let only: Vec<&&Row> = this.iter().filter(|r| find(other, r).is_none()).collect();
        if !only.is_empty() {
            out.push_str(&format!("only in {side}:\n"));
            for r in only {
                let failed = if ran(r) { "" } else { " (failed)" };
                out.push_str(&format!(
                    "  {} / {} ({}, parallel {}){failed}\n",
                    r.combination,
                    impl_label(&r.implementation),
                    r.direction,
                    r.parallel
                ));
            }
        }
    }
    out
}

/// A compared figure: its name, where a row keeps it, and whether more of it is better.
type Metric = (&'static str, fn(&Row) -> &Stat, bool);

/// One line of the table: the old and new throughput, the three ratios, and what moved.
fn compared(label: &str, old: &Row, new: &Row) -> Vec<Cell> {
    let mbps = |r: &Row| {
        if ran(r) {
            num(r.summary.mbps.median)
        } else {
            "failed".into()
        }
    };
    let mut cells = vec![
        label.to_owned(),
        impl_label(&new.implementation).to_owned(),
        mbps(old),
        mbps(new),
    ];
    let mut flags = Vec::new();
    if !ran(old) || !ran(new) {
        cells.extend(["-".to_owned(), "-".to_owned(), "-".to_owned()]);
        flags.push(match (ran(old), ran(new)) {
            (false, false) => "failed in both".to_owned(),
            (false, true) => "failed in old only".to_owned(),
            _ => "failed in new only".to_owned(),
        });
    } else {
        // More Mbit/s is better; more CPU per GiB is worse.
        let metrics: [Metric; 3] = [
            ("Mbit/s", |r| &r.summary.mbps, true),
            ("CPU B", |r| &r.summary.client_cpu_per_gib, false),
            ("CPU C", |r| &r.summary.server_cpu_per_gib, false),
        ];
        for (name, get, higher_is_better) in metrics {
            match ratio(get(old), get(new)) {
                Some(x) => {
                    cells.push(format!("{x:.3} ({})", percent(x)));
                    if (x - 1.0).abs() > THRESHOLD {
                        let better = (x > 1.0) == higher_is_better;
                        let verdict = if better { "better" } else { "worse" };
                        flags.push(format!("{name} {} {verdict}", percent(x)));
                    }
                }
                None => cells.push("-".into()),
            }
        }
    }
    cells.push(flags.join(", "));
    cells.into_iter().map(Cell::new).collect()
}

/// new/old of the medians, when both were measured.
fn ratio(old: &Stat, new: &Stat) -> Option<f64> {
    (measured(old) && measured(new) && old.median > 0.0).then(|| new.median / old.median)
}

fn percent(ratio: f64) -> String {
    format!("{:+.1}%", (ratio - 1.0) * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn line_of<'a>(text: &'a str, needles: &[&str]) -> &'a str {
        text.lines()
            .find(|l| needles.iter().all(|n| l.contains(n)))
            .unwrap_or_else(|| panic!("no line with {needles:?} in\n{text}"))
    }

    fn scale(run: &mut BenchRun, combination: &str, implementation: &str, mbps: f64, cpu_b: f64) {
        let r = run
            .rows
            .iter_mut()
            .find(|r| r.combination == combination && r.implementation == implementation)
            .unwrap();
        let s = &mut r.summary;
        s.mbps.min *= mbps;
        s.mbps.median *= mbps;
        s.mbps.max *= mbps;
        s.client_cpu_per_gib.median *= cpu_b;
    }

    #[test]
    fn ratios_and_flags() {
        let old = fixture::run();
        let mut new = fixture::run();
        scale(&mut new, "vless-tcp", "skiff", 1.10, 0.97);
        scale(&mut new, "tunnel", "v2ray", 0.90, 1.20);
        let c = compare_with(&old, &new, Charset::Unicode);
        println!("{c}");
        assert!(!c.contains("warning"));
        let skiff = line_of(&c, &["vless-tcp", "skiff"]);
        assert!(skiff.contains("9400") && skiff.contains("10340"), "{skiff}");
        assert!(
            skiff.contains("1.100 (+10.0%)") && skiff.contains("0.970 (-3.0%)"),
            "{skiff}"
        );
        // +10% throughput is flagged as better; -3% CPU is within the noise.
        assert!(
            skiff.contains("Mbit/s +10.0% better") && !skiff.contains("CPU B"),
            "{skiff}"
        );
        let v2ray = line_of(&c, &["v2ray", "8000"]);
        assert!(
            v2ray.contains("Mbit/s -10.0% worse, CPU B +20.0% worse"),
            "{v2ray}"
        );
        // An unchanged row has ratios of 1 and no flags.
        let xray = line_of(&c, &["xray"]);
        assert!(
            xray.contains("1.000 (+0.0%)") && !xray.contains("better") && !xray.contains("worse")
        );
        // The failed row is named as such; the raw row has no CPU ratios.
        assert!(line_of(&c, &["ss-rust"]).contains("failed in both"));
        let raw = line_of(&c, &["no proxy"]);
        assert!(
            raw.contains("1.000 (+0.0%)") && raw.contains(" - "),
            "{raw}"
        );
        assert!(!c.contains("only in"));
    }

    #[test]
    fn rows_in_one_run_only_are_listed_apart() {
        let old = fixture::run();
        let mut new = fixture::run();
        new.rows.retain(|r| r.implementation != "xray");
        let mut extra = new.rows[0].clone();
        extra.implementation = "sing-box".into();
        new.rows.push(extra);
        // ss-rust failed in both; now let it succeed in the new run.
        let good = new.rows[0].clone();
        let ss_rust = new
            .rows
            .iter_mut()
            .find(|r| r.implementation == "ss-rust")
            .unwrap();
        ss_rust.error = None;
        ss_rust.samples = good.samples;
        ss_rust.summary = good.summary;
        let c = compare_with(&old, &new, Charset::Ascii);
        println!("{c}");
        assert!(c.is_ascii(), "{c}");
        assert!(
            c.contains("only in old:\n  vless-tcp / xray (upload, parallel 1)\n"),
            "{c}"
        );
        assert!(
            c.contains("only in new:\n  vless-tcp / sing-box (upload, parallel 1)\n"),
            "{c}"
        );
        assert!(line_of(&c, &["ss-rust"]).contains("failed in old only"));
    }

    #[test]
    fn different_machines_and_options_are_warned_about() {
        let old = fixture::run();
        let mut new = fixture::run();
        new.machine.kernel = "6.8.0".into();
        new.options.repeats = 5;
        let c = compare_with(&old, &new, Charset::Ascii);
        assert!(c.contains("warning: the runs were on different machines"));
        assert!(c.contains("warning: the runs used different options"));
    }

    #[test]
    fn nothing_in_common() {
        let old = fixture::run();
        let mut new = fixture::run();
        for r in &mut new.rows {
            r.parallel = 8;
        }
        let c = compare_with(&old, &new, Charset::Ascii);
        assert!(c.contains("no row is in both runs"));
        assert!(c.contains("only in old:") && c.contains("only in new:"));
    }
}
