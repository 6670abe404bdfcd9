//! `samebits-bench-report`: draws the chart of the benchmark report. `scripts/bench.py` writes
//! the measured speed ratios (samebits / peer, per test and operation set) to a JSON file; this
//! turns them into a PNG of horizontal grouped bars on a log axis, with 1x (parity) and each
//! row's target marked. The font (DejaVu Sans) is compiled in, so rendering needs no system font.
//!
//! Input: `{"title": str, "subtitle": str, "series": [str], "rows": [{"label": str,
//! "ratios": [number | null] (one per series), "target": number | null}]}`.

use anyhow::{Context, Result, bail};
use plotters::prelude::*;
use plotters::style::FontStyle;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Deserialize;
use std::path::PathBuf;

/// Render the benchmark chart (PNG) from the ratios JSON that scripts/bench.py writes.
#[derive(clap::Parser)]
#[command(name = "samebits-bench-report")]
struct Cli {
    /// The ratios JSON.
    ratios: PathBuf,
    /// The PNG to write.
    #[arg(long, value_name = "PNG")]
    out: PathBuf,
}

#[derive(Deserialize)]
struct Chart {
    title: String,
    subtitle: String,
    series: Vec<String>,
    rows: Vec<Row>,
}

#[derive(Deserialize)]
struct Row {
    label: String,
    /// samebits speed / peer speed, one per series; null where not measured.
    ratios: Vec<Option<f64>>,
    target: Option<f64>,
}

/// Bar colours of the series, in order.
const SERIES_COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];
const FONT: &str = "sans-serif";
/// The ratio axis spans this range (log scale); ratios outside are drawn at the edge.
const RATIO_RANGE: (f64, f64) = (0.01, 10.0);

fn main() -> std::process::ExitCode {
    let cli = <Cli as clap::Parser>::parse();
    match render(&cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

fn render(cli: &Cli) -> Result<()> {
    let text = std::fs::read_to_string(&cli.ratios)
        .with_context(|| format!("reading {}", cli.ratios.display()))?;
    let chart: Chart = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a chart description", cli.ratios.display()))?;
    if chart.series.len() > SERIES_COLOURS.len() {
        bail!(
            "{}: at most {} series",
            cli.ratios.display(),
            SERIES_COLOURS.len()
        );
    }
    if let Some(row) = chart
        .rows
        .iter()
        .find(|r| r.ratios.len() != chart.series.len())
    {
        bail!(
            "{}: row \"{}\" has {} ratios for {} series",
            cli.ratios.display(),
            row.label,
            row.ratios.len(),
            chart.series.len()
        );
    }
    plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| anyhow::anyhow!("the compiled-in DejaVu Sans font does not load"))?;
    draw(&chart, cli).map_err(|e| anyhow::anyhow!("{}: {e}", cli.out.display()))
}

/// Black text of the registered font at `size` pixels.
fn text(size: u32) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font())
}

fn draw(chart: &Chart, cli: &Cli) -> Result<(), Box<dyn std::error::Error>> {
    let rows = chart.rows.len().max(1);
    let height = 140 + 34 * rows as u32 * (chart.series.len().max(1) as u32 + 1) / 2;
    let root = BitMapBackend::new(&cli.out, (1200, height.max(300))).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(60);
    header.draw_text(&chart.title, &(FONT, 22).into_font().color(&BLACK), (16, 8))?;
    header.draw_text(
        &chart.subtitle,
        &(FONT, 14).into_font().color(&BLACK.mix(0.7)),
        (16, 36),
    )?;
    let (lo, hi) = RATIO_RANGE;
    let mut plot = ChartBuilder::on(&body)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(420)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..rows as f64)?;
    plot.configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc("samebits speed / peer speed (log scale; right of 1 = samebits faster)")
        .x_label_formatter(&|x| format!("{x}x"))
        .label_style((FONT, 13))
        .draw()?;
    // Parity line.
    plot.draw_series(std::iter::once(PathElement::new(
        vec![(1.0, 0.0), (1.0, rows as f64)],
        BLACK.stroke_width(2),
    )))?;
    let slot = 0.8 / chart.series.len().max(1) as f64;
    for (i, row) in chart.rows.iter().enumerate() {
        // Row 0 at the top.
        let top = (rows - i) as f64 - 0.1;
        for (s, ratio) in row.ratios.iter().enumerate() {
            let Some(ratio) = ratio else { continue };
            let y0 = top - slot * (s as f64 + 1.0);
            let end = ratio.clamp(lo, hi);
            plot.draw_series(std::iter::once(Rectangle::new(
                [(lo, y0), (end, y0 + slot * 0.9)],
                SERIES_COLOURS[s].filled(),
            )))?;
            plot.draw_series(std::iter::once(Text::new(
                format!(" {ratio:.2}x"),
                (end, y0 + slot * 0.45),
                text(12).pos(Pos::new(HPos::Left, VPos::Center)),
            )))?;
        }
        if let Some(target) = row.target {
            plot.draw_series(std::iter::once(PathElement::new(
                vec![(target, top), (target, top - 0.8)],
                RED.stroke_width(3),
            )))?;
        }
        let (x, y) = plot.backend_coord(&(lo, top - 0.4));
        root.draw_text(
            &row.label,
            &text(14).pos(Pos::new(HPos::Right, VPos::Center)),
            (x - 8, y),
        )?;
    }
    // Legend, top right: one swatch per series, then the target mark.
    let mut x = 760;
    for (s, name) in chart.series.iter().enumerate() {
        header.draw(&Rectangle::new(
            [(x, 12), (x + 14, 24)],
            SERIES_COLOURS[s].filled(),
        ))?;
        header.draw_text(name, &text(14), (x + 20, 10))?;
        x += 30 + 9 * name.len() as i32;
    }
    header.draw(&PathElement::new(
        vec![(x, 10), (x, 26)],
        RED.stroke_width(3),
    ))?;
    header.draw_text("target", &text(14), (x + 8, 10))?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_json(json: &str) -> (Result<()>, PathBuf, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let ratios = dir.path().join("chart.json");
        std::fs::write(&ratios, json).unwrap();
        let out = dir.path().join("chart.png");
        let result = render(&Cli {
            ratios,
            out: out.clone(),
        });
        (result, out, dir)
    }

    #[test]
    fn writes_a_png_sized_to_its_rows() {
        let (result, out, _dir) = render_json(
            r#"{"title": "t", "subtitle": "s", "series": ["reproducible", "default"],
                "rows": [{"label": "a", "ratios": [0.5, 2.0], "target": 0.8},
                         {"label": "b", "ratios": [null, 0.001], "target": null}]}"#,
        );
        result.unwrap();
        let png = std::fs::read(out).unwrap();
        // PNG signature, then the IHDR chunk: width and height, big-endian, at bytes 16..24.
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
        let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
        assert_eq!(width, 1200);
        assert!(height >= 300, "{height}");
    }

    #[test]
    fn a_row_with_the_wrong_number_of_ratios_is_a_one_line_error() {
        let (result, out, _dir) = render_json(
            r#"{"title": "t", "subtitle": "s", "series": ["reproducible"],
                "rows": [{"label": "pp512", "ratios": [1.0, 2.0], "target": null}]}"#,
        );
        let message = format!("{:#}", result.unwrap_err());
        assert!(
            message.contains("pp512") && message.contains("2 ratios"),
            "{message}"
        );
        assert!(!message.contains('\n'));
        assert!(!out.exists());
    }
}
