//! GPU check: compares every reproducible CUDA kernel family bit for bit with the CPU (the
//! samebits-ops op, or the samebits-kernels GEMM and reduction) on random cases, then times the
//! reproducible SGEMM and GEMVs (medians of CUDA-event timed runs) against a device-to-device
//! copy.
//!
//! Run on a machine with a GPU: `cargo run --release -p samebits-cuda --example gpu_check`.
//! `--source` prints the CUDA source instead (for nvcc -Xptxas -v); `--gemv` runs only the GEMV
//! timings (each GEMV still checked against the CPU) and the copy; `--sgemm` only the SGEMM
//! timings (each launch shape still checked against the CPU). Exits 2 without CUDA, 1 on any
//! mismatch. cuBLAS SGEMM is timed by `bench/cublas_sgemm.py`.

use cudarc::driver::sys::CUevent_flags;
use samebits_cuda::testing::{
    BROADCAST_SHAPES, CaseEpilogue, Device, GemmCase, REDUCE_KINDS, ROW_LENGTHS, Rng, Strides,
    bf16_gemv_cases, binary_nodes, first_difference, gemm_cases, large_gemm_case,
    nan_payload_differences, unary_nodes, vector_gemm_cases, wide_gemv_cases,
};
use samebits_cuda::{
    CudaBackend, DeviceBuffer, DeviceBytes, DeviceMat, DeviceMatBf16, GemmEpilogue, GemmLaunch,
    GemmShape,
};

/// Compared cases and elements, and the cases with any differing bit, of one kernel family.
#[derive(Default)]
struct Tally {
    cases: usize,
    elements: usize,
    mismatched_cases: usize,
    nan_payload_differences: usize,
    first_failure: Option<String>,
}

impl Tally {
    fn compare(&mut self, got: &[f32], want: &[f32], what: impl FnOnce() -> String) {
        self.cases += 1;
        self.elements += want.len();
        self.nan_payload_differences += nan_payload_differences(got, want);
        if let Some(i) = first_difference(got, want) {
            self.mismatched_cases += 1;
            if self.first_failure.is_none() {
                self.first_failure = Some(format!(
                    "{}: element {i}: gpu {:?} cpu {:?}",
                    what(),
                    got.get(i),
                    want.get(i)
                ));
            }
        }
    }
}

fn random_gemm_cases(seed: u64, count: usize) -> Vec<GemmCase> {
    let mut rng = Rng::new(seed);
    let special_k = [1, 63, 64, 65, 1000, 2048];
    (0..count)
        .map(|i| {
            let m = 1 + (rng.next_u64() % 64) as usize;
            let n = 1 + 2 * (rng.next_u64() % 150) as usize;
            let k = if i % 2 == 0 {
                special_k[(rng.next_u64() % 6) as usize]
            } else {
                1 + (rng.next_u64() % 1500) as usize
            };
            let batch = 1 + (rng.next_u64() % 3) as usize;
            let epilogue = match rng.next_u64() % 3 {
                0 => CaseEpilogue::None,
                1 => CaseEpilogue::ColumnBias,
                _ => CaseEpilogue::AlphaBeta(1.5, 0.25),
            };
            let (a_t, b_t) = (rng.next_u64() % 2 == 1, rng.next_u64() % 3 == 1);
            GemmCase::random(&mut rng, GemmShape { batch, m, n, k }, a_t, b_t, epilogue)
        })
        .collect()
}

fn check(gpu: &Device) -> Vec<(&'static str, Tally)> {
    let mut table = Vec::new();

    let mut gemm = Tally::default();
    let mut cases = gemm_cases(11);
    cases.extend(random_gemm_cases(12, 200));
    cases.push(large_gemm_case(13));
    cases.extend(wide_gemv_cases(15));
    cases.extend(vector_gemm_cases(16));
    for case in &cases {
        let want = Device::Cpu.gemm(case, GemmLaunch::Auto);
        for how in case.launches() {
            gemm.compare(&gpu.gemm(case, how), &want, || {
                format!("{:?} {how:?}", case.shape)
            });
        }
    }
    for case in &bf16_gemv_cases(17) {
        gemm.compare(
            &gpu.gemv_bf16(case),
            &Device::Cpu.gemm(case, GemmLaunch::Auto),
            || format!("bf16 weights {:?} {:?}", case.shape, case.b_strides),
        );
    }
    table.push(("gemm (every launch shape, bf16 weights)", gemm));

    let mut unary = Tally::default();
    let mut rng = Rng::new(14);
    let mut x = rng.any_floats(1 << 20);
    x.extend(rng.values(1 << 18, 20.0));
    for (_, node) in unary_nodes() {
        unary.compare(&gpu.unary(&node, &x), &Device::Cpu.unary(&node, &x), || {
            node.op_type.clone()
        });
    }
    table.push(("unary math + activations", unary));

    let mut binary = Tally::default();
    for (a_shape, b_shape) in BROADCAST_SHAPES {
        let a = rng.values(a_shape.iter().product(), 3.0);
        let b = rng.values(b_shape.iter().product(), 3.0);
        for (_, node) in binary_nodes() {
            binary.compare(
                &gpu.binary(&node, &a, a_shape, &b, b_shape),
                &Device::Cpu.binary(&node, &a, a_shape, &b, b_shape),
                || format!("{} {a_shape:?} {b_shape:?}", node.op_type),
            );
        }
    }
    table.push(("binary broadcast", binary));

    let (mut reduce, mut softmax, mut norm) =
        (Tally::default(), Tally::default(), Tally::default());
    for len in ROW_LENGTHS {
        for (outer, inner) in [(7, 1), (3, 5), (1, 33)] {
            let x = rng.values(outer * len * inner, 1.5);
            for kind in REDUCE_KINDS {
                reduce.compare(
                    &gpu.reduce(kind, &x, outer, len, inner),
                    &Device::Cpu.reduce(kind, &x, outer, len, inner),
                    || format!("{kind:?} [{outer}, {len}, {inner}]"),
                );
            }
        }
        let x = rng.values(5 * len, 30.0);
        for log in [false, true] {
            softmax.compare(
                &gpu.softmax(&x, len, log),
                &Device::Cpu.softmax(&x, len, log),
                || format!("len {len} log {log}"),
            );
        }
        let (scale, bias) = (rng.values(len, 2.0), rng.values(len, 1.0));
        for b in [None, Some(bias.as_slice())] {
            norm.compare(
                &gpu.layer_norm(&x, &scale, b, 1e-5),
                &Device::Cpu.layer_norm(&x, &scale, b, 1e-5),
                || format!("layer_norm len {len}"),
            );
        }
        norm.compare(
            &gpu.rms_norm(&x, &scale, 1e-6),
            &Device::Cpu.rms_norm(&x, &scale, 1e-6),
            || format!("rms_norm len {len}"),
        );
    }
    table.push(("reduce sum/sumsq/prod/max/min", reduce));
    table.push(("softmax / log-softmax", softmax));
    table.push(("layer_norm / rms_norm", norm));
    table
}

/// Median milliseconds of `runs` event-timed calls of `f` after `warmup` untimed ones.
fn median_ms(backend: &CudaBackend, warmup: usize, runs: usize, mut f: impl FnMut(usize)) -> f64 {
    for i in 0..warmup {
        f(i);
    }
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut times: Vec<f64> = (0..runs)
        .map(|i| {
            let start = backend.stream().record_event(flags).expect("event");
            f(i);
            let end = backend.stream().record_event(flags).expect("event");
            end.synchronize().expect("sync");
            f64::from(start.elapsed_ms(&end).expect("elapsed"))
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

/// Times a GEMV `[1, k] x W -> [1, n]`, W stored `[k, n]` (or `[n, k]` when `transposed`) in
/// f32 or bf16, rotating among enough weight copies to exceed the L2 cache; checks the bits
/// once. Returns (one call ms, GB/s, queued ms, GB/s, bit-identical).
fn bench_gemv(
    backend: &CudaBackend,
    k: usize,
    n: usize,
    transposed: bool,
    bf16: bool,
) -> (f64, f64, f64, f64, bool) {
    let mut rng = Rng::new(99);
    let x = rng.values(k, 1.0);
    let mut w = rng.values(k * n, 1.0);
    let elem = if bf16 { 2 } else { 4 };
    if bf16 {
        for v in &mut w {
            *v = f32::from_bits(v.to_bits() & 0xffff_0000);
        }
    }
    let copies = (256usize << 20).div_ceil(k * n * elem).max(1);
    let dx = backend.upload(&x).expect("upload");
    let (weights, weights16): (Vec<DeviceBuffer>, Vec<DeviceBytes>) = if bf16 {
        let bytes: Vec<u8> = w
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        let copies = (0..copies)
            .map(|_| backend.upload_bytes(&bytes).expect("upload"))
            .collect();
        (Vec::new(), copies)
    } else {
        let copies = (0..copies)
            .map(|_| backend.upload(&w).expect("upload"))
            .collect();
        (copies, Vec::new())
    };
    let strides = Strides::dense(k, n, transposed);
    let shape = GemmShape {
        batch: 1,
        m: 1,
        n,
        k,
    };
    let run = |i: usize| {
        let a = DeviceMat::row_major(&dx, 1, k);
        if bf16 {
            let b = DeviceMatBf16 {
                bytes: &weights16[i % copies],
                offset: 0,
                batch_stride: strides.batch,
                row_stride: strides.row,
                col_stride: strides.col,
            };
            backend.gemv_bf16(shape, a, b, GemmEpilogue::None)
        } else {
            let b = DeviceMat {
                buffer: &weights[i % copies],
                offset: 0,
                batch_stride: strides.batch,
                row_stride: strides.row,
                col_stride: strides.col,
            };
            backend.gemm(shape, a, b, GemmEpilogue::None, GemmLaunch::Auto)
        }
        .expect("gemv")
    };
    let got = backend.download(&run(0)).expect("download");
    let case = GemmCase {
        shape,
        a: x.clone(),
        a_strides: Strides::dense(1, k, false),
        b: w.clone(),
        b_strides: strides,
        epilogue: CaseEpilogue::None,
        c: Vec::new(),
    };
    let same = first_difference(&got, &Device::Cpu.gemm(&case, GemmLaunch::Auto)).is_none();
    let ms = median_ms(backend, 5, 51, |i| drop(run(i)));
    // Back to back: 20 calls queued between two events, so host launch time overlaps.
    let queued_ms = median_ms(backend, 1, 11, |i| {
        for q in 0..20 {
            drop(run(i * 20 + q));
        }
    }) / 20.0;
    let bytes = (k * n * elem + (k + n) * 4) as f64;
    (
        ms,
        bytes / ms / 1e6,
        queued_ms,
        bytes / queued_ms / 1e6,
        same,
    )
}

fn main() {
    if std::env::args().any(|a| a == "--source") {
        print!("{}", samebits_cuda::cuda_source());
        return;
    }
    let backend = match CudaBackend::new(0) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("gpu_check: {e}");
            std::process::exit(2);
        }
    };
    let (major, minor) = backend.compute_capability();
    println!(
        "device: {} (compute_{major}{minor}, {} SMs)",
        backend.device_name(),
        backend.sm_count()
    );
    let backend: &'static CudaBackend = Box::leak(Box::new(backend));
    let gpu = Device::Cuda(backend);
    let failed = if std::env::args().any(|a| a == "--gemv") {
        println!("\n| benchmark | median ms | rate | bit-identical to CPU |");
        println!("|---|---|---|---|");
        gemv_and_copy(backend, false)
    } else if std::env::args().any(|a| a == "--sgemm") {
        sgemm_timings(backend)
    } else {
        let failed = families(&gpu) | sgemm_timings(backend);
        gemv_and_copy(backend, failed)
    };
    if failed {
        println!("\nsummary: MISMATCHES between GPU and CPU");
        std::process::exit(1);
    }
    println!("\nsummary: GPU and CPU agree bit for bit on every case");
}

/// The kernel families' random cases; true on any mismatch.
fn families(gpu: &Device) -> bool {
    let table = check(gpu);
    println!(
        "\n| kernel family | cases | elements compared | cases with any differing bit | NaN-vs-NaN payload differences |"
    );
    println!("|---|---|---|---|---|");
    let mut failed = false;
    for (family, t) in &table {
        println!(
            "| {family} | {} | {} | {} | {} |",
            t.cases, t.elements, t.mismatched_cases, t.nan_payload_differences
        );
        failed |= t.mismatched_cases != 0;
    }
    for (family, t) in &table {
        if let Some(f) = &t.first_failure {
            println!("first mismatch in {family}: {f}");
        }
    }

    failed
}

/// SGEMM 4096^3 and two smaller products (an LLM prefill's shapes), every launch shape checked
/// against the CPU once and timed; true on any mismatch.
fn sgemm_timings(backend: &'static CudaBackend) -> bool {
    println!("\n| benchmark | median ms | rate | bit-identical to CPU |");
    println!("|---|---|---|---|");
    let mut failed = false;
    for (m, n, k) in [(4096, 4096, 4096), (1024, 4096, 4096), (512, 1536, 576)] {
        failed |= time_sgemm(backend, GemmShape { batch: 1, m, n, k });
    }
    failed
}

/// Times every tiled launch shape (and Auto) on one random product, checking each output
/// against the CPU; true on any mismatch.
fn time_sgemm(backend: &'static CudaBackend, shape: GemmShape) -> bool {
    let mut rng = Rng::new(7);
    let case = GemmCase::random(&mut rng, shape, false, false, CaseEpilogue::None);
    let GemmShape { m, n, k, .. } = shape;
    let (da, db) = (
        backend.upload(&case.a).expect("a"),
        backend.upload(&case.b).expect("b"),
    );
    let want = Device::Cpu.gemm(&case, GemmLaunch::Auto);
    let mut failed = false;
    for how in std::iter::once(GemmLaunch::Auto)
        .chain(GemmLaunch::FORCED)
        .filter(|&l| l != GemmLaunch::SplitK)
    {
        let run = || {
            backend
                .gemm(
                    shape,
                    DeviceMat::row_major(&da, m, k),
                    DeviceMat::row_major(&db, k, n),
                    GemmEpilogue::None,
                    how,
                )
                .expect("sgemm")
        };
        let same = first_difference(&backend.download(&run()).expect("download"), &want).is_none();
        failed |= !same;
        let ms = median_ms(backend, 3, 21, |_| drop(run()));
        let gflops = 2.0 * (m * n * k) as f64 / ms / 1e6;
        println!(
            "| reproducible SGEMM {m}x{n}x{k} {how:?} | {ms:.3} | {gflops:.0} GFLOP/s | {same} |"
        );
    }
    failed
}

/// The decode-shape GEMV timings (each checked against the CPU) and the copy bandwidth; true
/// on any mismatch, or when `failed` already is.
fn gemv_and_copy(backend: &'static CudaBackend, mut failed: bool) -> bool {
    for bf16 in [false, true] {
        for (k, n, transposed) in [
            (576, 1536, false),
            (1536, 576, false),
            (576, 49152, false),
            (576, 1536, true),
            (1536, 576, true),
            (576, 49152, true),
        ] {
            let (ms, gbs, queued_ms, queued_gbs, same) =
                bench_gemv(backend, k, n, transposed, bf16);
            failed |= !same;
            let layout = match (transposed, bf16) {
                (false, false) => "W [k, n]",
                (true, false) => "W [n, k]",
                (false, true) => "W [k, n] bf16",
                (true, true) => "W [n, k] bf16",
            };
            println!(
                "| GEMV 1x{k} -> {n}, {layout}, one call | {ms:.4} | {gbs:.0} GB/s | {same} |"
            );
            println!(
                "| GEMV 1x{k} -> {n}, {layout}, 20 queued calls | {queued_ms:.4} | {queued_gbs:.0} GB/s | {same} |"
            );
        }
    }

    let len = 64usize << 20;
    let src = backend.upload(&vec![1.0f32; len]).expect("upload");
    let mut dst = backend.alloc(len).expect("alloc");
    let ms = median_ms(backend, 3, 21, |_| {
        backend.copy(&src, &mut dst).expect("copy")
    });
    println!(
        "| device-to-device copy 256 MiB | {ms:.3} | {:.0} GB/s (read + write) | - |",
        2.0 * (len * 4) as f64 / ms / 1e6
    );

    failed
}
