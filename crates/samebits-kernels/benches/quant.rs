//! One-thread throughput of a quantized `[2048, 2048]` matrix times one activation row, in
//! billion weights per second, per ggml type: the rows layout (`matvec_q_f32`, each row's blocks
//! dequantized, then dotted) against the row panels (`PanelMatrix::matmul` on the active ISA,
//! `SAMEBITS_ISA` picks another), measured in the same run, after checking that both give the
//! same bits. Rates are from median CPU time where the platform reports it (robust to a shared
//! machine's load; `common/timing.rs`), else from median wall time.

#[path = "common/timing.rs"]
mod timing;
#[path = "common/weights.rs"]
mod weights;

use std::time::Duration;

use samebits_kernels::{Isa, PANEL_TYPES, PanelMatrix, matvec_q_f32};

const ROWS: usize = 2048;
const COLS: usize = 2048;

fn main() {
    let isa = Isa::active();
    println!(
        "one thread, [{ROWS}, {COLS}] x one row, billion weights/s, panels on {isa}, load {}",
        timing::load_average()
    );
    println!("| type | rows layout | row panels | speed-up |");
    println!("|---|---:|---:|---:|");
    let mut seed = 7;
    let x: Vec<f32> = (0..COLS)
        .map(|i| ((i * 7919) % 97) as f32 / 13.0 - 3.5)
        .collect();
    let budget = Duration::from_millis(800);
    let seconds = |(wall, cpu): (Duration, Option<Duration>)| cpu.unwrap_or(wall).as_secs_f64();
    for t in PANEL_TYPES {
        let rows = weights::random_rows(t, ROWS, COLS, &mut seed);
        let packed = weights::packed(t, ROWS, COLS, &rows);
        let panels = PanelMatrix::new(t, ROWS, COLS, &packed).unwrap();
        let (mut by_rows, mut by_panels) = (vec![0f32; ROWS], vec![0f32; ROWS]);
        let rows_time = seconds(timing::measure(budget, || {
            matvec_q_f32(t, &rows, &x, &mut by_rows).unwrap();
        }));
        let panels_time = seconds(timing::measure(budget, || {
            panels
                .matmul(0..panels.panels(), &x, &mut by_panels, isa)
                .unwrap();
        }));
        let bits = |v: &[f32]| v.iter().map(|y| y.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&by_rows), bits(&by_panels), "{t}: the layouts differ");
        let rate = |s: f64| (ROWS * COLS) as f64 / s / 1e9;
        println!(
            "| {t} | {:.1} | {:.1} | {:.1}x |",
            rate(rows_time),
            rate(panels_time),
            rows_time / panels_time
        );
    }
}
