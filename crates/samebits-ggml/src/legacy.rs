//! The 32-element block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0. Layouts after ggml's `block_q4_0`
//! .. `block_q8_0`; formulas from `docs/gguf.md`, section "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0".
//!
//! Element `i < 16` of a 4/5-bit block is the low nibble of `qs[i]`, element `i + 16` its high
//! nibble; Q5 types take bit 4 of element `j` from bit `j` of the little-endian u32 `qh`.

use super::{BlockFormat, f16_at};

pub struct Q4_0;
pub struct Q4_1;
pub struct Q5_0;
pub struct Q5_1;
pub struct Q8_0;

/// The 32 unsigned 4-bit codes of `qs` (16 bytes) in element order.
#[inline(always)]
fn nibbles(qs: &[u8]) -> [u8; 32] {
    let mut q = [0u8; 32];
    for (i, &b) in qs[..16].iter().enumerate() {
        q[i] = b & 0x0F;
        q[i + 16] = b >> 4;
    }
    q
}

/// The 32 unsigned 5-bit codes of `qh` (4 bytes) and `qs` (16 bytes) in element order.
#[inline(always)]
fn five_bit_codes(qh: &[u8], qs: &[u8]) -> [u8; 32] {
    let high = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    let mut q = nibbles(qs);
    for (j, code) in q.iter_mut().enumerate() {
        *code |= (((high >> j) & 1) as u8) << 4;
    }
    q
}

impl BlockFormat for Q4_0 {
    const ELEMS: usize = 32;
    const BYTES: usize = 18;
    /// `x = d * (q - 8)` (exact).
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let d = f16_at(block, 0);
        for (o, q) in out.iter_mut().zip(nibbles(&block[2..18])) {
            *o = d * (i32::from(q) - 8) as f32;
        }
    }
}

impl BlockFormat for Q4_1 {
    const ELEMS: usize = 32;
    const BYTES: usize = 20;
    /// `x = fma(d, q, m)`.
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let d = f16_at(block, 0);
        let m = f16_at(block, 2);
        for (o, q) in out.iter_mut().zip(nibbles(&block[4..20])) {
            *o = d.mul_add(f32::from(q), m);
        }
    }
}

impl BlockFormat for Q5_0 {
    const ELEMS: usize = 32;
    const BYTES: usize = 22;
    /// `x = d * (q - 16)` (exact).
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let d = f16_at(block, 0);
        for (o, q) in out
            .iter_mut()
            .zip(five_bit_codes(&block[2..6], &block[6..22]))
        {
            *o = d * (i32::from(q) - 16) as f32;
        }
    }
}

impl BlockFormat for Q5_1 {
    const ELEMS: usize = 32;
    const BYTES: usize = 24;
    /// `x = fma(d, q, m)`.
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let d = f16_at(block, 0);
        let m = f16_at(block, 2);
        for (o, q) in out
            .iter_mut()
            .zip(five_bit_codes(&block[4..8], &block[8..24]))
        {
            *o = d.mul_add(f32::from(q), m);
        }
    }
}

impl BlockFormat for Q8_0 {
    const ELEMS: usize = 32;
    const BYTES: usize = 34;
    /// `x = d * q` (exact).
    #[inline(always)]
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let d = f16_at(block, 0);
        for (o, &q) in out.iter_mut().zip(&block[2..34]) {
            *o = d * f32::from(q as i8);
        }
    }
}
