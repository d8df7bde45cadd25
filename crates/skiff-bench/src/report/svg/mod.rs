//! chart.svg: throughput and CPU cost of every implementation, combination by combination.
//!
//! One row per implementation, grouped under its combination, with two panels side by side
//! that share the rows, so a reader can follow one implementation from its throughput across
//! to what that throughput cost:
//! - throughput: a bar to the median Mbit/s, a whisker from the slowest to the fastest repeat;
//! - CPU cost: CPU-seconds per GiB moved, the client B's share solid and the server C's share
//!   pale, stacked, so the bar's length is what the pair costs together.
//!
//! The file is self-contained (generic font families, no scripts, no external references) and
//! drawn for ~900 px wide, the width of a GitHub README column.

mod axis;
mod palette;
mod xml;

use crate::model::{BenchRun, Row};

use super::format::{self, RAW, impl_label, measured, num};
use super::layout::{self, Group, SKIFF, ran};
use axis::Axis;
use palette::Palette;
use xml::{Doc, esc, text_width};

const WIDTH: f64 = 900.0;
const MARGIN: f64 = 16.0;
/// Where both panels' rows start: the room left of it holds the implementation names.
const GUTTER: f64 = 176.0;
const PANEL_GAP: f64 = 60.0;
const PANEL_WIDTH: f64 = (WIDTH - GUTTER - MARGIN - 8.0 - PANEL_GAP) / 2.0;
const ROW_HEIGHT: f64 = 20.0;
const BAR_HEIGHT: f64 = 12.0;
const GROUP_GAP: f64 = 6.0;
const VALUE_FONT: f64 = 11.0;

const INK: &str = "#212529";
const MUTED: &str = "#868e96";
const GRID: &str = "#e9ecef";
const FAILED: &str = "#c92a2a";
const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

pub fn svg_chart(run: &BenchRun) -> String {
    let layout = layout::layout(run);
    let names = layout::implementations(run);
    let palette = Palette::new(&names);
    let rows: Vec<(&Group<'_>, &Row)> = layout
        .groups
        .iter()
        .flat_map(|g| g.rows.iter().map(move |r| (g, *r)))
        .collect();

    // The panels' scales, with room after the longest bar for its value label. The raw
    // baseline is usually several times faster than any proxy; scaled to it, the proxies'
    // bars would be too short to compare, so it is left out of the scale (and drawn broken,
    // see `throughput_bar`) unless nothing else ran.
    let proxies_ran = rows.iter().any(|(_, r)| ran(r) && r.implementation != RAW);
    let through: Vec<(f64, String)> = rows
        .iter()
        .filter(|(_, r)| ran(r) && (r.implementation != RAW || !proxies_ran))
        .map(|(_, r)| {
            (
                r.summary.mbps.max.max(r.summary.mbps.median),
                num(r.summary.mbps.median),
            )
        })
        .collect();
    let cost: Vec<(f64, String)> = rows
        .iter()
        .filter(|(_, r)| has_cost(r))
        .map(|(_, r)| (cpu_total(r), cpu_label(r)))
        .collect();
    let mbps_axis = axis_for(&through);
    let cpu_axis = axis_for(&cost);

    let mut doc = Doc { out: String::new() };
    let mut y = header(&mut doc, run);
    y = legend(&mut doc, &names, &palette, y);

    let a = GUTTER;
    let b = GUTTER + PANEL_WIDTH + PANEL_GAP;
    let panel_top = y + 12.0;
    doc.text(
        a,
        panel_top + 14.0,
        " font-size=\"14\" font-weight=\"bold\"",
        "Throughput (Mbit/s)",
    );
    doc.text(
        b,
        panel_top + 14.0,
        " font-size=\"14\" font-weight=\"bold\"",
        "CPU cost (CPU-seconds per GiB)",
    );
    let plot_top = panel_top + 24.0;

    // Rows first into a buffer: the grid is drawn under them but needs their height.
    let mut body = Doc { out: String::new() };
    let mut cursor = plot_top;
    for group in &layout.groups {
        body.line((MARGIN, cursor), (WIDTH - MARGIN, cursor), "#ced4da", 1.0);
        body.text(
            MARGIN,
            cursor + 15.0,
            " font-size=\"13\" font-weight=\"bold\"",
            &group.label(&layout),
        );
        cursor += ROW_HEIGHT + 2.0;
        for (i, row) in group.rows.iter().enumerate() {
            let colour = palette.colour(&row.implementation);
            let mid = cursor + ROW_HEIGHT / 2.0;
            name_label(&mut body, row, mid);
            throughput_bar(
                &mut body,
                row,
                a,
                mid,
                &mbps_axis,
                colour,
                group.best == Some(i) && group.best_clear,
            );
            cost_bar(&mut body, row, b, mid, &cpu_axis, colour);
            cursor += ROW_HEIGHT;
        }
        cursor += GROUP_GAP;
    }
    if layout.groups.is_empty() {
        body.text(
            a,
            cursor + 20.0,
            &format!(" font-size=\"13\" fill=\"{MUTED}\""),
            "No rows in this run.",
        );
        cursor += 32.0;
    }
    let plot_bottom = cursor;
    grid(
        &mut doc,
        a,
        plot_top,
        plot_bottom,
        &mbps_axis,
        "median of the repeats; whisker: min–max",
    );
    grid(
        &mut doc,
        b,
        plot_top,
        plot_bottom,
        &cpu_axis,
        "median; client B + server C",
    );
    doc.out.push_str(&body.out);

    let height = plot_bottom + 48.0;
    let title = format!("Skiff bench: throughput and CPU cost, {}", run.started);
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {WIDTH} {height:.0}\" role=\"img\" aria-label=\"{}\" {FONT} fill=\"{INK}\">\n\
         <title>{}</title>\n\
         <rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n{}</svg>\n",
        esc(&title),
        esc(&title),
        doc.out
    )
}

/// Title and the run's facts; returns the y below them.
fn header(doc: &mut Doc, run: &BenchRun) -> f64 {
    doc.text(
        MARGIN,
        30.0,
        " font-size=\"18\" font-weight=\"bold\"",
        "Skiff bench: throughput and CPU cost",
    );
    let grey = format!(" font-size=\"12\" fill=\"{MUTED}\"");
    doc.text(
        MARGIN,
        50.0,
        &grey,
        &format!("{} · {}", run.started, format::machine(&run.machine)),
    );
    doc.text(MARGIN, 66.0, &grey, &format::options(&run.options));
    76.0
}

/// One swatch per implementation, wrapping to more lines when needed, then how to read the
/// bars; returns the y below it.
fn legend(doc: &mut Doc, names: &[&str], palette: &Palette, top: f64) -> f64 {
    let mut x = MARGIN;
    let mut y = top + 10.0;
    for name in names {
        let label = impl_label(name);
        let w = 12.0 + 6.0 + text_width(label, 12.0) + 18.0;
        if x + w > WIDTH - MARGIN && x > MARGIN {
            x = MARGIN;
            y += 20.0;
        }
        doc.rect(x, y, 12.0, 12.0, palette.colour(name), " rx=\"2\"");
        let weight = if *name == SKIFF {
            " font-weight=\"bold\""
        } else {
            ""
        };
        doc.text(
            x + 18.0,
            y + 10.5,
            &format!(" font-size=\"12\"{weight}"),
            label,
        );
        x += w;
    }
    y += 32.0;
    doc.text(
        MARGIN,
        y,
        &format!(" font-size=\"11\" fill=\"{MUTED}\""),
        "Whisker: slowest to fastest repeat. CPU bar: solid = proxy client B, pale = proxy \
         server C. Bold value: fastest proxy in its combination.",
    );
    y
}

/// An axis that fits every value plus its label after the bar within the panel.
fn axis_for(values: &[(f64, String)]) -> Axis {
    let need = values
        .iter()
        .map(|(v, label)| {
            // v / max · W + label ≤ W  ⇔  max ≥ v · W / (W − label). Labels never take more than
            // half the panel, so a long one cannot squash the bars to nothing.
            let label_w = (text_width(label, VALUE_FONT) + 8.0).min(PANEL_WIDTH / 2.0);
            v * PANEL_WIDTH / (PANEL_WIDTH - label_w)
        })
        .fold(0.0, f64::max);
    Axis::covering(need)
}

/// Vertical grid lines at the ticks, the tick labels under the rows, and what the axis shows.
fn grid(doc: &mut Doc, x0: f64, top: f64, bottom: f64, axis: &Axis, caption: &str) {
    for t in axis.ticks() {
        let x = x0 + scale(t, axis);
        let (colour, width) = if t == 0.0 {
            ("#adb5bd", 1.0)
        } else {
            (GRID, 1.0)
        };
        doc.line((x, top), (x, bottom), colour, width);
        doc.text(
            x,
            bottom + 14.0,
            &format!(" font-size=\"11\" text-anchor=\"middle\" fill=\"{MUTED}\""),
            &axis.label(t),
        );
    }
    doc.text(
        x0 + PANEL_WIDTH / 2.0,
        bottom + 32.0,
        &format!(" font-size=\"11\" text-anchor=\"middle\" fill=\"{MUTED}\""),
        caption,
    );
}

fn scale(v: f64, axis: &Axis) -> f64 {
    (v / axis.max * PANEL_WIDTH).clamp(0.0, PANEL_WIDTH)
}

/// The implementation's name, right-aligned against the panels; Skiff's in bold.
fn name_label(doc: &mut Doc, row: &Row, mid: f64) {
    let mut label = impl_label(&row.implementation).to_owned();
    // The gutter holds about 24 characters at 12 px.
    if label.chars().count() > 24 {
        label = label.chars().take(23).collect::<String>() + "…";
    }
    let weight = if row.implementation == SKIFF {
        " font-weight=\"bold\""
    } else {
        ""
    };
    doc.text(
        GUTTER - 8.0,
        mid + 4.0,
        &format!(" font-size=\"12\" text-anchor=\"end\"{weight}"),
        &label,
    );
}

fn throughput_bar(
    doc: &mut Doc,
    row: &Row,
    x0: f64,
    mid: f64,
    axis: &Axis,
    colour: &str,
    best: bool,
) {
    if !ran(row) {
        failed(doc, row, x0, mid);
        return;
    }
    let s = &row.summary.mbps;
    let top = mid - BAR_HEIGHT / 2.0;
    if s.max > axis.max {
        off_scale_bar(doc, x0, top, colour, &num(s.median));
        return;
    }
    doc.rect(x0, top, scale(s.median, axis), BAR_HEIGHT, colour, "");
    let (lo, hi) = (x0 + scale(s.min, axis), x0 + scale(s.max, axis));
    if hi - lo >= 1.0 {
        doc.line((lo, mid), (hi, mid), INK, 1.2);
        doc.line((lo, mid - 4.0), (lo, mid + 4.0), INK, 1.2);
        doc.line((hi, mid - 4.0), (hi, mid + 4.0), INK, 1.2);
    }
    let end = (x0 + scale(s.median, axis)).max(hi);
    let weight = if best { " font-weight=\"bold\"" } else { "" };
    doc.text(
        end + 5.0,
        mid + 4.0,
        &format!(" font-size=\"{VALUE_FONT}\"{weight}"),
        &num(s.median),
    );
}

/// A bar beyond the axis (the raw baseline): drawn to the panel's end with a break in it, its
/// value written inside, so nobody reads its length as to scale.
fn off_scale_bar(doc: &mut Doc, x0: f64, top: f64, colour: &str, value: &str) {
    doc.rect(x0, top, PANEL_WIDTH, BAR_HEIGHT, colour, "");
    // A white slanted gap near the end: the usual mark of a broken axis.
    let bx = x0 + PANEL_WIDTH - 22.0;
    doc.out.push_str(&format!(
        "<path d=\"M{:.1} {:.1} l6 0 l-5 {:.1} l-6 0 Z\" fill=\"#ffffff\"/>\n",
        bx + 3.0,
        top - 1.0,
        BAR_HEIGHT + 2.0
    ));
    doc.text(
        bx - 6.0,
        top + BAR_HEIGHT - 2.5,
        &format!(
            " font-size=\"{VALUE_FONT}\" font-weight=\"bold\" text-anchor=\"end\" fill=\"#ffffff\""
        ),
        &format!("{value} (off scale)"),
    );
}

/// Whether a row has a CPU cost to draw: the raw row has no proxy to measure.
fn has_cost(row: &Row) -> bool {
    ran(row)
        && (measured(&row.summary.client_cpu_per_gib) || measured(&row.summary.server_cpu_per_gib))
}

fn cpu_total(row: &Row) -> f64 {
    row.summary.client_cpu_per_gib.median + row.summary.server_cpu_per_gib.median
}

fn cpu_label(row: &Row) -> String {
    format!(
        "{} + {}",
        num(row.summary.client_cpu_per_gib.median),
        num(row.summary.server_cpu_per_gib.median)
    )
}

fn cost_bar(doc: &mut Doc, row: &Row, x0: f64, mid: f64, axis: &Axis, colour: &str) {
    if !ran(row) {
        failed(doc, row, x0, mid);
        return;
    }
    if !has_cost(row) {
        let why = if row.implementation == RAW {
            "n/a: no proxy"
        } else {
            "not measured"
        };
        doc.text(
            x0 + 4.0,
            mid + 4.0,
            &format!(" font-size=\"{VALUE_FONT}\" fill=\"{MUTED}\""),
            why,
        );
        return;
    }
    let top = mid - BAR_HEIGHT / 2.0;
    let wb = scale(row.summary.client_cpu_per_gib.median, axis);
    let wc = scale(cpu_total(row), axis) - wb;
    doc.rect(x0, top, wb, BAR_HEIGHT, colour, "");
    // The pale C part, outlined in its colour so it reads as the same implementation's.
    doc.rect(
        x0 + wb,
        top + 0.5,
        wc - 0.5,
        BAR_HEIGHT - 1.0,
        colour,
        &format!(" fill-opacity=\"0.35\" stroke=\"{colour}\" stroke-width=\"1\""),
    );
    doc.text(
        x0 + wb + wc + 5.0,
        mid + 4.0,
        &format!(" font-size=\"{VALUE_FONT}\""),
        &cpu_label(row),
    );
}

/// A failed row: the word, and the reason as a tooltip (full text kept in results.json).
fn failed(doc: &mut Doc, row: &Row, x0: f64, mid: f64) {
    let why = row.error.as_deref().unwrap_or("no samples");
    doc.out.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"{VALUE_FONT}\" font-style=\"italic\" fill=\"{FAILED}\">failed<title>{}</title></text>\n",
        x0 + 4.0,
        mid + 4.0,
        esc(why)
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn is_well_formed_and_names_every_implementation() {
        let run = fixture::run();
        let svg = svg_chart(&run);
        xml::check_well_formed(&svg).unwrap();
        assert!(
            svg.starts_with("<?xml") && svg.contains("<svg xmlns=\"http://www.w3.org/2000/svg\"")
        );
        for r in &run.rows {
            let name = format!(">{}</text>", esc(impl_label(&r.implementation)));
            assert!(svg.contains(&name), "{name} missing");
            assert!(svg.contains(&format!(">{}</text>", esc(&r.combination))));
        }
        // Escaped, not raw, machine text.
        assert!(svg.contains("AMD EPYC 7B13 &lt;test&gt; &amp; co"));
        // The failed row says so, with its reason as a tooltip.
        assert!(
            svg.contains("failed<title>server exited: status 1 | bind: address in use</title>")
        );
    }

    #[test]
    fn is_self_contained() {
        let svg = svg_chart(&fixture::run());
        for outside in [
            "<script",
            "href",
            "@import",
            "url(",
            "<image",
            "<foreignObject",
        ] {
            assert!(!svg.contains(outside), "{outside}");
        }
    }

    #[test]
    fn skiff_keeps_one_colour_and_peers_their_own() {
        let svg = svg_chart(&fixture::run());
        // Skiff has 3 rows, each drawn with a throughput bar and a B part and a C part, plus
        // its legend swatch.
        assert_eq!(
            svg.matches(&format!("fill=\"{}\"", palette::SKIFF_COLOUR))
                .count(),
            3 * 3 + 1
        );
        assert!(svg.contains("fill=\"#1c7ed6\"") && svg.contains("fill=\"#7048e8\""));
    }

    #[test]
    fn bars_are_to_scale() {
        let run = fixture::run();
        let svg = svg_chart(&run);
        // The fastest proxy, 12000 Mbit/s, with room for its label after it, sets a 15k
        // axis; Skiff's vless-tcp median of 9400 is 9400 / 15000 of the panel.
        let want = format!(
            "width=\"{:.1}\" height=\"{BAR_HEIGHT:.1}\" fill=\"{}\"",
            9400.0 / 15000.0 * PANEL_WIDTH,
            palette::SKIFF_COLOUR
        );
        assert!(svg.contains(&want), "{want}");
        for tick in [">0</text>", ">5k</text>", ">15k</text>"] {
            assert!(svg.contains(tick), "{tick}");
        }
        // The raw baseline is beyond that, and says so.
        assert!(svg.contains(">40500 (off scale)</text>"));
    }

    #[test]
    fn raw_alone_sets_the_scale() {
        let mut run = fixture::run();
        run.rows.retain(|r| r.implementation == "-");
        let svg = svg_chart(&run);
        xml::check_well_formed(&svg).unwrap();
        assert!(!svg.contains("off scale"));
        assert!(svg.contains(">40500</text>"));
    }

    #[test]
    fn empty_run_still_draws() {
        let mut run = fixture::run();
        run.rows.clear();
        let svg = svg_chart(&run);
        xml::check_well_formed(&svg).unwrap();
        assert!(svg.contains("No rows in this run."));
    }

    #[test]
    fn hostile_names_are_escaped() {
        let mut run = fixture::run();
        run.rows[0].implementation = "<evil & \"co\">".into();
        run.rows[0].combination = "a'b</text>".into();
        let svg = svg_chart(&run);
        xml::check_well_formed(&svg).unwrap();
        assert!(svg.contains("&lt;evil &amp; &quot;co&quot;&gt;"));
    }

    /// The fixture in both directions with every known peer and one unknown, long-named one:
    /// the legend must wrap and the labels must not run into each other.
    fn busy_run() -> BenchRun {
        let mut run = fixture::run();
        let mut more = Vec::new();
        for (i, name) in [
            "sing-box",
            "trojan",
            "kcptun",
            "a-peer-with-a-rather-long-name-indeed",
        ]
        .into_iter()
        .enumerate()
        {
            let mut r = run.rows[1].clone();
            r.implementation = name.into();
            r.summary.mbps.median *= 0.5 + 0.1 * i as f64;
            r.summary.client_cpu_per_gib.median *= 3.0;
            more.push(r);
        }
        run.rows.extend(more);
        let downloads: Vec<Row> = run
            .rows
            .iter()
            .map(|r| Row {
                direction: "download".into(),
                ..r.clone()
            })
            .collect();
        run.rows.extend(downloads);
        run.options.direction = "both".into();
        run.options.link = Some("delay=100ms,loss=9%".into());
        run
    }

    #[test]
    fn busy_run_is_well_formed() {
        let run = busy_run();
        let svg = svg_chart(&run);
        xml::check_well_formed(&svg).unwrap();
        assert!(
            svg.contains(">vless-tcp download</text>") && svg.contains(">vless-tcp upload</text>")
        );
        assert!(svg.contains("a-peer-with-a-rather-lo…"));
    }

    /// Writes the fixture's charts where a person can look at them:
    /// `SKIFF_CHART_OUT=/tmp/chart cargo test -p skiff-bench write_fixture_chart` writes
    /// /tmp/chart.svg and /tmp/chart-busy.svg.
    #[test]
    fn write_fixture_chart() {
        if let Ok(path) = std::env::var("SKIFF_CHART_OUT") {
            std::fs::write(format!("{path}.svg"), svg_chart(&fixture::run())).unwrap();
            std::fs::write(format!("{path}-busy.svg"), svg_chart(&busy_run())).unwrap();
        }
    }
}
