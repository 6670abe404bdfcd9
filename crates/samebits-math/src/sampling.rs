//! Deterministic input pairs for the `pow` checks (tests, `examples/exhaustive.rs`,
//! `examples/gpu_exhaustive.rs`): pow cannot be checked exhaustively, so all checkers draw
//! from the same reproducible mix of pairs.

/// splitmix64: a deterministic stream of pseudo-random 64-bit words.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `count` (x, y) pairs from `seed`, a quarter each of: any bit patterns; positive x with
/// `|y ln x| < 100` (finite, non-trivial results); x within 2048 ulps of 1 with large y;
/// signed x with integer and half-integer y in [-16, 16).
#[must_use]
pub fn pow_sample_pairs(count: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut state = seed;
    let mut xs = Vec::with_capacity(count);
    let mut ys = Vec::with_capacity(count);
    for i in 0..count {
        let r = splitmix(&mut state);
        let (lo, hi) = (r as u32, (r >> 32) as u32);
        let (x, y) = match i % 4 {
            0 => (f32::from_bits(lo), f32::from_bits(hi)),
            1 => {
                let x = f32::from_bits(lo & 0x7fff_ffff);
                let t = (hi as f32 / u32::MAX as f32 - 0.5) * 200.0;
                (x, t / x.ln())
            }
            2 => {
                let x = f32::from_bits(0x3f80_0000u32.wrapping_add(lo % 4096).wrapping_sub(2048));
                (x, f32::from_bits(0x4000_0000 + hi % 0x0a00_0000))
            }
            _ => {
                let sign = if r >> 63 == 0 { 1.0 } else { -1.0 };
                (
                    f32::from_bits(lo & 0x7fff_ffff) * sign,
                    (hi % 64) as f32 * 0.5 - 16.0,
                )
            }
        };
        xs.push(x);
        ys.push(y);
    }
    (xs, ys)
}

/// Pairs of every special value with every other (C99 `powf` special cases).
#[must_use]
pub fn pow_special_pairs() -> (Vec<f32>, Vec<f32>) {
    let values = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        -3.0,
        2.5,
        -2.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        -f32::from_bits(1),
        16_777_216.0,
        16_777_217.0,
        -16_777_215.0,
        1e30,
        -1e30,
        // exact float midpoints: 4097^2, (257^2)^1.5 = 257^3, 2^-150
        4097.0,
        66049.0,
        1.5,
        2f32.powi(-75),
        2f32.powi(75),
    ];
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for &x in &values {
        for &y in &values {
            xs.push(x);
            ys.push(y);
        }
    }
    (xs, ys)
}
