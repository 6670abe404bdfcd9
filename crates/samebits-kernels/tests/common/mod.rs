//! Shared test helpers: a deterministic generator, bitwise comparison, ISA and thread sweeps.
#![allow(dead_code)]

use samebits_kernels::{Isa, with_isa};

/// xorshift64* generator: reproducible test data without external crates.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1) scaled by a random power of two in [2^-4, 2^4], so that sums
    /// round differently in different orders; about 1% exact zeros of either sign.
    pub fn value(&mut self) -> f32 {
        let r = self.next_u64();
        match r % 100 {
            0 => 0.0,
            1 => -0.0,
            _ => {
                let unit = ((r >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
                unit * 2f32.powi(((r >> 8) % 9) as i32 - 4)
            }
        }
    }

    pub fn vec(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.value()).collect()
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Asserts two slices are equal bit for bit, reporting the first difference.
pub fn assert_bits_eq(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!(
            "{what}: element {i} differs: got {:e} ({:#010x}), want {:e} ({:#010x})",
            got[i],
            got[i].to_bits(),
            want[i],
            want[i].to_bits()
        );
    }
}

/// Runs `f` once per available ISA, forced on the calling thread, and returns the results.
pub fn on_every_isa<R>(mut f: impl FnMut() -> R) -> Vec<(Isa, R)> {
    Isa::available()
        .into_iter()
        .map(|isa| (isa, with_isa(isa, &mut f)))
        .collect()
}

/// Runs `f` inside a local rayon pool of `threads` threads with `isa` forced.
pub fn on_threads<R: Send>(threads: usize, isa: Isa, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
        .install(|| with_isa(isa, f))
}
