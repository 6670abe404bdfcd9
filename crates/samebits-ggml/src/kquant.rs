//! The 256-element "k-quant" super-block types: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. Layouts after ggml's
//! `block_q4_K`, `block_q5_K`, `block_q6_K`; formulas from `docs/gguf.md`, section
//! "Q4_K, Q5_K, Q6_K" and "Q2_K, Q3_K".

use super::{BlockFormat, f16_at};

pub struct Q2K;
pub struct Q3K;
pub struct Q4K;
pub struct Q5K;
pub struct Q6K;

/// The 6-bit (scale, min) of sub-block `j` (0..8) packed in the 12 bytes `packed` of a Q4_K or
/// Q5_K super-block: sub-blocks 0..4 use the low 6 bits of bytes `j` and `j + 4`; sub-blocks
/// 4..8 use a nibble of byte `j + 4` plus the top 2 bits of bytes `j - 4` and `j`.
#[inline(always)]
fn scale_and_min(packed: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (packed[j] & 63, packed[j + 4] & 63)
    } else {
        (
            (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4),
            (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
        )
    }
}

/// Shared body of Q4_K and Q5_K: `code(g, l, high)` is the unsigned code of element
/// `64 g + 32 high + l`, which belongs to sub-block `2 g + high`.
/// `x = fma(d * sc, q, -(dmin * mn))` with both products exact.
#[inline(always)]
fn dequantize_scaled_min(block: &[u8], out: &mut [f32], code: impl Fn(usize, usize, usize) -> u8) {
    let d = f16_at(block, 0);
    let dmin = f16_at(block, 2);
    let packed = &block[4..16];
    for (sub, out) in out.chunks_exact_mut(32).enumerate() {
        let (sc, mn) = scale_and_min(packed, sub);
        let scale = d * f32::from(sc);
        let offset = -(dmin * f32::from(mn));
        let (g, high) = (sub / 2, sub % 2);
        for (l, o) in out.iter_mut().enumerate() {
            *o = scale.mul_add(f32::from(code(g, l, high)), offset);
        }
    }
}

impl BlockFormat for Q4K {
    const ELEMS: usize = 256;
    const BYTES: usize = 144;
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let qs = &block[16..144];
        dequantize_scaled_min(block, out, |g, l, high| {
            (qs[32 * g + l] >> (4 * high)) & 0x0F
        });
    }
}

impl BlockFormat for Q5K {
    const ELEMS: usize = 256;
    const BYTES: usize = 176;
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let qh = &block[16..48];
        let qs = &block[48..176];
        dequantize_scaled_min(block, out, |g, l, high| {
            let low = (qs[32 * g + l] >> (4 * high)) & 0x0F;
            low | (((qh[l] >> (2 * g + high)) & 1) << 4)
        });
    }
}

impl BlockFormat for Q6K {
    const ELEMS: usize = 256;
    const BYTES: usize = 210;
    /// Each half of 128 elements uses 64 bytes of `ql`, 32 of `qh` and 8 scales; element
    /// `32 r + l` of a half (r in 0..4) takes the nibble `r / 2` of `ql[l + 32 (r % 2)]`, bits
    /// `2 r, 2 r + 1` of `qh[l]` as bits 4, 5, and scale `8 h + 2 r + l / 16`.
    /// `x = (d * sc) * (q - 32)` (exact).
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let ql = &block[0..128];
        let qh = &block[128..192];
        let scales = &block[192..208];
        let d = f16_at(block, 208);
        for (h, out) in out.chunks_exact_mut(128).enumerate() {
            let (ql, qh) = (&ql[64 * h..64 * h + 64], &qh[32 * h..32 * h + 32]);
            for (r, out) in out.chunks_exact_mut(32).enumerate() {
                for (l, o) in out.iter_mut().enumerate() {
                    let low = (ql[l + 32 * (r % 2)] >> (4 * (r / 2))) & 0x0F;
                    let code = low | (((qh[l] >> (2 * r)) & 3) << 4);
                    let sc = scales[8 * h + 2 * r + l / 16] as i8;
                    *o = (d * f32::from(sc)) * (i32::from(code) - 32) as f32;
                }
            }
        }
    }
}

/// The 2-bit code of element `e` (0..256) of Q2_K / Q3_K's 64 code bytes `qs`: element
/// `128 g + 32 s + l` takes bits `2 s, 2 s + 1` of `qs[32 g + l]`.
#[inline(always)]
fn two_bit_code(qs: &[u8], e: usize) -> u8 {
    let (g, s, l) = (e / 128, (e / 32) % 4, e % 32);
    (qs[32 * g + l] >> (2 * s)) & 3
}

impl BlockFormat for Q2K {
    const ELEMS: usize = 256;
    const BYTES: usize = 84;
    /// `scales[16], qs[64], d: f16, dmin: f16`: sub-block `j = e / 16` has
    /// `dl = d * (scales[j] & 15)`, `ml = dmin * (scales[j] >> 4)` (both exact);
    /// `x = dl * q - ml` (the product exact, one rounding).
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let (scales, qs) = (&block[0..16], &block[16..80]);
        let (d, dmin) = (f16_at(block, 80), f16_at(block, 82));
        for (e, o) in out.iter_mut().enumerate() {
            let sc = scales[e / 16];
            let (dl, ml) = (d * f32::from(sc & 15), dmin * f32::from(sc >> 4));
            *o = dl * f32::from(two_bit_code(qs, e)) - ml;
        }
    }
}

impl BlockFormat for Q3K {
    const ELEMS: usize = 256;
    const BYTES: usize = 110;
    /// `hmask[32], qs[64], scales[12], d: f16`: sub-block `j = e / 16` has the 6-bit scale
    /// `((scales[j % 8] >> 4 (j / 8)) & 15) | ((scales[8 + j % 4] >> 2 (j / 4)) & 3) << 4`,
    /// minus 32; element `e` has the 2-bit code, minus 4 when bit `e / 32` of `hmask[e % 32]` is
    /// clear; `x = (d * scale) * q` (both products exact).
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let (hmask, qs, scales) = (&block[0..32], &block[32..96], &block[96..108]);
        let d = f16_at(block, 108);
        for (e, o) in out.iter_mut().enumerate() {
            let j = e / 16;
            let low = (scales[j % 8] >> (4 * (j / 8))) & 15;
            let high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
            let scale = i32::from(low | (high << 4)) - 32;
            let clear = (hmask[e % 32] >> (e / 32)) & 1 == 0;
            let q = i32::from(two_bit_code(qs, e)) - if clear { 4 } else { 0 };
            *o = (d * scale as f32) * q as f32;
        }
    }
}
