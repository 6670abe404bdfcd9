//! GPU exhaustive check: evaluates every function of csrc/sb_math.h on the GPU (NVRTC, with
//! --fmad=false --prec-div=true --prec-sqrt=true) over all 2^32 binary32 inputs and compares
//! the bits with the CPU build. NaN results match when both are NaN (both are the canonical NaN
//! by construction, so a differing NaN is reported separately).
//!
//! `--pow-samples N` also compares `pow` on N deterministic pairs
//! (`samebits_math::sampling::pow_sample_pairs`) plus the special-value grid.
//!
//! Run (on a machine with CUDA 13 and an sm_90 GPU):
//!   cargo run --release -p samebits-math --features cuda --example gpu_exhaustive -- [NAMES...]
//!       [--pow-samples N]
//! NAMES are UnaryFn names (`exp`) or activation names (`gelu_erf`); none means all.
//! Exits 2 when the CUDA driver or NVRTC is missing, 1 on any mismatch.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};
use rayon::prelude::*;
use samebits_math::sampling::{pow_sample_pairs, pow_special_pairs};
use samebits_math::{Activation, CUDA_SOURCE, UnaryFn};

const KERNELS: &str = include_str!("../csrc/sb_math_check.cu");
const CHUNK: u32 = 1 << 26;

/// What one GPU kernel computes: a correctly rounded function or an activation formula.
#[derive(Clone, Copy)]
enum Checked {
    Unary(UnaryFn),
    Activation(Activation),
}

impl Checked {
    fn name(self) -> &'static str {
        match self {
            Checked::Unary(f) => f.name(),
            Checked::Activation(a) => a.name(),
        }
    }

    fn kernel_name(self) -> String {
        match self {
            Checked::Unary(f) => format!("check_{}", f.name()),
            Checked::Activation(a) => format!("check_act_{}", a.name()),
        }
    }

    /// The activation's parameters in the kernel's (p0, p1) order.
    fn params(self) -> (f32, f32) {
        match self {
            Checked::Activation(Activation::HardSigmoid { alpha, beta }) => (alpha, beta),
            Checked::Activation(
                Activation::Elu { alpha }
                | Activation::Celu { alpha }
                | Activation::LeakyRelu { alpha },
            ) => (alpha, 0.0),
            Checked::Activation(Activation::Selu { alpha, gamma }) => (alpha, gamma),
            _ => (0.0, 0.0),
        }
    }

    fn eval_cpu(self, src: &[f32], dst: &mut [f32]) {
        match self {
            Checked::Unary(f) => f.eval_slice(src, dst),
            Checked::Activation(a) => a.eval_slice(src, dst),
        }
    }
}

/// Mismatches (count, canonical-NaN differences, first examples) of one function.
#[derive(Default)]
struct Report {
    mismatches: u64,
    nan_bit_differences: u64,
    examples: Vec<(u32, u32, u32)>,
}

impl Report {
    fn merge(mut self, other: Report) -> Report {
        self.mismatches += other.mismatches;
        self.nan_bit_differences += other.nan_bit_differences;
        self.examples.extend(other.examples);
        self.examples.truncate(8);
        self
    }
}

/// Compares one chunk: `cpu` and `gpu` hold the results at `first`, `first + 1`, ...
fn compare(first: u32, cpu: &[f32], gpu: &[f32]) -> Report {
    cpu.par_chunks(1 << 16)
        .zip(gpu.par_chunks(1 << 16))
        .enumerate()
        .map(|(i, (cpu_part, gpu_part))| {
            let base = first + (i as u32) * (1 << 16);
            let mut r = Report::default();
            for (k, (c, g)) in cpu_part.iter().zip(gpu_part).enumerate() {
                if c.is_nan() && g.is_nan() {
                    if c.to_bits() != g.to_bits() {
                        r.nan_bit_differences += 1;
                    }
                } else if c.to_bits() != g.to_bits() {
                    r.mismatches += 1;
                    if r.examples.len() < 8 {
                        r.examples.push((base + k as u32, c.to_bits(), g.to_bits()));
                    }
                }
            }
            r
        })
        .reduce(Report::default, Report::merge)
}

/// All 2^32 inputs in chunks: the GPU kernel runs while the CPU evaluates the same chunk, then
/// the GPU results are copied back into a reused buffer and compared.
fn check(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    what: Checked,
) -> Result<Report, Box<dyn std::error::Error>> {
    let mut out = stream.alloc_zeros::<f32>(CHUNK as usize)?;
    let mut gpu = vec![0.0f32; CHUNK as usize];
    let mut cpu = vec![0.0f32; CHUNK as usize];
    let (p0, p1) = what.params();
    let mut report = Report::default();
    for chunk in 0..(1u64 << 32) / CHUNK as u64 {
        let first = chunk as u32 * CHUNK;
        let n = CHUNK;
        let mut launch = stream.launch_builder(func);
        launch.arg(&first).arg(&n);
        if matches!(what, Checked::Activation(_)) {
            launch.arg(&p0).arg(&p1);
        }
        launch.arg(&mut out);
        // SAFETY: the kernel writes n floats into `out`, which holds CHUNK = n floats.
        unsafe { launch.launch(LaunchConfig::for_num_elems(n))? };
        cpu.par_chunks_mut(1 << 16)
            .enumerate()
            .for_each(|(i, dst)| {
                let base = first + (i as u32) * (1 << 16);
                let src: Vec<f32> = (0..dst.len() as u32)
                    .map(|k| f32::from_bits(base + k))
                    .collect();
                what.eval_cpu(&src, dst);
            });
        stream.memcpy_dtoh(&out, &mut gpu)?;
        stream.synchronize()?;
        report = report.merge(compare(first, &cpu, &gpu));
    }
    Ok(report)
}

/// GPU/CPU mismatches of `pow` on the sampled pairs and the special grid: (mismatches, pairs).
fn check_pow(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    samples: usize,
) -> Result<(u64, usize), Box<dyn std::error::Error>> {
    let (mut xs, mut ys) = pow_sample_pairs(samples, 1);
    let (sx, sy) = pow_special_pairs();
    xs.extend(sx);
    ys.extend(sy);
    let mut mismatches = 0u64;
    for (x, y) in xs.chunks(CHUNK as usize).zip(ys.chunks(CHUNK as usize)) {
        let n = x.len() as u32;
        let dx = stream.clone_htod(x)?;
        let dy = stream.clone_htod(y)?;
        let mut out = stream.alloc_zeros::<f32>(x.len())?;
        let mut launch = stream.launch_builder(func);
        launch.arg(&dx).arg(&dy).arg(&n).arg(&mut out);
        // SAFETY: the kernel reads n pairs and writes n floats; all buffers hold n floats.
        unsafe { launch.launch(LaunchConfig::for_num_elems(n))? };
        let gpu = stream.clone_dtoh(&out)?;
        let mut cpu = vec![0.0f32; x.len()];
        cpu.par_chunks_mut(1 << 16)
            .zip(x.par_chunks(1 << 16).zip(y.par_chunks(1 << 16)))
            .for_each(|(dst, (xp, yp))| samebits_math::pow_slice(xp, yp, dst));
        for (i, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
            if c.to_bits() != g.to_bits() {
                if mismatches < 8 {
                    println!(
                        "  pow({:e}, {:e}): cpu 0x{:08x}, gpu 0x{:08x}",
                        x[i],
                        y[i],
                        c.to_bits(),
                        g.to_bits()
                    );
                }
                mismatches += 1;
            }
        }
    }
    Ok((mismatches, xs.len()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // SAFETY: these only probe whether the shared libraries can be loaded.
    let (driver, nvrtc) = unsafe {
        (
            cudarc::driver::sys::is_culib_present(),
            cudarc::nvrtc::sys::is_culib_present(),
        )
    };
    if !driver || !nvrtc {
        eprintln!(
            "gpu_exhaustive: CUDA is not available (driver library found: {driver}, NVRTC library found: {nvrtc}); \
             run this on a machine with the CUDA 13 driver and libnvrtc.so.13"
        );
        std::process::exit(2);
    }
    let all: Vec<Checked> = UnaryFn::IMPLEMENTED
        .iter()
        .map(|&f| Checked::Unary(f))
        .chain(Activation::ALL.iter().map(|&a| Checked::Activation(a)))
        .collect();
    let mut names = Vec::new();
    let mut pow_samples = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--pow-samples" {
            pow_samples = Some(
                args.next()
                    .and_then(|n| n.parse::<usize>().ok())
                    .expect("--pow-samples N"),
            );
        } else {
            names.push(arg);
        }
    }
    let selected: Vec<Checked> = if names.is_empty() {
        all
    } else {
        names
            .iter()
            .map(|n| {
                *all.iter()
                    .find(|c| c.name() == n)
                    .unwrap_or_else(|| panic!("unknown function {n}"))
            })
            .collect()
    };

    let source = format!("{CUDA_SOURCE}\n{KERNELS}");
    let options = CompileOptions {
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        use_fast_math: Some(false),
        arch: Some("sm_90"),
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(source, options)?;
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let module = ctx.load_module(ptx)?;

    let mut failed = Vec::new();
    for what in selected {
        let start = std::time::Instant::now();
        let func = module.load_function(&what.kernel_name())?;
        let report = check(&stream, &func, what)?;
        println!(
            "{}: {} GPU/CPU mismatches of 4294967296, {} NaN bit differences ({:.0} s)",
            what.name(),
            report.mismatches,
            report.nan_bit_differences,
            start.elapsed().as_secs_f64()
        );
        for (x, cpu, gpu) in &report.examples {
            println!("  x = 0x{x:08x}: cpu 0x{cpu:08x}, gpu 0x{gpu:08x}");
        }
        if report.mismatches != 0 || report.nan_bit_differences != 0 {
            failed.push(what.name());
        }
    }
    if let Some(samples) = pow_samples {
        let start = std::time::Instant::now();
        let (mismatches, pairs) = check_pow(&stream, &module.load_function("check_pow")?, samples)?;
        println!(
            "pow: {mismatches} GPU/CPU mismatches of {pairs} sampled pairs ({:.0} s)",
            start.elapsed().as_secs_f64()
        );
        if mismatches != 0 {
            failed.push("pow");
        }
    }
    if failed.is_empty() {
        println!("summary: GPU and CPU agree bit for bit on every checked function");
        Ok(())
    } else {
        println!("summary: mismatches in {}", failed.join(", "));
        std::process::exit(1);
    }
}
