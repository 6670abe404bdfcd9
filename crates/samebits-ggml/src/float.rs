//! Plain float types as one-element blocks: F32 (copied), F16 and BF16 (converted to f32 exactly).
//! `docs/gguf.md`, section "F32, F16, BF16".

use super::{BlockFormat, f16_at};

pub struct F32;
pub struct F16;
pub struct BF16;

impl BlockFormat for F32 {
    const ELEMS: usize = 1;
    const BYTES: usize = 4;
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        out[0] = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
    }
}

impl BlockFormat for F16 {
    const ELEMS: usize = 1;
    const BYTES: usize = 2;
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        out[0] = f16_at(block, 0);
    }
}

impl BlockFormat for BF16 {
    const ELEMS: usize = 1;
    const BYTES: usize = 2;
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        out[0] = f32::from_bits(u32::from(u16::from_le_bytes([block[0], block[1]])) << 16);
    }
}
