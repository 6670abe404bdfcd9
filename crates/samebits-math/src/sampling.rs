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

/// `count` (x, y) pairs from `seed`, an eighth each of: any bit patterns; positive x with
/// `|y ln x| < 100` (finite, non-trivial results); x within 2048 ulps of 1 with large y;
/// signed x with integer and half-integer y in [-16, 16); results near overflow and in the
/// subnormal range (`y ln x` in [80, 89] or [-104, -87]); subnormal x; negative x with an
/// integer y of any size up to 2^24 (odd and even, results mostly finite); exact powers and
/// exact float midpoints (small integers and their squares with integer and half-integer y).
#[must_use]
pub fn pow_sample_pairs(count: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut state = seed;
    let mut xs = Vec::with_capacity(count);
    let mut ys = Vec::with_capacity(count);
    for i in 0..count {
        let r = splitmix(&mut state);
        let (lo, hi) = (r as u32, (r >> 32) as u32);
        // uniform in [0, 1) from the high word
        let unit = hi as f32 / 4_294_967_296.0;
        let (x, y) = match i % 8 {
            0 => (f32::from_bits(lo), f32::from_bits(hi)),
            1 => {
                let x = f32::from_bits(lo & 0x7fff_ffff);
                (x, (unit - 0.5) * 200.0 / x.ln())
            }
            2 => {
                let x = f32::from_bits(0x3f80_0000u32.wrapping_add(lo % 4096).wrapping_sub(2048));
                (x, f32::from_bits(0x4000_0000 + hi % 0x0a00_0000))
            }
            3 => {
                let sign = if r >> 63 == 0 { 1.0 } else { -1.0 };
                (
                    f32::from_bits(lo & 0x7fff_ffff) * sign,
                    (hi % 64) as f32 * 0.5 - 16.0,
                )
            }
            4 => {
                let x = f32::from_bits(lo & 0x7fff_ffff);
                let t = if hi & 1 == 0 {
                    80.0 + 9.0 * unit
                } else {
                    -104.0 + 17.0 * unit
                };
                (x, t / x.ln())
            }
            5 => {
                let x = f32::from_bits(1 + lo % 0x007f_ffff);
                (x, (unit - 0.5) * 200.0 / x.ln())
            }
            6 => {
                let x = -f32::from_bits(lo & 0x7fff_ffff);
                let t = (unit - 0.5) * 200.0 / (-x).ln();
                let n = if t.is_finite() {
                    t.round().clamp(-16_777_216.0, 16_777_216.0)
                } else {
                    (hi >> 8) as f32
                };
                (x, n)
            }
            _ => {
                let k = 2 + lo % 4096;
                let (x, y) = if hi & 1 == 0 {
                    (k as f32, (hi >> 1) % 41)
                } else {
                    ((k * k) as f32, (hi >> 1) % 9)
                };
                let y = y as f32 - if hi & 1 == 0 { 20.0 } else { 4.0 };
                let y = if hi & 1 == 0 { y } else { y + 0.5 };
                let x = if lo >> 31 == 0 { x } else { x * 2f32.powi(-12) };
                (x, y)
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
