//! One-thread read rate of decode-shaped products: `[1536, 576]` Q4_1 matrices (SmolLM2-135M's
//! widest), each times one activation row, one after another as a decode step reads them, for
//! the f32 products (`PanelMatrix::matmul`) and the exact-integer ones (`matmul_int8`), in GB/s
//! of packed weight bytes. Two sets: 90 matrices (50 MB, past the caches: the memory's share of
//! the "decode at 70% of the memory bandwidth", next to a plain streaming read of as
//! many bytes) and 2 matrices (1.1 MB, from the caches: the kernels' arithmetic alone).

#[path = "common/timing.rs"]
mod timing;
#[path = "common/weights.rs"]
mod weights;

use std::time::Duration;

use samebits_ggml::GgmlType;
use samebits_kernels::{Int8Activations, Isa, PanelMatrix};

const ROWS: usize = 1536;
const COLS: usize = 576;
const T: GgmlType = GgmlType::Q4_1;

/// `count` packed matrices of random Q4_1 rows.
fn packed_matrices(count: usize, seed: &mut u64) -> Vec<Vec<u8>> {
    (0..count)
        .map(|_| weights::packed(T, ROWS, COLS, &weights::random_rows(T, ROWS, COLS, seed)))
        .collect()
}

fn main() {
    let isa = Isa::active();
    println!(
        "one thread, [{ROWS}, {COLS}] {T} matrices x one row, GB/s of packed weights, {isa}, load {}",
        timing::load_average()
    );
    println!("| matrices | streaming read | f32 products | int8 products |");
    println!("|---|---:|---:|---:|");
    let x: Vec<f32> = (0..COLS)
        .map(|i| ((i * 7919) % 97) as f32 / 13.0 - 3.5)
        .collect();
    let mut out = vec![0f32; ROWS];
    let budget = Duration::from_millis(1500);
    let seconds = |(wall, cpu): (Duration, Option<Duration>)| cpu.unwrap_or(wall).as_secs_f64();
    let mut seed = 11;
    for count in [90, 2] {
        let packed = packed_matrices(count, &mut seed);
        let bytes: usize = packed.iter().map(Vec::len).sum();
        let matrices: Vec<PanelMatrix> = packed
            .iter()
            .map(|p| PanelMatrix::new(T, ROWS, COLS, p).unwrap())
            .collect();
        let rate = |s: f64| bytes as f64 / s / 1e9;
        let read = seconds(timing::measure(budget, || {
            let mut sum = 0u64;
            for p in &packed {
                for c in p.chunks_exact(8) {
                    sum = sum.wrapping_add(u64::from_le_bytes(c.try_into().unwrap()));
                }
            }
            std::hint::black_box(sum);
        }));
        let f32_products = seconds(timing::measure(budget, || {
            for m in &matrices {
                m.matmul(0..m.panels(), &x, &mut out, isa).unwrap();
            }
        }));
        let int8_products = seconds(timing::measure(budget, || {
            let q = Int8Activations::quantize(&x, COLS).unwrap();
            for m in &matrices {
                m.matmul_int8(0..m.panels(), &q, &mut out, isa).unwrap();
            }
        }));
        println!(
            "| {count} ({:.1} MB) | {:.1} | {:.1} | {:.1} |",
            bytes as f64 / 1e6,
            rate(read),
            rate(f32_products),
            rate(int8_products)
        );
    }
}
