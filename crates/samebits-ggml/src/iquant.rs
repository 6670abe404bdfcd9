//! The 4-bit non-linear "i-quant" types IQ4_NL and IQ4_XS: codes index one fixed table of 16
//! signed values ([`IQ4_NL_VALUES`]). Layouts after ggml's `block_iq4_nl` and `block_iq4_xs`;
//! formulas from `docs/gguf.md`, section "IQ4_NL, IQ4_XS". Every value is one product of exact
//! factors (an f16 scale, or that scale times a 6-bit integer, and a table entry), rounded once.

use super::{BlockFormat, f16_at};

pub struct Iq4Nl;
pub struct Iq4Xs;

/// The values a 4-bit IQ4 code stands for (ggml's `kvalues_iq4nl`); the CUDA kernels get this
/// table generated from here.
pub const IQ4_NL_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// 32 values of 16 code bytes: element `j < 16` from the low nibble of `qs[j]`, element
/// `j + 16` from its high nibble, each `scale * table[code]`.
#[inline(always)]
fn nibbles(qs: &[u8], scale: f32, out: &mut [f32]) {
    for (j, &q) in qs.iter().enumerate() {
        out[j] = scale * f32::from(IQ4_NL_VALUES[usize::from(q & 0x0F)]);
        out[j + 16] = scale * f32::from(IQ4_NL_VALUES[usize::from(q >> 4)]);
    }
}

impl BlockFormat for Iq4Nl {
    const ELEMS: usize = 32;
    const BYTES: usize = 18;
    /// `d: f16, qs[16]`: `x = d * table[q]`.
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        nibbles(&block[2..18], f16_at(block, 0), out);
    }
}

impl BlockFormat for Iq4Xs {
    const ELEMS: usize = 256;
    const BYTES: usize = 136;
    /// `d: f16, scales_h: u16, scales_l[4], qs[128]`: sub-block `s` (0..8) has the 6-bit scale
    /// `ls = ((scales_l[s / 2] >> 4 (s % 2)) & 15) | ((scales_h >> 2 s) & 3) << 4` and takes the
    /// 16 code bytes `qs[16 s ..]` as IQ4_NL does, `x = (d * (ls - 32)) * table[q]`.
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let d = f16_at(block, 0);
        let scales_h = u16::from_le_bytes([block[2], block[3]]);
        let (scales_l, qs) = (&block[4..8], &block[8..136]);
        for (s, out) in out.chunks_exact_mut(32).enumerate() {
            let low = (scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
            let ls = i32::from(low) | ((i32::from(scales_h >> (2 * s)) & 3) << 4);
            nibbles(&qs[16 * s..16 * s + 16], d * (ls - 32) as f32, out);
        }
    }
}
