//! GEMM / GEMV throughput of the reproducible kernels against `matrixmultiply::sgemm`, measured
//! in the same run. Prints a markdown table; one child process per thread count so that both
//! libraries run with exactly that many threads (rayon pool / `MATMUL_NUM_THREADS`).

use std::process::Command;
use std::time::{Duration, Instant};

use samebits_kernels::{Isa, MatRef, gemm_f32};

const THREAD_COUNTS: [usize; 2] = [1, 2];
const CHILD_ENV: &str = "SAMEBITS_BENCH_THREADS";

/// `(label, m, n, k, b_transposed)`: B is `[k, n]` row-major, or `[n, k]` row-major when
/// transposed (the layout of weights stored per output row).
const SHAPES: [(&str, usize, usize, usize, bool); 9] = [
    ("512x512x512", 512, 512, 512, false),
    ("1024x1024x1024", 1024, 1024, 1024, false),
    ("2048x2048x512", 2048, 2048, 512, false),
    ("gemv 1x576->1536", 1, 1536, 576, false),
    ("gemv 1x1536->576", 1, 576, 1536, false),
    ("gemv 1x576->49152", 1, 49152, 576, false),
    ("gemv 1x576->1536, W[n,k]", 1, 1536, 576, true),
    ("gemv 1x1536->576, W[n,k]", 1, 576, 1536, true),
    ("gemv 1x576->49152, W[n,k]", 1, 49152, 576, true),
];

/// Best time per call over repeated runs lasting at least `budget`.
fn best_time(budget: Duration, mut f: impl FnMut()) -> Duration {
    f();
    let start = Instant::now();
    let mut best = Duration::MAX;
    let mut runs = 0;
    while runs < 3 || start.elapsed() < budget {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
        runs += 1;
    }
    best
}

fn run_child(threads: usize) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool");
    for (label, m, n, k, b_transposed) in SHAPES {
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
            .collect();
        let mut c = vec![0.0f32; m * n];
        let a_view = MatRef::row_major(&a, m, k);
        let b_view = if b_transposed {
            MatRef::row_major(&b, n, k).transposed()
        } else {
            MatRef::row_major(&b, k, n)
        };
        let ours = pool.install(|| {
            best_time(Duration::from_millis(400), || {
                gemm_f32(1, m, n, k, a_view, b_view, &mut c)
            })
        });
        let (rsb, csb) = (b_view.row_stride as isize, b_view.col_stride as isize);
        let theirs = best_time(Duration::from_millis(400), || unsafe {
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
        println!(
            "| {label} | {threads} | {:.1} | {:.1} | {:.2} |",
            gflops(ours),
            gflops(theirs),
            gflops(ours) / gflops(theirs)
        );
    }
}

fn main() {
    if let Ok(threads) = std::env::var(CHILD_ENV) {
        run_child(threads.parse().expect("thread count"));
        return;
    }
    println!("ISA: {}\n", Isa::active());
    println!("| shape (M x N x K) | threads | samebits GFLOP/s | matrixmultiply GFLOP/s | ratio |");
    println!("|---|---|---|---|---|");
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
