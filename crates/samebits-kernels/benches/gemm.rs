//! GEMM / GEMV throughput of the reproducible kernels against `matrixmultiply::sgemm`, measured
//! in the same run. Prints a markdown table of GFLOP/s from median wall time, with the ratio
//! also from median CPU time (`common/timing.rs`); one child process per thread count so that
//! both libraries run with exactly that many threads (rayon pool / `MATMUL_NUM_THREADS`).

#[path = "common/timing.rs"]
mod timing;

use std::process::Command;
use std::time::Duration;

use samebits_kernels::{Epilogue, Isa, MatRef, PackedB, gemm_f32, gemm_packed_b};

const THREAD_COUNTS: [usize; 2] = [1, 2];
const CHILD_ENV: &str = "SAMEBITS_BENCH_THREADS";

/// How B is stored and passed.
#[derive(Clone, Copy, PartialEq)]
enum BLayout {
    /// `[k, n]` row-major, through `gemm_f32`.
    RowMajor,
    /// `[n, k]` row-major (weights stored per output row), through `gemm_f32`.
    Transposed,
    /// `[n, k]` row-major packed once (outside the timing) into a `PackedB`, through
    /// `gemm_packed_b`.
    TransposedPacked,
}
use BLayout::{RowMajor, Transposed, TransposedPacked};

/// `(label, m, n, k, B layout)`.
const SHAPES: [(&str, usize, usize, usize, BLayout); 16] = [
    ("512x512x512", 512, 512, 512, RowMajor),
    ("1024x1024x1024", 1024, 1024, 1024, RowMajor),
    ("2048x2048x512", 2048, 2048, 512, RowMajor),
    ("gemv 1x576->1536", 1, 1536, 576, RowMajor),
    ("gemv 1x1536->576", 1, 576, 1536, RowMajor),
    ("gemv 1x576->49152", 1, 49152, 576, RowMajor),
    ("gemv 1x576->1536, W[n,k]", 1, 1536, 576, Transposed),
    ("gemv 1x1536->576, W[n,k]", 1, 576, 1536, Transposed),
    ("gemv 1x576->49152, W[n,k]", 1, 49152, 576, Transposed),
    ("4x576->1536, W[n,k]", 4, 1536, 576, Transposed),
    ("8x1536->576, W[n,k]", 8, 576, 1536, Transposed),
    ("64x1536->576, W[n,k]", 64, 576, 1536, Transposed),
    (
        "64x1536->576, W[n,k], PackedB",
        64,
        576,
        1536,
        TransposedPacked,
    ),
    (
        "8x1536->576, W[n,k], PackedB",
        8,
        576,
        1536,
        TransposedPacked,
    ),
    (
        "512x512x512, W[n,k], PackedB",
        512,
        512,
        512,
        TransposedPacked,
    ),
    (
        "gemv 1x576->1536, W[n,k], PackedB",
        1,
        1536,
        576,
        TransposedPacked,
    ),
];

fn run_child(threads: usize) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool");
    for (label, m, n, k, layout) in SHAPES {
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
            .collect();
        let mut c = vec![0.0f32; m * n];
        let a_view = MatRef::row_major(&a, m, k);
        let b_view = if layout != RowMajor {
            MatRef::row_major(&b, n, k).transposed()
        } else {
            MatRef::row_major(&b, k, n)
        };
        let packed =
            (layout == TransposedPacked).then(|| pool.install(|| PackedB::new(k, n, b_view)));
        let ours = pool.install(|| {
            timing::measure(Duration::from_millis(400), || {
                if let Some(packed) = &packed {
                    gemm_packed_b(1, m, a_view, packed, Epilogue::None, &mut c)
                } else {
                    gemm_f32(1, m, n, k, a_view, b_view, &mut c)
                }
            })
        });
        let (rsb, csb) = (b_view.row_stride as isize, b_view.col_stride as isize);
        let theirs = timing::measure(Duration::from_millis(400), || unsafe {
            // SAFETY: the pointers and strides describe the live buffers a, b and c.
            matrixmultiply::sgemm(
                m,
                k,
                n,
                1.0,
                a.as_ptr(),
                k as isize,
                1,
                b.as_ptr(),
                rsb,
                csb,
                0.0,
                c.as_mut_ptr(),
                n as isize,
                1,
            )
        });
        let gflops = |t: Duration| 2.0 * (m * n * k) as f64 / t.as_secs_f64() / 1e9;
        let cpu_ratio = match (ours.1, theirs.1) {
            (Some(o), Some(t)) => format!("{:.2}", t.as_secs_f64() / o.as_secs_f64()),
            _ => "n/a".to_string(),
        };
        println!(
            "| {label} | {threads} | {:.1} | {:.1} | {:.2} | {cpu_ratio} |",
            gflops(ours.0),
            gflops(theirs.0),
            gflops(ours.0) / gflops(theirs.0),
        );
    }
}

fn main() {
    if let Ok(threads) = std::env::var(CHILD_ENV) {
        run_child(threads.parse().expect("thread count"));
        return;
    }
    println!(
        "ISA: {}, load average {}\n",
        Isa::active(),
        timing::load_average()
    );
    println!(
        "| shape (M x N x K) | threads | samebits GFLOP/s | matrixmultiply GFLOP/s | ratio (wall) \
         | ratio (cpu) |"
    );
    println!("|---|---|---|---|---|---|");
    let exe = std::env::current_exe().expect("bench executable");
    for threads in THREAD_COUNTS {
        let output = Command::new(&exe)
            .env(CHILD_ENV, threads.to_string())
            .env("MATMUL_NUM_THREADS", threads.to_string())
            .output()
            .expect("run bench child");
        assert!(output.status.success(), "bench child failed: {output:?}");
        print!("{}", String::from_utf8_lossy(&output.stdout));
    }
}
