//! The hardware limits `samebits bench --model` sets its CPU speeds against: the memory read
//! bandwidth (a STREAM-like probe) for decode, which reads every weight once per token, and the
//! float32 FMA peak (a probe of independent fused multiply-adds) for prefill, which is bound by
//! the products' arithmetic. What a test moves and computes per token comes from the GGUF file's
//! tensors and the model's configuration (README, issue #23's "know the limit" paragraph).

use rayon::prelude::*;
use samebits_gguf::{GgufFile, ModelConfig};
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

/// Bytes the bandwidth probe reads per pass: far beyond any cache.
const PROBE_BYTES: usize = 512 << 20;
/// FMA probe: iterations of its loop per thread.
const FMA_ITERATIONS: usize = 20_000_000;

/// The machine's measured limits, with the threads of the current rayon pool.
pub struct Limits {
    /// Memory read bandwidth, bytes per second (best of a few passes).
    pub read_bytes_per_s: f64,
    /// Float32 FMA peak, FLOP per second (2 per lane per FMA; best of a few runs).
    pub flop_per_s: f64,
    /// The instructions the FMA probe used.
    pub fma_path: &'static str,
}

/// What one token costs the model: bytes read and products' FLOP, from the GGUF file.
pub struct TokenCost {
    /// Weight bytes the products read per decode token (every matrix once; the embedding
    /// table only when the output head reads it, tied).
    pub weight_bytes: f64,
    /// Multiply-adds of the products per token (the matrices' elements).
    pub product_elements: f64,
    /// Key and value bytes read per cached position, all layers.
    pub kv_bytes_per_position: f64,
    /// Attention multiply-adds per cached position (scores and weighted values), all layers.
    pub attention_elements_per_position: f64,
}

impl TokenCost {
    pub fn of(path: &Path, config: &ModelConfig) -> anyhow::Result<TokenCost> {
        let file = GgufFile::open(path)?;
        let (mut weight_bytes, mut product_elements) = (0f64, 0f64);
        for t in file.tensor_infos() {
            let matrix = t.dims.len() == 2 && t.dims.iter().all(|&d| d > 1);
            let read = t.name != "token_embd.weight" || config.tied_embeddings;
            if matrix && read {
                weight_bytes += t.size as f64;
                product_elements += t.numel() as f64;
            }
        }
        let kv = (config.block_count * config.head_count_kv * config.head_dim) as f64;
        Ok(TokenCost {
            weight_bytes,
            product_elements,
            kv_bytes_per_position: 2.0 * kv * 4.0,
            attention_elements_per_position: 2.0
                * (config.block_count * config.head_count * config.head_dim) as f64,
        })
    }
}

impl Limits {
    /// Runs both probes on the current rayon pool's threads.
    pub fn measure() -> Limits {
        let (flop_per_s, fma_path) = fma_peak();
        Limits {
            read_bytes_per_s: read_bandwidth(),
            flop_per_s,
            fma_path,
        }
    }
}

/// Best of 3 passes that sum [`PROBE_BYTES`] of u64 words, split over the pool's threads.
fn read_bandwidth() -> f64 {
    let words = vec![1u64; PROBE_BYTES / 8];
    let chunk = words.len().div_ceil(rayon::current_num_threads().max(1));
    let pass = || {
        let start = Instant::now();
        let sum: u64 = words
            .par_chunks(chunk)
            .map(|c| c.iter().fold(0u64, |a, &w| a.wrapping_add(w)))
            .sum();
        black_box(sum);
        PROBE_BYTES as f64 / start.elapsed().as_secs_f64()
    };
    pass();
    (0..3).map(|_| pass()).fold(0.0, f64::max)
}

/// Best of 3 runs of every pool thread running [`FMA_ITERATIONS`] rounds of independent FMAs.
fn fma_peak() -> (f64, &'static str) {
    let threads = rayon::current_num_threads().max(1);
    let (per_thread, path): (fn() -> f64, &'static str) = fma_kernel();
    let run = || {
        let start = Instant::now();
        let flop: f64 = (0..threads).into_par_iter().map(|_| per_thread()).sum();
        flop / start.elapsed().as_secs_f64()
    };
    run();
    ((0..3).map(|_| run()).fold(0.0, f64::max), path)
}

/// The widest FMA this CPU has: the probe for one thread (returns the FLOP it did) and its name.
fn fma_kernel() -> (fn() -> f64, &'static str) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return (x86::fma_avx512, "avx512 fma");
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return (x86::fma_avx2, "avx2 fma");
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        return (arm::fma_neon, "neon fma");
    }
    #[allow(unreachable_code)]
    (fma_scalar, "scalar fma")
}

/// Accumulators the probes keep in flight (more than an FMA's latency times its units).
const CHAINS: usize = 12;

fn fma_scalar() -> f64 {
    let mut acc = [1.0f32; CHAINS];
    let (a, b) = (black_box(0.999_999f32), black_box(1e-7f32));
    for _ in 0..FMA_ITERATIONS / 16 {
        for x in acc.iter_mut() {
            *x = x.mul_add(a, b);
        }
    }
    black_box(acc);
    (FMA_ITERATIONS / 16 * CHAINS * 2) as f64
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{CHAINS, FMA_ITERATIONS};
    use std::arch::x86_64::*;
    use std::hint::black_box;

    pub fn fma_avx512() -> f64 {
        // SAFETY: chosen only where the CPU reports avx512f.
        unsafe { run_avx512() }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn run_avx512() -> f64 {
        let a = _mm512_set1_ps(black_box(0.999_999));
        let b = _mm512_set1_ps(black_box(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..FMA_ITERATIONS {
            for x in acc.iter_mut() {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        black_box(acc);
        (FMA_ITERATIONS * CHAINS * 16 * 2) as f64
    }

    pub fn fma_avx2() -> f64 {
        // SAFETY: chosen only where the CPU reports avx2 and fma.
        unsafe { run_avx2() }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2() -> f64 {
        let a = _mm256_set1_ps(black_box(0.999_999));
        let b = _mm256_set1_ps(black_box(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..FMA_ITERATIONS {
            for x in acc.iter_mut() {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        black_box(acc);
        (FMA_ITERATIONS * CHAINS * 8 * 2) as f64
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use super::{CHAINS, FMA_ITERATIONS};
    use std::arch::aarch64::*;
    use std::hint::black_box;

    pub fn fma_neon() -> f64 {
        // SAFETY: NEON is part of every aarch64 CPU.
        unsafe { run_neon() }
    }

    #[target_feature(enable = "neon")]
    unsafe fn run_neon() -> f64 {
        let a = vdupq_n_f32(black_box(0.999_999));
        let b = vdupq_n_f32(black_box(1e-7));
        let mut acc = [vdupq_n_f32(1.0); CHAINS];
        for _ in 0..FMA_ITERATIONS {
            for x in acc.iter_mut() {
                *x = vfmaq_f32(b, *x, a);
            }
        }
        black_box(acc);
        (FMA_ITERATIONS * CHAINS * 4 * 2) as f64
    }
}
