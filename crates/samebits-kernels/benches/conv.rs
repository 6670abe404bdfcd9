//! Convolution time of `conv_f32` against two im2col references measured in the same run: the
//! previous samebits algorithm (whole-image im2col buffer allocated per call, then the
//! reproducible GEMM per group, as `conv_f32` did before the direct and blocked paths) and the
//! same im2col followed by `matrixmultiply::sgemm` per group (the baseline; not reproducible).
//! Prints a markdown table of median wall and CPU times (`common/timing.rs`); one child process
//! per thread count so that every implementation runs with exactly that many threads (rayon
//! pool / `MATMUL_NUM_THREADS`). `SAMEBITS_BENCH_FILTER=text` keeps the shapes whose label
//! contains `text`.

#[path = "common/timing.rs"]
mod timing;

use std::process::Command;
use std::time::Duration;

use rayon::prelude::*;
use samebits_kernels::{ConvGeometry, Epilogue, Isa, MatRef, conv_f32, gemm};

const THREAD_COUNTS: [usize; 2] = [1, 2];
const CHILD_ENV: &str = "SAMEBITS_BENCH_THREADS";
/// Runs only the shapes whose label contains this string (for profiling one shape).
const FILTER_ENV: &str = "SAMEBITS_BENCH_FILTER";

/// `(label, channels in, channels out, groups, height, width, kernel, stride)`, pad k / 2.
type Shape = (
    &'static str,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
);

const SHAPES: [Shape; 7] = [
    ("dw 3x3 96x160x160", 96, 96, 96, 160, 160, 3, 1),
    ("dw 3x3 s2 96x160x160", 96, 96, 96, 160, 160, 3, 2),
    ("dw 5x5 120x80x80", 120, 120, 120, 80, 80, 5, 1),
    ("conv 3x3 s2 3->16 640x640", 3, 16, 1, 640, 640, 3, 2),
    ("conv 3x3 32->32 160x160", 32, 32, 1, 160, 160, 3, 1),
    ("conv 3x3 128->128 40x40", 128, 128, 1, 40, 40, 3, 1),
    ("pw 1x1 96->96 160x160", 96, 96, 1, 160, 160, 1, 1),
];

fn geometry(shape: Shape) -> ConvGeometry {
    let (_, c, m, groups, h, w, k, s) = shape;
    ConvGeometry {
        groups,
        strides: vec![s, s],
        pads_begin: vec![k / 2, k / 2],
        pads_end: vec![k / 2, k / 2],
        ..ConvGeometry::new(1, c, m, &[h, w], &[k, k])
    }
}

/// Whole-image im2col of a 2D convolution, `[C * k * k, out_h * out_w]` with zeros in the
/// padding, written as the previous `conv_f32` wrote it (parallel over rows, line by line).
fn im2col_full(g: &ConvGeometry, x: &[f32]) -> Vec<f32> {
    let (in_h, in_w) = (g.in_spatial[0] as isize, g.in_spatial[1] as isize);
    let (k, s, p) = (g.kernel[0], g.strides[0], g.pads_begin[0] as isize);
    let out = g.out_spatial();
    let (out_h, out_w) = (out[0], out[1]);
    let in_len = (in_h * in_w) as usize;
    let mut columns = vec![0.0f32; g.in_channels * k * k * out_h * out_w];
    columns
        .par_chunks_mut(out_h * out_w)
        .enumerate()
        .for_each(|(row, column_row)| {
            let (c, kh, kw) = (row / (k * k), row / k % k, row % k);
            let plane = &x[c * in_len..(c + 1) * in_len];
            for (oh, dst) in column_row.chunks_exact_mut(out_w).enumerate() {
                let h = (oh * s + kh) as isize - p;
                if !(0..in_h).contains(&h) {
                    dst.fill(0.0);
                    continue;
                }
                let src = &plane[(h * in_w) as usize..][..in_w as usize];
                for (ow, v) in dst.iter_mut().enumerate() {
                    let w = (ow * s + kw) as isize - p;
                    *v = if (0..in_w).contains(&w) {
                        src[w as usize]
                    } else {
                        0.0
                    };
                }
            }
        });
    columns
}

/// The previous `conv_f32`: whole-image im2col (1x1 read in place), then one batched GEMM.
fn conv_before(g: &ConvGeometry, x: &[f32], wt: &[f32], out: &mut [f32]) {
    let (cg, mg) = (g.in_channels / g.groups, g.out_channels / g.groups);
    let reduction = cg * g.kernel.iter().product::<usize>();
    let out_len: usize = g.out_spatial().iter().product();
    let pointwise = g.kernel == [1, 1] && g.strides == [1, 1];
    let columns = if pointwise {
        x.to_vec()
    } else {
        im2col_full(g, x)
    };
    gemm(
        g.groups,
        mg,
        out_len,
        reduction,
        MatRef::row_major(wt, mg, reduction),
        MatRef::row_major(&columns, reduction, out_len),
        Epilogue::None,
        out,
    );
}

/// The same im2col, then `matrixmultiply::sgemm` per group.
fn conv_matrixmultiply(g: &ConvGeometry, x: &[f32], wt: &[f32], out: &mut [f32]) {
    let (cg, mg) = (g.in_channels / g.groups, g.out_channels / g.groups);
    let reduction = cg * g.kernel.iter().product::<usize>();
    let out_len: usize = g.out_spatial().iter().product();
    let columns = im2col_full(g, x);
    for grp in 0..g.groups {
        // SAFETY: the pointers and strides describe live buffers of the sizes used.
        unsafe {
            matrixmultiply::sgemm(
                mg,
                reduction,
                out_len,
                1.0,
                wt[grp * mg * reduction..].as_ptr(),
                reduction as isize,
                1,
                columns[grp * reduction * out_len..].as_ptr(),
                out_len as isize,
                1,
                0.0,
                out[grp * mg * out_len..].as_mut_ptr(),
                out_len as isize,
                1,
            )
        };
    }
}

fn run_child(threads: usize) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool");
    let filter = std::env::var(FILTER_ENV).unwrap_or_default();
    for shape in SHAPES.into_iter().filter(|s| s.0.contains(&filter)) {
        let g = geometry(shape);
        let (xl, wl, ol) = g.sizes();
        let x: Vec<f32> = (0..xl).map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0).collect();
        let wt: Vec<f32> = (0..wl).map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0).collect();
        let mut out = vec![0.0f32; ol];
        let budget = Duration::from_millis(600);
        let ours =
            pool.install(|| timing::measure(budget, || conv_f32(&g, &x, &wt, None, &mut out)));
        let before =
            pool.install(|| timing::measure(budget, || conv_before(&g, &x, &wt, &mut out)));
        let theirs =
            pool.install(|| timing::measure(budget, || conv_matrixmultiply(&g, &x, &wt, &mut out)));
        let ms = |t: Duration| t.as_secs_f64() * 1e3;
        let cpu = |t: Option<Duration>| t.map_or(f64::NAN, ms);
        println!(
            "| {} | {threads} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} | {:.1}x / {:.1}x | {:.2} / {:.2} |",
            shape.0,
            ms(ours.0),
            cpu(ours.1),
            ms(before.0),
            cpu(before.1),
            ms(theirs.0),
            cpu(theirs.1),
            ms(before.0) / ms(ours.0),
            cpu(before.1) / cpu(ours.1),
            ms(theirs.0) / ms(ours.0),
            cpu(theirs.1) / cpu(ours.1),
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
        "| conv (1 image, pad k/2) | threads | samebits ms wall / cpu | before ms wall / cpu \
         | im2col+matrixmultiply ms wall / cpu | speed-up vs before wall / cpu \
         | ratio vs matrixmultiply wall / cpu |"
    );
    println!("|---|---|---|---|---|---|---|");
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
