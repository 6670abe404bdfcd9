//! The exact-integer tier of the panel products (operation set `reproducible-int8`;
//! `docs/contract.md`, section `int8-products`): the activations are quantized to 8-bit blocks by
//! one formula, each block's products are summed as exact integers (so in any order: AVX-512
//! VNNI `vpdpbusd`, AVX2 `vpmaddubsw`, or plain scalar code), and only the blocks' scaled sums
//! are rounded, folded in the canonical order.
//!
//! For an activation row `x` and a weight row, both cut into 32-element blocks:
//! 1. [`Int8Activations::quantize`], per block of `x`: `a = max |x_k|`, `d_x = a / 127`,
//!    `q_k = rint(x_k / d_x)` (ties to even; `q_k = 0` where `d_x = 0`), `S = Σ q_k` and
//!    `s_x = d_x · S` (f32, one rounding per operation).
//! 2. Per block, `i = Σ c_k q_k` over the weight's integer codes `c_k` (Q4_0: nibble − 8; Q4_1:
//!    nibble; Q8_0: the i8): exact (`|i| < 2^24`, so it is also exact as an f32).
//! 3. `p = fma(d_w · d_x, i, p)`, and for Q4_1 then `p = fma(m_w, s_x, p)`, from `p = +0.0` per
//!    tile of [`REDUCTION_TILE`] blocks; the tile partials folded left to right (`canonical_fold`
//!    over the blocks).
//!
//! A row of `x` with a NaN or an infinity gives NaN in every output of that row. [`int8_dot`] is
//! the scalar definition over a weight row in its ggml bytes; the panel kernels here (lanes =
//! rows, as for the f32 tier) are tested equal to it on every ISA path.

use super::{
    BLOCK, PANEL_ROWS, PanelFormat, PanelLanes, PanelMatrix, Q4_0P, Q4_1P, Q8_0P, next_panels,
    prefetch_share, store_panel,
};
use crate::{Isa, REDUCTION_TILE, canonical_fold};
use samebits_ggml::{GgmlType, QuantError, Result};
use std::ops::Range;

/// The weight types with an exact-integer product. The list is part of the tier's definition:
/// a product with a weight of another type is the f32 tier's (`docs/contract.md`).
pub const INT8_TYPES: [GgmlType; 3] = [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0];

/// Whether `ggml_type` has an exact-integer product (one of [`INT8_TYPES`]).
pub fn has_int8_products(ggml_type: GgmlType) -> bool {
    INT8_TYPES.contains(&ggml_type)
}

/// The largest code magnitude of a quantized activation.
const Q_MAX: f32 = 127.0;

/// Rows of activations quantized to 8-bit blocks (module docs, rule 1).
#[derive(Clone, Debug)]
pub struct Int8Activations {
    cols: usize,
    rows: usize,
    /// The codes, row by row in element order.
    codes: Vec<i8>,
    /// Per row and block, the codes as 8 little-endian u32 in the order the nibble panels
    /// pair them with: word `2g` = codes `8g, 8g+2, 8g+4, 8g+6`, word `2g+1` = `8g+1, .., 8g+7`.
    nibble_words: Vec<u32>,
    /// Per row and block: `d_x`.
    scales: Vec<f32>,
    /// Per row and block: `S = Σ q_k`.
    sums: Vec<i32>,
    /// Per row and block: `s_x = d_x · S`.
    scaled_sums: Vec<f32>,
    /// Per row: whether every activation is finite.
    finite: Vec<bool>,
}

impl Int8Activations {
    /// Quantizes the `x.len() / cols` rows of `x` (module docs, rule 1). `cols` must be a
    /// multiple of 32.
    pub fn quantize(x: &[f32], cols: usize) -> Result<Int8Activations> {
        if !cols.is_multiple_of(BLOCK)
            || (cols == 0 && !x.is_empty())
            || !x.len().is_multiple_of(cols.max(1))
        {
            return Err(QuantError(format!(
                "int8 activations: {} values are not whole rows of {cols} (a multiple of {BLOCK})",
                x.len()
            )));
        }
        let rows = x.len() / cols.max(1);
        let blocks = rows * cols / BLOCK;
        let mut q = Int8Activations {
            cols,
            rows,
            codes: vec![0; x.len()],
            nibble_words: vec![0; blocks * 8],
            scales: vec![0.0; blocks],
            sums: vec![0; blocks],
            scaled_sums: vec![0.0; blocks],
            finite: x
                .chunks_exact(cols.max(1))
                .map(|row| row.iter().all(|v| v.is_finite()))
                .collect(),
        };
        #[cfg(target_arch = "x86_64")]
        if Isa::active() != Isa::Scalar && Isa::Avx2.is_available() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            unsafe { q.fill_avx2(x) };
            return Ok(q);
        }
        q.fill(x);
        Ok(q)
    }

    /// [`Int8Activations::fill`] compiled for AVX2 (one `vroundps` per 8 codes instead of a
    /// call to `rintf`; the same IEEE operations, so the same codes).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn fill_avx2(&mut self, x: &[f32]) {
        self.fill(x)
    }

    /// Quantizes every block of `x` into `self` (sized for it).
    #[inline(always)]
    fn fill(&mut self, x: &[f32]) {
        for (b, block) in x.chunks_exact(BLOCK).enumerate() {
            let codes: &mut [i8; BLOCK] = (&mut self.codes[b * BLOCK..][..BLOCK])
                .try_into()
                .expect("32 codes");
            let d = quantize_block(block.try_into().expect("32 values"), codes);
            let sum: i32 = codes.iter().map(|&c| i32::from(c)).sum();
            self.scales[b] = d;
            self.sums[b] = sum;
            self.scaled_sums[b] = d * sum as f32;
            for g in 0..4 {
                let pick = |first: usize| {
                    u32::from_le_bytes(std::array::from_fn(|j| codes[8 * g + first + 2 * j] as u8))
                };
                self.nibble_words[b * 8 + 2 * g] = pick(0);
                self.nibble_words[b * 8 + 2 * g + 1] = pick(1);
            }
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `t`'s codes.
    pub fn codes(&self, t: usize) -> &[i8] {
        &self.codes[t * self.cols..][..self.cols]
    }

    /// Row `t`'s `d_x` per block.
    pub fn scales(&self, t: usize) -> &[f32] {
        &self.scales[t * self.cols / BLOCK..][..self.cols / BLOCK]
    }

    fn row(&self, t: usize) -> Row<'_> {
        let blocks = self.cols / BLOCK;
        let at = t * blocks;
        Row {
            codes: &self.codes[t * self.cols..][..self.cols],
            nibble_words: &self.nibble_words[at * 8..][..blocks * 8],
            scales: &self.scales[at..][..blocks],
            sums: &self.sums[at..][..blocks],
            scaled_sums: &self.scaled_sums[at..][..blocks],
        }
    }
}

/// One block's `d_x` and codes (module docs, rule 1).
#[inline(always)]
fn quantize_block(x: &[f32; BLOCK], codes: &mut [i8; BLOCK]) -> f32 {
    let a = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let d = a / Q_MAX;
    for (c, &v) in codes.iter_mut().zip(x) {
        // `v / d` lies in [-127, 127] up to one rounding, so rint stays in i8; the clamp only
        // keeps a non-finite row (NaN outputs anyway) well defined.
        *c = if d == 0.0 {
            0
        } else {
            (v / d).round_ties_even().clamp(-Q_MAX, Q_MAX) as i8
        };
    }
    d
}

/// One quantized row, borrowed.
#[derive(Clone, Copy)]
struct Row<'a> {
    codes: &'a [i8],
    nibble_words: &'a [u32],
    scales: &'a [f32],
    sums: &'a [i32],
    scaled_sums: &'a [f32],
}

impl Row<'_> {
    /// Codes `4j..4j + 4` of block `b` as a little-endian u32.
    #[inline(always)]
    fn byte_word(&self, b: usize, j: usize) -> u32 {
        let c = &self.codes[b * BLOCK + 4 * j..][..4];
        u32::from_le_bytes([c[0] as u8, c[1] as u8, c[2] as u8, c[3] as u8])
    }
}

/// The integer codes of a block of a weight type of [`INT8_TYPES`], from its ggml bytes, with
/// its scale `d_w` and min `m_w` (0 where the type has none): module docs, rule 2 (the device
/// form, `code_word` of samebits-cuda's `kernels/ggml.cu`, is tested equal to it).
pub fn int8_block_codes(ggml_type: GgmlType, block: &[u8]) -> ([i32; BLOCK], f32, f32) {
    let f16 = |at: usize| half::f16::from_le_bytes([block[at], block[at + 1]]).to_f32();
    let nibble = |qs: &[u8], k: usize| i32::from(if k < 16 { qs[k] & 15 } else { qs[k - 16] >> 4 });
    match ggml_type {
        GgmlType::Q4_0 => (
            std::array::from_fn(|k| nibble(&block[2..18], k) - 8),
            f16(0),
            0.0,
        ),
        GgmlType::Q4_1 => (
            std::array::from_fn(|k| nibble(&block[4..20], k)),
            f16(0),
            f16(2),
        ),
        _ => (
            std::array::from_fn(|k| i32::from(block[2 + k] as i8)),
            f16(0),
            0.0,
        ),
    }
}

/// The exact-integer product (module docs) of the weight row `row` (its ggml blocks, of a type
/// of [`INT8_TYPES`]) with row `t` of `x`: the scalar definition every kernel is tested against.
pub fn int8_dot(ggml_type: GgmlType, row: &[u8], x: &Int8Activations, t: usize) -> Result<f32> {
    let block_bytes = ggml_type.block_bytes();
    if !has_int8_products(ggml_type) || t >= x.rows || row.len() != x.cols / BLOCK * block_bytes {
        return Err(QuantError(format!(
            "int8 product of a {ggml_type} row of {} bytes with row {t} of {} rows of {}",
            row.len(),
            x.rows,
            x.cols
        )));
    }
    if !x.finite[t] {
        return Ok(f32::NAN);
    }
    let xr = x.row(t);
    Ok(canonical_fold(
        x.cols / BLOCK,
        0.0,
        |p, b| {
            let (codes, d, m) = int8_block_codes(ggml_type, &row[b * block_bytes..][..block_bytes]);
            let i: i32 = (0..BLOCK)
                .map(|k| codes[k] * i32::from(xr.codes[b * BLOCK + k]))
                .sum();
            let p = (d * xr.scales[b]).mul_add(i as f32, p);
            if ggml_type == GgmlType::Q4_1 {
                m.mul_add(xr.scaled_sums[b], p)
            } else {
                p
            }
        },
        |s, p| s + p,
    ))
}

impl PanelMatrix<'_> {
    /// `out[t * n + (r - first)]` = the exact-integer product (module docs) of row `r` with
    /// row `t` of `x`, for the rows `r` of `panels` (`first` its first row, `n` its rows that
    /// are not padding); `isa` picks the code path, never the bits. The weight type must be one
    /// of [`INT8_TYPES`].
    pub fn matmul_int8(
        &self,
        panels: Range<usize>,
        x: &Int8Activations,
        out: &mut [f32],
        isa: Isa,
    ) -> Result<()> {
        let first = panels.start * PANEL_ROWS;
        let n = (panels.end * PANEL_ROWS)
            .min(self.rows)
            .saturating_sub(first);
        if !has_int8_products(self.ggml_type)
            || panels.end > self.panels()
            || panels.start > panels.end
            || x.cols != self.cols
            || out.len() != x.rows * n
        {
            return Err(QuantError(format!(
                "int8 product of panels {panels:?} of a [{}, {}] {} matrix with {} rows of {} \
                 activations into {} outputs",
                self.rows,
                self.cols,
                self.ggml_type,
                x.rows,
                x.cols,
                out.len()
            )));
        }
        let mut job = Job {
            panels: &self.bytes
                [panels.start * self.panel_stride()..panels.end * self.panel_stride()],
            panel_stride: self.panel_stride(),
            blocks: self.cols / BLOCK,
            x,
            out,
            n,
        };
        match self.ggml_type {
            GgmlType::Q4_0 => run_format::<Q4_0P>(&mut job, isa),
            GgmlType::Q4_1 => run_format::<Q4_1P>(&mut job, isa),
            _ => run_format::<Q8_0P>(&mut job, isa),
        }
        for t in (0..x.rows).filter(|&t| !x.finite[t]) {
            out[t * n..][..n].fill(f32::NAN);
        }
        Ok(())
    }
}

/// One call's work: some consecutive panels times all rows of `x`.
struct Job<'a> {
    panels: &'a [u8],
    panel_stride: usize,
    blocks: usize,
    x: &'a Int8Activations,
    out: &'a mut [f32],
    /// Output rows that are not padding.
    n: usize,
}

/// How a panel block of a type of [`INT8_TYPES`] holds its integer codes.
trait Int8Format: PanelFormat {
    /// Where the codes start in the panel block.
    const CODES_AT: usize;
    /// 4-bit codes in 4 nibble groups (else i8 codes, element-major, in 8 groups of 4 elements).
    const NIBBLES: bool;
    /// Subtracted from each stored code (Q4_0: 8).
    const BIAS: i32;
    /// Whether the block has a min `m_w` (its 16 f16 right after the 16 scales).
    const MIN: bool;
}

impl Int8Format for Q4_0P {
    const CODES_AT: usize = 32;
    const NIBBLES: bool = true;
    const BIAS: i32 = 8;
    const MIN: bool = false;
}

impl Int8Format for Q4_1P {
    const CODES_AT: usize = 64;
    const NIBBLES: bool = true;
    const BIAS: i32 = 0;
    const MIN: bool = true;
}

impl Int8Format for Q8_0P {
    const CODES_AT: usize = 32;
    const NIBBLES: bool = false;
    const BIAS: i32 = 0;
    const MIN: bool = false;
}

/// [`PanelLanes`] with the integer block sums: 16 lanes (rows) of exact i32 sums of products
/// of 4 weight codes (bytes of a lane's u32) with 4 activation codes (one u32 for all lanes).
trait Int8Lanes: PanelLanes {
    /// 16 lanes of 4 code bytes.
    type Codes: Copy;
    /// 16 lanes of i32 sums.
    type Sums: Copy;
    /// Added to each i8 weight code by [`Int8Lanes::i8_codes`] (the sums then hold
    /// `BYTE_OFFSET · S` more, which the caller subtracts).
    const BYTE_OFFSET: i32;
    unsafe fn zero_sums() -> Self::Sums;
    /// The 16 lanes' u32 at `p` (8 nibbles each): their low nibbles, then their high nibbles.
    unsafe fn nibble_codes(p: *const u8) -> [Self::Codes; 2];
    /// The 64 bytes at `p` (byte `16 e + l` = code `e` of lane `l`), as 4 codes per lane.
    unsafe fn i8_codes(p: *const u8) -> Self::Codes;
    /// `s + Σ_j u8(code_j) · i8(word_j)` per lane (codes from [`Int8Lanes::nibble_codes`]).
    unsafe fn dot_u8(s: Self::Sums, codes: Self::Codes, word: u32) -> Self::Sums;
    /// The same for codes from [`Int8Lanes::i8_codes`].
    unsafe fn dot_i8(s: Self::Sums, codes: Self::Codes, word: u32) -> Self::Sums;
    /// `s - minus` per lane, as f32 (exact: every sum is below 2^24 in magnitude).
    unsafe fn finish(s: Self::Sums, minus: i32) -> Self;
}

/// The scalar lanes: plain integer arithmetic.
impl Int8Lanes for [f32; PANEL_ROWS] {
    type Codes = [u32; PANEL_ROWS];
    type Sums = [i32; PANEL_ROWS];
    const BYTE_OFFSET: i32 = 0;
    #[inline(always)]
    unsafe fn zero_sums() -> Self::Sums {
        [0; PANEL_ROWS]
    }
    #[inline(always)]
    unsafe fn nibble_codes(p: *const u8) -> [Self::Codes; 2] {
        // SAFETY: the caller passes 64 readable bytes.
        let b = unsafe { std::slice::from_raw_parts(p, 4 * PANEL_ROWS) };
        let u: [u32; PANEL_ROWS] = std::array::from_fn(|l| {
            u32::from_le_bytes(b[4 * l..4 * l + 4].try_into().expect("4 bytes"))
        });
        [
            u.map(|u| u & 0x0F0F_0F0F),
            u.map(|u| (u >> 4) & 0x0F0F_0F0F),
        ]
    }
    #[inline(always)]
    unsafe fn i8_codes(p: *const u8) -> Self::Codes {
        // SAFETY: the caller passes 64 readable bytes.
        let b = unsafe { std::slice::from_raw_parts(p, 4 * PANEL_ROWS) };
        std::array::from_fn(|l| {
            u32::from_le_bytes([b[l], b[PANEL_ROWS + l], b[2 * PANEL_ROWS + l], b[48 + l]])
        })
    }
    #[inline(always)]
    unsafe fn dot_u8(s: Self::Sums, codes: Self::Codes, word: u32) -> Self::Sums {
        std::array::from_fn(|l| {
            let (c, w) = (codes[l].to_le_bytes(), word.to_le_bytes());
            s[l] + (0..4)
                .map(|j| i32::from(c[j]) * i32::from(w[j] as i8))
                .sum::<i32>()
        })
    }
    #[inline(always)]
    unsafe fn dot_i8(s: Self::Sums, codes: Self::Codes, word: u32) -> Self::Sums {
        std::array::from_fn(|l| {
            let (c, w) = (codes[l].to_le_bytes(), word.to_le_bytes());
            s[l] + (0..4)
                .map(|j| i32::from(c[j] as i8) * i32::from(w[j] as i8))
                .sum::<i32>()
        })
    }
    #[inline(always)]
    unsafe fn finish(s: Self::Sums, minus: i32) -> Self {
        s.map(|v| (v - minus) as f32)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! [`Int8Lanes`](super::Int8Lanes) as one AVX-512 register (VNNI `vpdpbusd`) or a pair of
    //! AVX2 registers (`vpmaddubsw` + `vpmaddwd`, whose i16 pair sums cannot saturate here).
    use super::{Int8Lanes, PANEL_ROWS};
    use crate::lanes::Pair;
    use std::arch::x86_64::*;

    /// `vpermb` indices that turn 4 elements x 16 lanes (element-major) into 16 lanes x 4.
    const LANE_MAJOR: [u8; 64] = {
        let mut idx = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            idx[i] = ((i % 4) * PANEL_ROWS + i / 4) as u8;
            i += 1;
        }
        idx
    };

    impl Int8Lanes for __m512 {
        type Codes = __m512i;
        type Sums = __m512i;
        const BYTE_OFFSET: i32 = 128;
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn zero_sums() -> __m512i {
            _mm512_setzero_si512()
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn nibble_codes(p: *const u8) -> [__m512i; 2] {
            // SAFETY: the caller passes 64 readable bytes.
            let v = unsafe { _mm512_loadu_si512(p.cast()) };
            let mask = _mm512_set1_epi32(0x0F0F_0F0F);
            [
                _mm512_and_si512(v, mask),
                _mm512_and_si512(_mm512_srli_epi32::<4>(v), mask),
            ]
        }
        /// Bytes to lane-major order (`vpermb`), plus 128 so that they are unsigned.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
        unsafe fn i8_codes(p: *const u8) -> __m512i {
            // SAFETY: the caller passes 64 readable bytes; the index table is 64 bytes.
            let (v, idx) = unsafe {
                (
                    _mm512_loadu_si512(p.cast()),
                    _mm512_loadu_si512(LANE_MAJOR.as_ptr().cast()),
                )
            };
            _mm512_xor_si512(_mm512_permutexvar_epi8(idx, v), _mm512_set1_epi8(i8::MIN))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512vnni")]
        unsafe fn dot_u8(s: __m512i, codes: __m512i, word: u32) -> __m512i {
            _mm512_dpbusd_epi32(s, codes, _mm512_set1_epi32(word as i32))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512vnni")]
        unsafe fn dot_i8(s: __m512i, codes: __m512i, word: u32) -> __m512i {
            _mm512_dpbusd_epi32(s, codes, _mm512_set1_epi32(word as i32))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn finish(s: __m512i, minus: i32) -> __m512 {
            _mm512_cvtepi32_ps(_mm512_sub_epi32(s, _mm512_set1_epi32(minus)))
        }
    }

    /// `s + Σ_j u8(codes_j) · i8(words_j)` per i32 lane: `vpmaddubsw` (pair sums of at most
    /// 2 · 255 · 127 < 2^15 in magnitude, with the codes used here: no saturation), `vpmaddwd`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn dot_256(s: __m256i, codes: __m256i, words: __m256i) -> __m256i {
        let pairs = _mm256_maddubs_epi16(codes, words);
        _mm256_add_epi32(s, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
    }

    impl Int8Lanes for Pair<__m256> {
        type Codes = Pair<__m256i>;
        type Sums = Pair<__m256i>;
        const BYTE_OFFSET: i32 = 0;
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn zero_sums() -> Pair<__m256i> {
            Pair(_mm256_setzero_si256(), _mm256_setzero_si256())
        }
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn nibble_codes(p: *const u8) -> [Pair<__m256i>; 2] {
            // SAFETY: the caller passes 64 readable bytes.
            let (a, b) = unsafe {
                (
                    _mm256_loadu_si256(p.cast()),
                    _mm256_loadu_si256(p.add(32).cast()),
                )
            };
            let mask = _mm256_set1_epi32(0x0F0F_0F0F);
            let low = |v| _mm256_and_si256(v, mask);
            let high = |v| _mm256_and_si256(_mm256_srli_epi32::<4>(v), mask);
            [Pair(low(a), low(b)), Pair(high(a), high(b))]
        }
        /// The 4 x 16 element-major bytes transposed to 16 lanes x 4 with in-lane unpacks.
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn i8_codes(p: *const u8) -> Pair<__m256i> {
            // SAFETY: the caller passes 64 readable bytes.
            let (a, b) = unsafe {
                (
                    _mm256_loadu_si256(p.cast()),
                    _mm256_loadu_si256(p.add(32).cast()),
                )
            };
            // [e0 | e2] and [e1 | e3], 16 lanes each.
            let (e02, e13) = (
                _mm256_permute2x128_si256::<0x20>(a, b),
                _mm256_permute2x128_si256::<0x31>(a, b),
            );
            // Byte pairs (e0 e1 | e2 e3) of lanes 0..8, then of lanes 8..16.
            let (lanes0, lanes8) = (
                _mm256_unpacklo_epi8(e02, e13),
                _mm256_unpackhi_epi8(e02, e13),
            );
            let (e01, e23) = (
                _mm256_permute2x128_si256::<0x20>(lanes0, lanes8),
                _mm256_permute2x128_si256::<0x31>(lanes0, lanes8),
            );
            // Lanes 0..4 | 8..12, and 4..8 | 12..16, 4 bytes each.
            let (low, high) = (
                _mm256_unpacklo_epi16(e01, e23),
                _mm256_unpackhi_epi16(e01, e23),
            );
            Pair(
                _mm256_permute2x128_si256::<0x20>(low, high),
                _mm256_permute2x128_si256::<0x31>(low, high),
            )
        }
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn dot_u8(s: Pair<__m256i>, codes: Pair<__m256i>, word: u32) -> Pair<__m256i> {
            let w = _mm256_set1_epi32(word as i32);
            Pair(dot_256(s.0, codes.0, w), dot_256(s.1, codes.1, w))
        }
        /// `|c| · (sign(c) · q)`: `|c| <= 128` and `|q| <= 127`, so no pair sum saturates.
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn dot_i8(s: Pair<__m256i>, codes: Pair<__m256i>, word: u32) -> Pair<__m256i> {
            let w = _mm256_set1_epi32(word as i32);
            let half = |s, c| dot_256(s, _mm256_abs_epi8(c), _mm256_sign_epi8(w, c));
            Pair(half(s.0, codes.0), half(s.1, codes.1))
        }
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn finish(s: Pair<__m256i>, minus: i32) -> Pair<__m256> {
            let m = _mm256_set1_epi32(minus);
            Pair(
                _mm256_cvtepi32_ps(_mm256_sub_epi32(s.0, m)),
                _mm256_cvtepi32_ps(_mm256_sub_epi32(s.1, m)),
            )
        }
    }
}

fn run_format<F: Int8Format>(job: &mut Job<'_>, isa: Isa) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if isa == Isa::Avx512
            && Isa::Avx512.is_available()
            && has!("avx512bw")
            && has!("avx512vnni")
            && has!("avx512vbmi")
        {
            // SAFETY: the CPU supports every feature enabled (checked just above; AVX-512F
            // implies F16C).
            return unsafe { run_avx512::<F>(job) };
        }
        if matches!(isa, Isa::Avx512 | Isa::Avx2) && Isa::Avx2.is_available() && has!("f16c") {
            // SAFETY: the CPU supports AVX2, FMA and F16C (checked just above).
            return unsafe { run_avx2::<F>(job) };
        }
    }
    let _ = isa;
    // SAFETY: the scalar lanes need no CPU feature.
    unsafe { run::<[f32; PANEL_ROWS], F>(job) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi,avx2,fma,f16c")]
unsafe fn run_avx512<F: Int8Format>(job: &mut Job<'_>) {
    // SAFETY: the caller checked the features that `__m512` lanes use.
    unsafe { run::<std::arch::x86_64::__m512, F>(job) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run_avx2<F: Int8Format>(job: &mut Job<'_>) {
    // SAFETY: the caller checked the features that `Pair<__m256>` lanes use.
    unsafe { run::<crate::lanes::Pair<std::arch::x86_64::__m256>, F>(job) }
}

/// Token rows per register tile of several-row products.
const TOKENS_PER_TILE: usize = 4;

/// Walks `job` in register tiles: 4 panels x 1 row for one row of `x`; otherwise, per 2 panels,
/// all rows of `x` in tiles of up to [`TOKENS_PER_TILE`] (the panels' blocks stay in the cache
/// while the rows stream by).
#[inline(always)]
unsafe fn run<V: Int8Lanes, F: Int8Format>(job: &mut Job<'_>) {
    let tokens = job.x.rows;
    let panels = job.panels.len() / job.panel_stride;
    // SAFETY (whole body): V's features are enabled (the caller's contract).
    unsafe {
        if tokens == 1 {
            let mut p = 0;
            while p < panels {
                match panels - p {
                    4.. => tile::<V, F, 4, 1>(job, p, 0),
                    3 => tile::<V, F, 3, 1>(job, p, 0),
                    2 => tile::<V, F, 2, 1>(job, p, 0),
                    _ => tile::<V, F, 1, 1>(job, p, 0),
                }
                p += 4;
            }
            return;
        }
        for p in (0..panels).step_by(2) {
            let mut t = 0;
            while t < tokens {
                let nt = (tokens - t).min(TOKENS_PER_TILE);
                match (panels - p >= 2, nt) {
                    (true, 4) => tile::<V, F, 2, 4>(job, p, t),
                    (true, 3) => tile::<V, F, 2, 3>(job, p, t),
                    (true, 2) => tile::<V, F, 2, 2>(job, p, t),
                    (true, _) => tile::<V, F, 2, 1>(job, p, t),
                    (false, 4) => tile::<V, F, 1, 4>(job, p, t),
                    (false, 3) => tile::<V, F, 1, 3>(job, p, t),
                    (false, 2) => tile::<V, F, 1, 2>(job, p, t),
                    (false, _) => tile::<V, F, 1, 1>(job, p, t),
                }
                t += nt;
            }
        }
    }
}

/// Panels `p..p + NP` times rows `t..t + NT` of `x`: computes and stores those outputs.
#[inline(always)]
unsafe fn tile<V: Int8Lanes, F: Int8Format, const NP: usize, const NT: usize>(
    job: &mut Job<'_>,
    p: usize,
    t: usize,
) {
    let panels: [*const u8; NP] =
        std::array::from_fn(|i| job.panels[(p + i) * job.panel_stride..].as_ptr());
    let rows: [Row; NT] = std::array::from_fn(|j| job.x.row(t + j));
    // One row streams the panels once; several rows keep two panels in the cache for all.
    let ahead = match job.x.rows {
        1 => next_panels(job.panels, job.panel_stride, p, NP),
        _ => &[],
    };
    // SAFETY: forwarded from the caller; each panel holds `job.blocks` panel blocks.
    let totals = unsafe { int8_tile::<V, F, NP, NT>(panels, job.blocks, rows, ahead) };
    for (i, panel_totals) in totals.iter().enumerate() {
        for (j, &total) in panel_totals.iter().enumerate() {
            // SAFETY: forwarded from the caller.
            unsafe { store_panel(job.out, job.n, p + i, t + j, total) };
        }
    }
}

/// The exact-integer products of the rows of `NP` panels with `NT` quantized rows (module
/// docs): per block, the integer sums of every (panel, row) pair, then the two roundings of
/// rule 3 per lane; per tile of blocks a fresh partial from `+0.0`, added to the total (from
/// `-0.0`, so the first partial is taken as is). `ahead` is fetched meanwhile.
#[inline(always)]
unsafe fn int8_tile<V: Int8Lanes, F: Int8Format, const NP: usize, const NT: usize>(
    panels: [*const u8; NP],
    blocks: usize,
    rows: [Row; NT],
    ahead: &[u8],
) -> [[V; NT]; NP] {
    // SAFETY (whole body): V's features are enabled (the caller's contract); every pointer
    // stays inside a panel (`blocks` panel blocks) and every index inside a row.
    unsafe {
        let mut total = [[V::splat(-0.0); NT]; NP];
        let mut b = 0;
        while b < blocks {
            let end = (b + REDUCTION_TILE).min(blocks);
            let mut acc = [[V::splat(0.0); NT]; NP];
            while b < end {
                prefetch_share(ahead, b, blocks);
                let mut sums = [[V::zero_sums(); NT]; NP];
                for (i, panel) in panels.iter().enumerate() {
                    let codes = panel.add(b * F::PANEL_BLOCK + F::CODES_AT);
                    if F::NIBBLES {
                        for g in 0..4 {
                            let [low, high] = V::nibble_codes(codes.add(64 * g));
                            for (j, row) in rows.iter().enumerate() {
                                let words = row.nibble_words.get_unchecked(8 * b + 2 * g..);
                                sums[i][j] = V::dot_u8(sums[i][j], low, words[0]);
                                sums[i][j] = V::dot_u8(sums[i][j], high, words[1]);
                            }
                        }
                    } else {
                        for g in 0..8 {
                            let c = V::i8_codes(codes.add(64 * g));
                            for (j, row) in rows.iter().enumerate() {
                                sums[i][j] = V::dot_i8(sums[i][j], c, row.byte_word(b, g));
                            }
                        }
                    }
                }
                for (i, panel) in panels.iter().enumerate() {
                    let block = panel.add(b * F::PANEL_BLOCK);
                    let d = V::f16s(block);
                    for (j, row) in rows.iter().enumerate() {
                        let s = *row.sums.get_unchecked(b);
                        let offset = if F::NIBBLES { 0 } else { V::BYTE_OFFSET };
                        let exact = V::finish(sums[i][j], (F::BIAS + offset) * s);
                        let scale = V::mul(d, V::splat(*row.scales.get_unchecked(b)));
                        acc[i][j] = V::fma(scale, exact, acc[i][j]);
                        if F::MIN {
                            let m = V::f16s(block.add(2 * PANEL_ROWS));
                            let sx = V::splat(*row.scaled_sums.get_unchecked(b));
                            acc[i][j] = V::fma(m, sx, acc[i][j]);
                        }
                    }
                }
                b += 1;
            }
            for (total, acc) in total.iter_mut().zip(&acc) {
                for (t, a) in total.iter_mut().zip(acc) {
                    *t = V::add(*t, *a);
                }
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack_panels;

    /// A deterministic stream of pseudo-random u64 (SplitMix64).
    fn stream(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed;
        move || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
    }

    /// Random ggml rows of `ggml_type`: random code bytes, small finite f16 scales and mins.
    fn random_rows(ggml_type: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
        let mut next = stream(seed);
        let block_bytes = ggml_type.block_bytes();
        let mut bytes = vec![0u8; rows * cols / BLOCK * block_bytes];
        for block in bytes.chunks_exact_mut(block_bytes) {
            for b in block.iter_mut() {
                *b = next() as u8;
            }
            let scale = |r: u64| half::f16::from_f32((r % 2000) as f32 / 1e5 - 0.01).to_le_bytes();
            block[..2].copy_from_slice(&scale(next()));
            if ggml_type == GgmlType::Q4_1 {
                block[2..4].copy_from_slice(&scale(next()));
            }
        }
        bytes
    }

    fn random_x(len: usize, seed: u64) -> Vec<f32> {
        let mut next = stream(seed);
        (0..len)
            .map(|i| {
                let v = (next() % 20001) as f32 / 1000.0 - 10.0;
                // Some blocks all zero, some with exact ties (k + 0.5 steps).
                if i % 97 < 32 && i % 5 == 0 { 0.0 } else { v }
            })
            .collect()
    }

    fn isas() -> Vec<Isa> {
        Isa::available()
    }

    #[test]
    fn quantization_follows_its_formula() {
        let mut x = [0f32; 64];
        x[0] = 127.0;
        x[1] = 0.5; // d = 1: 0.5 / 1 rounds to even, 0
        x[2] = 1.5; // 2
        x[3] = -2.5; // -2
        x[4] = -126.0;
        let q = Int8Activations::quantize(&x, 64).unwrap();
        assert_eq!(&q.codes(0)[..5], &[127, 0, 2, -2, -126]);
        assert_eq!(q.scales(0), &[1.0, 0.0]);
        assert!(q.codes(0)[32..].iter().all(|&c| c == 0));
        assert_eq!((q.sums[0], q.scaled_sums[0]), (1, 1.0));
        // d = a / 127 with one rounding, q = rint(x / d), on values that are not multiples of d.
        let y: Vec<f32> = (0..32).map(|i| i as f32 * 0.37 - 5.0).collect();
        let q = Int8Activations::quantize(&y, 32).unwrap();
        let d = y[31] / 127.0;
        assert_eq!(q.scales(0), &[d]);
        for (k, &c) in q.codes(0).iter().enumerate() {
            assert_eq!(f32::from(c), (y[k] / d).round_ties_even(), "code {k}");
        }
    }

    #[test]
    fn quantization_is_the_same_on_every_isa() {
        let x = random_x(64 * 96, 9);
        let want = crate::with_isa(Isa::Scalar, || Int8Activations::quantize(&x, 96).unwrap());
        for isa in isas() {
            let got = crate::with_isa(isa, || Int8Activations::quantize(&x, 96).unwrap());
            assert_eq!(got.codes, want.codes, "{isa:?}");
            assert_eq!(got.nibble_words, want.nibble_words, "{isa:?}");
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got.scales), bits(&want.scales), "{isa:?}");
            assert_eq!(bits(&got.scaled_sums), bits(&want.scaled_sums), "{isa:?}");
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(Int8Activations::quantize(&[0.0; 48], 48).is_err());
        assert!(Int8Activations::quantize(&[0.0; 40], 32).is_err());
        let x = Int8Activations::quantize(&[0.0; 64], 64).unwrap();
        assert!(int8_dot(GgmlType::Q4K, &[0; 288], &x, 0).is_err());
        assert!(int8_dot(GgmlType::Q8_0, &[0; 34], &x, 0).is_err());
    }

    /// Each ISA path and register tile gives [`int8_dot`]'s bits on each output, for one and
    /// several rows of `x`, with every split of the panels.
    #[test]
    fn panels_match_the_scalar_definition_on_every_isa() {
        for ggml_type in INT8_TYPES {
            // 37 rows: two whole panels and a padded one; 2,112 columns: 66 blocks, two tiles.
            for (rows, cols) in [(37, 2112), (16, 64), (5, 32)] {
                let w = random_rows(ggml_type, rows, cols, 7);
                let packed = pack_panels(ggml_type, rows, cols, |first, out: &mut [u8]| {
                    let rb = ggml_type.row_bytes(cols).unwrap();
                    out.copy_from_slice(&w[first * rb..][..out.len()]);
                    Ok::<(), QuantError>(())
                })
                .unwrap();
                let m = PanelMatrix::new(ggml_type, rows, cols, &packed).unwrap();
                let rb = ggml_type.row_bytes(cols).unwrap();
                for tokens in [1, 2, 3, 4, 5, 9] {
                    let x = Int8Activations::quantize(&random_x(tokens * cols, 3), cols).unwrap();
                    let want: Vec<f32> = (0..tokens)
                        .flat_map(|t| (0..rows).map(move |r| (t, r)))
                        .map(|(t, r)| int8_dot(ggml_type, &w[r * rb..][..rb], &x, t).unwrap())
                        .collect();
                    for isa in isas() {
                        for split in [m.panels(), 1] {
                            let mut got = vec![0f32; tokens * rows];
                            for first in (0..m.panels()).step_by(split) {
                                let panels = first..(first + split).min(m.panels());
                                let n = (panels.end * PANEL_ROWS).min(rows) - first * PANEL_ROWS;
                                let mut out = vec![0f32; tokens * n];
                                m.matmul_int8(panels, &x, &mut out, isa).unwrap();
                                for t in 0..tokens {
                                    got[t * rows + first * PANEL_ROWS..][..n]
                                        .copy_from_slice(&out[t * n..][..n]);
                                }
                            }
                            let same = got
                                .iter()
                                .zip(&want)
                                .all(|(a, b)| a.to_bits() == b.to_bits());
                            assert!(
                                same,
                                "{ggml_type} [{rows}, {cols}] x {tokens} on {isa:?}, split {split}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The integer tier is a product: close to the float64 product of the dequantized weights
    /// and the activations (the error is the activations' rounding to 8 bits, under 1/254 of
    /// each block's largest magnitude per term).
    #[test]
    fn products_approximate_the_float64_product() {
        let cols = 256;
        for ggml_type in INT8_TYPES {
            let w = random_rows(ggml_type, 3, cols, 11);
            let xs = random_x(cols, 5);
            let x = Int8Activations::quantize(&xs, cols).unwrap();
            let rb = ggml_type.row_bytes(cols).unwrap();
            for r in 0..3 {
                let mut wf = vec![0f32; cols];
                samebits_ggml::dequantize_row(ggml_type, &w[r * rb..][..rb], &mut wf).unwrap();
                let exact: f64 = wf
                    .iter()
                    .zip(&xs)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
                let bound: f64 = wf
                    .chunks(BLOCK)
                    .zip(xs.chunks(BLOCK))
                    .map(|(wb, xb)| {
                        let a = xb.iter().fold(0f32, |a, v| a.max(v.abs()));
                        wb.iter().map(|v| f64::from(v.abs())).sum::<f64>() * f64::from(a) / 254.0
                    })
                    .sum::<f64>()
                    * 1.01
                    + 1e-4;
                let got = f64::from(int8_dot(ggml_type, &w[r * rb..][..rb], &x, 0).unwrap());
                assert!(
                    (got - exact).abs() <= bound,
                    "{ggml_type} row {r}: {got} vs {exact} (bound {bound})"
                );
            }
        }
    }

    #[test]
    fn a_row_with_a_non_finite_activation_gives_nan() {
        let (rows, cols) = (16, 64);
        let w = random_rows(GgmlType::Q4_1, rows, cols, 1);
        let packed = pack_panels(GgmlType::Q4_1, rows, cols, |first, out: &mut [u8]| {
            out.copy_from_slice(&w[first * 40..][..out.len()]);
            Ok::<(), QuantError>(())
        })
        .unwrap();
        let m = PanelMatrix::new(GgmlType::Q4_1, rows, cols, &packed).unwrap();
        let mut xs = random_x(2 * cols, 2);
        xs[cols + 3] = f32::INFINITY;
        let x = Int8Activations::quantize(&xs, cols).unwrap();
        let mut out = vec![0f32; 2 * rows];
        m.matmul_int8(0..1, &x, &mut out, Isa::Scalar).unwrap();
        assert!(out[..rows].iter().all(|v| v.is_finite()));
        assert!(out[rows..].iter().all(|v| v.is_nan()));
        assert!(int8_dot(GgmlType::Q4_1, &w[..40], &x, 1).unwrap().is_nan());
    }
}
