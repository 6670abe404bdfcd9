//! Row panels: a block-quantized weight matrix rearranged once, at load time, so that SIMD lanes
//! are output rows (`docs/gguf.md`, section "Row panels").
//!
//! A panel is [`PANEL_ROWS`] = 16 consecutive rows (the last panel padded with zero rows). For
//! each 32-element block column, the 16 rows' blocks are stored together as one *panel block*:
//! the 16 scales (and mins), then the codes interleaved so that one load gives the code of one
//! element for all 16 rows. The bytes are the ggml bytes moved around, nothing is converted, so a
//! panel matrix is exactly as large as the ggml one (plus the padding rows), and
//! [`PanelMatrix::dequantize_row`] gives back each row's original blocks.
//!
//! [`PanelMatrix::matmul`] computes `y[t, n]` = the canonical dot product of row `n` with row `t`
//! of `x` (`docs/contract.md`, canonical-sum): each weight dequantized by its canonical formula
//! (`docs/gguf.md`) and rounded to f32, `p = fma(w_k, x_k, p)` from `+0.0` per tile of 64 terms,
//! tile partials folded left to right. Each lane is one row's own chain, so the bits equal
//! `dot_q_f32` on the ggml row whatever the ISA (scalar, AVX2 + FMA + F16C, AVX-512), the number
//! of tokens, or which panels a thread is given. One body ([`panel_tile`]) is written over a
//! 16-lane vector type (the crate's [`Lanes`], shared with the direct convolution, plus the
//! panel-block loads of [`PanelLanes`]) and compiled per ISA.

use crate::lanes::Lanes;
use crate::{Isa, REDUCTION_TILE};
use samebits_ggml::{BlockFormat, GgmlType, QuantError, Result, legacy};
use std::ops::Range;

/// Rows per panel: the lanes of one AVX-512 register, two AVX2 registers.
pub const PANEL_ROWS: usize = 16;
/// Elements per block of every type with a panel layout.
const BLOCK: usize = 32;
/// Blocks per reduction tile.
const BLOCKS_PER_TILE: usize = REDUCTION_TILE / BLOCK;

/// Whether `ggml_type` has a panel layout (Q4_0, Q4_1, Q8_0).
pub fn has_panel_layout(ggml_type: GgmlType) -> bool {
    matches!(ggml_type, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q8_0)
}

/// A `[rows, cols]` matrix in panel layout, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct PanelMatrix<'a> {
    ggml_type: GgmlType,
    rows: usize,
    cols: usize,
    bytes: &'a [u8],
}

/// Bytes of a `[rows, cols]` matrix of `ggml_type` in panel layout (rows rounded up to whole
/// panels), or `None` when the type has no panel layout or `cols` is not whole blocks.
pub fn panel_bytes(ggml_type: GgmlType, rows: usize, cols: usize) -> Option<usize> {
    if !has_panel_layout(ggml_type) {
        return None;
    }
    ggml_type
        .row_bytes(cols)?
        .checked_mul(rows.div_ceil(PANEL_ROWS) * PANEL_ROWS)
}

/// Packs a `[rows, cols]` matrix of `ggml_type` into panel layout. `read_rows(first, out)` must
/// fill `out` with the ggml blocks of rows `first..first + out.len() / row_bytes` (so the source
/// may be a file read piece by piece, never held whole); its errors are returned as they are.
pub fn pack_panels<E: From<QuantError>>(
    ggml_type: GgmlType,
    rows: usize,
    cols: usize,
    mut read_rows: impl FnMut(usize, &mut [u8]) -> Result<(), E>,
) -> Result<Vec<u8>, E> {
    let size = panel_bytes(ggml_type, rows, cols).ok_or_else(|| {
        E::from(QuantError(format!(
            "{ggml_type}: no panel layout for a [{rows}, {cols}] matrix"
        )))
    })?;
    let row_bytes = ggml_type.row_bytes(cols).expect("checked by panel_bytes");
    let block_bytes = ggml_type.block_bytes();
    if size == 0 {
        return Ok(Vec::new());
    }
    let mut packed = vec![0u8; size];
    let mut source = vec![0u8; PANEL_ROWS * row_bytes];
    for (p, panel) in packed.chunks_exact_mut(PANEL_ROWS * row_bytes).enumerate() {
        let first = p * PANEL_ROWS;
        let count = (rows - first).min(PANEL_ROWS);
        source.fill(0);
        read_rows(first, &mut source[..count * row_bytes])?;
        for (b, panel_block) in panel.chunks_exact_mut(PANEL_ROWS * block_bytes).enumerate() {
            let row_block = |r: usize| &source[r * row_bytes + b * block_bytes..][..block_bytes];
            for r in 0..PANEL_ROWS {
                match ggml_type {
                    GgmlType::Q4_0 => Q4_0P::pack(row_block(r), r, panel_block),
                    GgmlType::Q4_1 => Q4_1P::pack(row_block(r), r, panel_block),
                    _ => Q8_0P::pack(row_block(r), r, panel_block),
                }
            }
        }
    }
    Ok(packed)
}

impl<'a> PanelMatrix<'a> {
    /// Views `bytes` (from [`pack_panels`]) as a `[rows, cols]` panel matrix of `ggml_type`.
    pub fn new(
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &'a [u8],
    ) -> Result<PanelMatrix<'a>> {
        match panel_bytes(ggml_type, rows, cols) {
            Some(size) if size == bytes.len() => Ok(PanelMatrix {
                ggml_type,
                rows,
                cols,
                bytes,
            }),
            Some(size) => Err(QuantError(format!(
                "{ggml_type}: {} bytes do not hold a [{rows}, {cols}] panel matrix ({size} bytes)",
                bytes.len()
            ))),
            None => Err(QuantError(format!(
                "{ggml_type}: no panel layout for a [{rows}, {cols}] matrix"
            ))),
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Number of panels (the last one may be partly padding).
    pub fn panels(&self) -> usize {
        self.rows.div_ceil(PANEL_ROWS)
    }

    fn panel_stride(&self) -> usize {
        PANEL_ROWS * self.ggml_type.row_bytes(self.cols).expect("checked in new")
    }

    /// Row `row` dequantized to `out` (`cols` values), exactly as `dequantize_row` on its ggml
    /// blocks.
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) -> Result<()> {
        if row >= self.rows || out.len() != self.cols {
            return Err(QuantError(format!(
                "row {row} into {} values: the panel matrix is [{}, {}]",
                out.len(),
                self.rows,
                self.cols
            )));
        }
        if self.cols == 0 {
            return Ok(());
        }
        let (panel, lane) = (row / PANEL_ROWS, row % PANEL_ROWS);
        let block_bytes = self.ggml_type.block_bytes();
        let panel = &self.bytes[panel * self.panel_stride()..][..self.panel_stride()];
        let mut block = [0u8; 34];
        let block = &mut block[..block_bytes];
        for (panel_block, values) in panel
            .chunks_exact(PANEL_ROWS * block_bytes)
            .zip(out.chunks_exact_mut(BLOCK))
        {
            match self.ggml_type {
                GgmlType::Q4_0 => {
                    Q4_0P::unpack(panel_block, lane, block);
                    legacy::Q4_0::dequantize_block(block, values);
                }
                GgmlType::Q4_1 => {
                    Q4_1P::unpack(panel_block, lane, block);
                    legacy::Q4_1::dequantize_block(block, values);
                }
                _ => {
                    Q8_0P::unpack(panel_block, lane, block);
                    legacy::Q8_0::dequantize_block(block, values);
                }
            }
        }
        Ok(())
    }

    /// `out[t * n + (r - first)]` = the canonical dot product of row `r` with `x[t]`, for the rows
    /// `r` of `panels` (`first` = its first row, `n` = its rows that are not padding) and the
    /// `x.len() / cols` rows of `x`; `isa` picks the code path, never the bits.
    pub fn matmul(&self, panels: Range<usize>, x: &[f32], out: &mut [f32], isa: Isa) -> Result<()> {
        let tokens = x.len() / self.cols.max(1);
        let first = panels.start * PANEL_ROWS;
        let n = (panels.end * PANEL_ROWS)
            .min(self.rows)
            .saturating_sub(first);
        if panels.end > self.panels()
            || panels.start > panels.end
            || x.len() != tokens * self.cols
            || out.len() != tokens * n
        {
            return Err(QuantError(format!(
                "panels {panels:?} of a [{}, {}] matrix with {} activations into {} outputs",
                self.rows,
                self.cols,
                x.len(),
                out.len()
            )));
        }
        if self.cols == 0 {
            out.fill(0.0);
            return Ok(());
        }
        let mut job = Job {
            panels: &self.bytes
                [panels.start * self.panel_stride()..panels.end * self.panel_stride()],
            panel_stride: self.panel_stride(),
            blocks: self.cols / BLOCK,
            x,
            cols: self.cols,
            out,
            n,
        };
        match self.ggml_type {
            GgmlType::Q4_0 => run_format::<Q4_0P>(&mut job, isa),
            GgmlType::Q4_1 => run_format::<Q4_1P>(&mut job, isa),
            _ => run_format::<Q8_0P>(&mut job, isa),
        }
        Ok(())
    }
}

/// One call's work: some consecutive panels times all token rows of `x`.
struct Job<'a> {
    panels: &'a [u8],
    panel_stride: usize,
    blocks: usize,
    x: &'a [f32],
    cols: usize,
    out: &'a mut [f32],
    /// Output rows that are not padding.
    n: usize,
}

fn run_format<F: PanelFormat>(job: &mut Job<'_>, isa: Isa) {
    #[cfg(target_arch = "x86_64")]
    {
        if isa == Isa::Avx512 && Isa::Avx512.is_available() {
            // SAFETY: the CPU supports AVX-512F (checked just above), which implies F16C.
            return unsafe { run_avx512::<F>(job) };
        }
        if isa == Isa::Avx2
            && Isa::Avx2.is_available()
            && std::arch::is_x86_feature_detected!("f16c")
        {
            // SAFETY: the CPU supports AVX2, FMA and F16C (checked just above).
            return unsafe { run_avx2::<F>(job) };
        }
    }
    let _ = isa;
    // SAFETY: the scalar lanes need no CPU feature.
    unsafe { run::<[f32; PANEL_ROWS], F>(job) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn run_avx512<F: PanelFormat>(job: &mut Job<'_>) {
    // SAFETY: the caller checked the features that `__m512` lanes use.
    unsafe { run::<std::arch::x86_64::__m512, F>(job) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run_avx2<F: PanelFormat>(job: &mut Job<'_>) {
    // SAFETY: the caller checked the features that `Pair<__m256>` lanes use.
    unsafe { run::<crate::lanes::Pair<std::arch::x86_64::__m256>, F>(job) }
}

/// Runs `$body` with `$k` bound to each element index of a block, 0 to 31 in order.
macro_rules! each_element {
    ($k:ident, $body:block) => {
        each_element!(@ $k, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
            24 25 26 27 28 29 30 31)
    };
    (@ $k:ident, $body:block, $($n:literal)*) => {
        $({
            let $k: usize = $n;
            $body
        })*
    };
}

/// Token rows per pass over the weights in the few-token kernel.
const TOKENS_PER_PASS: usize = 4;
/// From this many token rows on, [`run`] takes the prefill kernel ([`run_prefill`]).
const PREFILL_MIN_TOKENS: usize = 8;

/// Walks `job` in register tiles: 4 panels x 1 token, or 2 panels x up to 4 tokens; from
/// [`PREFILL_MIN_TOKENS`] token rows on, [`run_prefill`].
#[inline(always)]
unsafe fn run<V: PanelLanes, F: PanelFormat>(job: &mut Job<'_>) {
    let tokens = job.x.len() / job.cols;
    if tokens >= PREFILL_MIN_TOKENS {
        // SAFETY: forwarded from the caller.
        return unsafe { run_prefill::<V, F>(job) };
    }
    let panels = job.panels.len() / job.panel_stride;
    let mut t = 0;
    while t < tokens {
        let nt = (tokens - t).min(TOKENS_PER_PASS);
        let mut p = 0;
        while p < panels {
            let np = if nt == 1 { 4 } else { 2 }.min(panels - p);
            // SAFETY: V's features are enabled (the caller's contract).
            unsafe {
                match (np, nt) {
                    (4, 1) => tile::<V, F, 4, 1>(job, p, t),
                    (2, 2) => tile::<V, F, 2, 2>(job, p, t),
                    (2, 3) => tile::<V, F, 2, 3>(job, p, t),
                    (2, 4) => tile::<V, F, 2, 4>(job, p, t),
                    (1, 1) => tile::<V, F, 1, 1>(job, p, t),
                    (1, 2) => tile::<V, F, 1, 2>(job, p, t),
                    (1, 3) => tile::<V, F, 1, 3>(job, p, t),
                    (1, 4) => tile::<V, F, 1, 4>(job, p, t),
                    (2, 1) => tile::<V, F, 2, 1>(job, p, t),
                    _ => tile::<V, F, 3, 1>(job, p, t),
                }
            }
            p += np;
        }
        t += nt;
    }
}

/// Panels per pass of the prefill kernel.
const PREFILL_PANELS: usize = 2;

/// The prefill kernel: for each pair of panels and each reduction tile, the tile's weights are
/// dequantized once into a buffer (the values [`panel_tile`] computes), then every token row
/// takes them from there, [`PanelLanes::PREFILL_TOKENS`] rows per register tile. The operations and
/// their order per output are [`panel_tile`]'s (`acc = fma(w_k, x_k, acc)` from `+0.0` per tile,
/// `total = total + acc` from `-0.0`), so are the bits; the dequantization is paid once per tile
/// instead of once per few tokens.
#[inline(always)]
unsafe fn run_prefill<V: PanelLanes, F: PanelFormat>(job: &mut Job<'_>) {
    // SAFETY (whole body): V's features are enabled (the caller's contract); every pointer read
    // stays inside the job's panels (blocks * F::PANEL_BLOCK bytes each) and `x`.
    unsafe {
        let tokens = job.x.len() / job.cols;
        let panels = job.panels.len() / job.panel_stride;
        let mut w = vec![V::splat(0.0); PREFILL_PANELS * REDUCTION_TILE];
        let mut totals = vec![[V::splat(-0.0); PREFILL_PANELS]; tokens];
        for p in (0..panels).step_by(PREFILL_PANELS) {
            let np = PREFILL_PANELS.min(panels - p);
            totals.fill([V::splat(-0.0); PREFILL_PANELS]);
            for b in (0..job.blocks).step_by(BLOCKS_PER_TILE) {
                let nb = BLOCKS_PER_TILE.min(job.blocks - b);
                for i in 0..np {
                    let panel = job.panels.as_ptr().add((p + i) * job.panel_stride);
                    for bb in 0..nb {
                        let block = panel.add((b + bb) * F::PANEL_BLOCK);
                        let scales = F::scales::<V>(block);
                        each_element!(k, {
                            *w.get_unchecked_mut((bb * BLOCK + k) * PREFILL_PANELS + i) =
                                F::weight::<V>(block, scales, k);
                        });
                    }
                }
                let mut t = 0;
                while t < tokens {
                    let nt = match (tokens - t).min(V::PREFILL_TOKENS) {
                        8.. => 8,
                        4..=7 => 4,
                        3 => 3,
                        2 => 2,
                        _ => 1,
                    };
                    let tile = PrefillTile {
                        w: &w,
                        terms: nb * BLOCK,
                        x: &job.x[t * job.cols + b * BLOCK..],
                        cols: job.cols,
                    };
                    let totals = &mut totals[t..t + nt];
                    match (np, nt) {
                        (2, 8) => tile.accumulate::<2, 8>(totals),
                        (2, 4) => tile.accumulate::<2, 4>(totals),
                        (2, 3) => tile.accumulate::<2, 3>(totals),
                        (2, 2) => tile.accumulate::<2, 2>(totals),
                        (2, _) => tile.accumulate::<2, 1>(totals),
                        (_, 8) => tile.accumulate::<1, 8>(totals),
                        (_, 4) => tile.accumulate::<1, 4>(totals),
                        (_, 3) => tile.accumulate::<1, 3>(totals),
                        (_, 2) => tile.accumulate::<1, 2>(totals),
                        _ => tile.accumulate::<1, 1>(totals),
                    }
                    t += nt;
                }
            }
            for (t, token_totals) in totals.iter().enumerate() {
                for (i, total) in token_totals[..np].iter().enumerate() {
                    let first = (p + i) * PANEL_ROWS;
                    let valid = job.n.saturating_sub(first).min(PANEL_ROWS);
                    let mut lanes = [0f32; PANEL_ROWS];
                    total.store(lanes.as_mut_ptr());
                    job.out[t * job.n + first..][..valid].copy_from_slice(&lanes[..valid]);
                }
            }
        }
    }
}

/// One reduction tile of the prefill kernel: `w[k * PREFILL_PANELS + i]` is panel `i`'s
/// dequantized weight `k` of the tile, `x[j * cols + k]` token row `j`'s activation `k`.
struct PrefillTile<'a, V> {
    w: &'a [V],
    terms: usize,
    x: &'a [f32],
    cols: usize,
}

impl<V: PanelLanes> PrefillTile<'_, V> {
    /// Adds the tile's partials of `NP` panels and `NT = totals.len()` token rows to `totals`.
    #[inline(always)]
    unsafe fn accumulate<const NP: usize, const NT: usize>(
        &self,
        totals: &mut [[V; PREFILL_PANELS]],
    ) {
        // SAFETY (whole body): V's features are enabled (the caller's contract); `w` holds
        // `terms * PREFILL_PANELS` values and `x` NT rows of at least `terms` values.
        unsafe {
            let mut acc = [[V::splat(0.0); NT]; NP];
            for k in 0..self.terms {
                for j in 0..NT {
                    let xk = V::splat(*self.x.get_unchecked(j * self.cols + k));
                    for (i, acc) in acc.iter_mut().enumerate() {
                        let w = *self.w.get_unchecked(k * PREFILL_PANELS + i);
                        acc[j] = V::fma(w, xk, acc[j]);
                    }
                }
            }
            for (j, totals) in totals.iter_mut().enumerate() {
                for i in 0..NP {
                    totals[i] = V::add(totals[i], acc[i][j]);
                }
            }
        }
    }
}

/// Panels `p..p + NP` times token rows `t..t + NT`: computes and stores those outputs.
#[inline(always)]
unsafe fn tile<V: PanelLanes, F: PanelFormat, const NP: usize, const NT: usize>(
    job: &mut Job<'_>,
    p: usize,
    t: usize,
) {
    let (all_panels, all_x) = (job.panels, job.x);
    let panels: [&[u8]; NP] = std::array::from_fn(|i| {
        &all_panels[(p + i) * job.panel_stride..(p + i + 1) * job.panel_stride]
    });
    let x: [&[f32]; NT] =
        std::array::from_fn(|i| &all_x[(t + i) * job.cols..(t + i + 1) * job.cols]);
    // SAFETY: forwarded from the caller.
    let totals = unsafe { panel_tile::<V, F, NP, NT>(panels, job.blocks, x) };
    for (i, panel_totals) in totals.iter().enumerate() {
        let first = (p + i) * PANEL_ROWS;
        let valid = job.n.saturating_sub(first).min(PANEL_ROWS);
        for (j, total) in panel_totals.iter().enumerate() {
            let mut lanes = [0f32; PANEL_ROWS];
            // SAFETY: forwarded from the caller.
            unsafe { total.store(lanes.as_mut_ptr()) };
            job.out[(t + j) * job.n + first..][..valid].copy_from_slice(&lanes[..valid]);
        }
    }
}

/// The canonical dot products of the rows of `NP` panels with `NT` activation rows: per tile of
/// 64 terms, `acc = fma(w_k, x_k, acc)` from `+0.0` in index order, then `total = total + acc`
/// from `total = -0.0` (which leaves the first tile's partial exactly as it is, `-0.0 + p = p`
/// for every `p`, so the fold is `s = p_0`, `s = s + p_j`).
#[inline(always)]
unsafe fn panel_tile<V: PanelLanes, F: PanelFormat, const NP: usize, const NT: usize>(
    panels: [&[u8]; NP],
    blocks: usize,
    x: [&[f32]; NT],
) -> [[V; NT]; NP] {
    // SAFETY (whole body): V's features are enabled (the caller's contract); every pointer read
    // stays inside `panels` (blocks * F::PANEL_BLOCK bytes each) and `x` (blocks * 32 values).
    unsafe {
        let mut total = [[V::splat(-0.0); NT]; NP];
        let mut b = 0;
        while b < blocks {
            let mut acc = [[V::splat(0.0); NT]; NP];
            for b in b..(b + BLOCKS_PER_TILE).min(blocks) {
                let block: [*const u8; NP] =
                    std::array::from_fn(|i| panels[i].as_ptr().add(b * F::PANEL_BLOCK));
                let scales: [(V, V); NP] = std::array::from_fn(|i| F::scales::<V>(block[i]));
                // Unrolled so that every code offset and shift is a constant.
                each_element!(k, {
                    let xk: [V; NT] =
                        std::array::from_fn(|j| V::splat(*x[j].get_unchecked(b * BLOCK + k)));
                    for i in 0..NP {
                        let w = F::weight::<V>(block[i], scales[i], k);
                        for j in 0..NT {
                            acc[i][j] = V::fma(w, xk[j], acc[i][j]);
                        }
                    }
                });
            }
            for i in 0..NP {
                for j in 0..NT {
                    total[i][j] = V::add(total[i][j], acc[i][j]);
                }
            }
            b += BLOCKS_PER_TILE;
        }
        total
    }
}

/// [`Lanes`] of [`PANEL_ROWS`] rows, with the loads of panel blocks (each converts exactly).
trait PanelLanes: Lanes {
    /// Token rows per register tile of the prefill kernel (two panels' accumulators for that
    /// many rows fit the registers): 8, 4, 3, 2 or 1.
    const PREFILL_TOKENS: usize;
    /// The 16 little-endian f16 at `p`, converted exactly.
    unsafe fn f16s(p: *const u8) -> Self;
    /// From the 16 little-endian u32 at `p`, `((u >> 4 * nibble) & 15) - BIAS`, exactly.
    unsafe fn nibbles<const BIAS: i32>(p: *const u8, nibble: usize) -> Self;
    /// The 16 i8 at `p`, exactly.
    unsafe fn bytes_i8(p: *const u8) -> Self;
}

impl PanelLanes for [f32; PANEL_ROWS] {
    const PREFILL_TOKENS: usize = 8;
    #[inline(always)]
    unsafe fn f16s(p: *const u8) -> Self {
        // SAFETY: the caller passes 32 readable bytes.
        let b = unsafe { std::slice::from_raw_parts(p, 2 * PANEL_ROWS) };
        std::array::from_fn(|i| half::f16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_f32())
    }
    #[inline(always)]
    unsafe fn nibbles<const BIAS: i32>(p: *const u8, nibble: usize) -> Self {
        // SAFETY: the caller passes 64 readable bytes.
        let b = unsafe { std::slice::from_raw_parts(p, 4 * PANEL_ROWS) };
        std::array::from_fn(|i| {
            let u = u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
            (((u >> (4 * nibble)) & 15) as i32 - BIAS) as f32
        })
    }
    #[inline(always)]
    unsafe fn bytes_i8(p: *const u8) -> Self {
        // SAFETY: the caller passes 16 readable bytes.
        let b = unsafe { std::slice::from_raw_parts(p, PANEL_ROWS) };
        std::array::from_fn(|i| f32::from(b[i] as i8))
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! [`PanelLanes`](super::PanelLanes) as one AVX-512 register or a pair of AVX2 registers.
    use super::PanelLanes;
    use crate::lanes::Pair;
    use std::arch::x86_64::*;

    /// The float value of every 4-bit code minus `BIAS` (a table for `vpermps`, which reads
    /// only the low 4 bits of each index).
    #[inline(always)]
    fn code_table<const BIAS: i32>() -> [f32; 16] {
        std::array::from_fn(|i| (i as i32 - BIAS) as f32)
    }

    impl PanelLanes for __m512 {
        const PREFILL_TOKENS: usize = 8;
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn f16s(p: *const u8) -> Self {
            // SAFETY: the caller passes 32 readable bytes.
            unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn nibbles<const BIAS: i32>(p: *const u8, nibble: usize) -> Self {
            // SAFETY: the caller passes 64 readable bytes.
            let codes = unsafe { _mm512_loadu_si512(p.cast()) };
            let shifted = _mm512_srlv_epi32(codes, _mm512_set1_epi32(4 * nibble as i32));
            // SAFETY: the table is 16 floats.
            let table = unsafe { _mm512_loadu_ps(code_table::<BIAS>().as_ptr()) };
            _mm512_permutexvar_ps(shifted, table)
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn bytes_i8(p: *const u8) -> Self {
            // SAFETY: the caller passes 16 readable bytes.
            unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.cast()))) }
        }
    }

    /// Lanes 0..8 and 8..16 in two AVX2 registers.
    impl PanelLanes for Pair<__m256> {
        const PREFILL_TOKENS: usize = 3;
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn f16s(p: *const u8) -> Self {
            // SAFETY: the caller passes 32 readable bytes.
            unsafe {
                Pair(
                    _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
                    _mm256_cvtph_ps(_mm_loadu_si128(p.add(16).cast())),
                )
            }
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn nibbles<const BIAS: i32>(p: *const u8, nibble: usize) -> Self {
            let shift = _mm256_set1_epi32(4 * nibble as i32);
            let (mask, bias) = (_mm256_set1_epi32(15), _mm256_set1_epi32(BIAS));
            let half = |p: *const u8| {
                // SAFETY: the caller passes 64 readable bytes.
                let codes = unsafe { _mm256_loadu_si256(p.cast()) };
                let code = _mm256_and_si256(_mm256_srlv_epi32(codes, shift), mask);
                _mm256_cvtepi32_ps(_mm256_sub_epi32(code, bias))
            };
            // SAFETY: as above.
            Pair(half(p), half(unsafe { p.add(32) }))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn bytes_i8(p: *const u8) -> Self {
            // SAFETY: the caller passes 16 readable bytes.
            unsafe {
                Pair(
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p.cast()))),
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p.add(8).cast()))),
                )
            }
        }
    }
}

/// A ggml block type's panel block: how 16 row blocks are interleaved and how an element's 16
/// weights are dequantized (the formulas of `docs/gguf.md`).
trait PanelFormat {
    /// Bytes of one row's ggml block.
    const BLOCK_BYTES: usize;
    /// Bytes of one panel block.
    const PANEL_BLOCK: usize = PANEL_ROWS * Self::BLOCK_BYTES;
    /// Moves the ggml block of row `lane` into its places in `panel_block`.
    fn pack(block: &[u8], lane: usize, panel_block: &mut [u8]);
    /// The ggml block of row `lane`, back from `panel_block`.
    fn unpack(panel_block: &[u8], lane: usize, block: &mut [u8]);
    /// The 16 scales `d` and mins `m` (zero where the type has none) of a panel block.
    unsafe fn scales<V: PanelLanes>(panel_block: *const u8) -> (V, V);
    /// The 16 rows' weight `k` (0..32), dequantized.
    unsafe fn weight<V: PanelLanes>(panel_block: *const u8, scales: (V, V), k: usize) -> V;
}

/// Moves 4-bit codes between a ggml block's `qs` (element `i < 16` in the low nibble of byte
/// `i`, element `i + 16` in its high nibble) and the panel's code groups: group `g` (64 bytes at
/// `at + 64 g`) holds one little-endian u32 per lane, whose nibble `i` is element `8 g + i`.
fn pack_nibbles(qs: &[u8], lane: usize, panel_block: &mut [u8], at: usize) {
    for g in 0..4 {
        let mut word = 0u32;
        for i in 0..8 {
            let e = 8 * g + i;
            let code = if e < 16 { qs[e] & 15 } else { qs[e - 16] >> 4 };
            word |= u32::from(code) << (4 * i);
        }
        panel_block[at + 64 * g + 4 * lane..][..4].copy_from_slice(&word.to_le_bytes());
    }
}

fn unpack_nibbles(panel_block: &[u8], lane: usize, at: usize, qs: &mut [u8]) {
    qs[..16].fill(0);
    for g in 0..4 {
        let bytes = &panel_block[at + 64 * g + 4 * lane..][..4];
        let word = u32::from_le_bytes(bytes.try_into().expect("4 bytes"));
        for i in 0..8 {
            let e = 8 * g + i;
            let code = ((word >> (4 * i)) & 15) as u8;
            if e < 16 {
                qs[e] |= code;
            } else {
                qs[e - 16] |= code << 4;
            }
        }
    }
}

/// Q4_0 panel block (288 bytes): `d` of the 16 rows (f16), then 4 code groups.
struct Q4_0P;
/// Q4_1 panel block (320 bytes): `d` of the 16 rows, their `m`, then 4 code groups.
struct Q4_1P;
/// Q8_0 panel block (544 bytes): `d` of the 16 rows, then per element the 16 rows' i8 codes.
struct Q8_0P;

impl PanelFormat for Q4_0P {
    const BLOCK_BYTES: usize = 18;
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pb[2 * lane..][..2].copy_from_slice(&block[..2]);
        pack_nibbles(&block[2..18], lane, pb, 32);
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        block[..2].copy_from_slice(&pb[2 * lane..][..2]);
        unpack_nibbles(pb, lane, 32, &mut block[2..18]);
    }
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { (V::f16s(pb), V::splat(0.0)) }
    }
    /// `d * q`, `q` = nibble − 8.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, _): (V, V), k: usize) -> V {
        // SAFETY: as above.
        unsafe { V::mul(d, V::nibbles::<8>(pb.add(32 + 64 * (k / 8)), k % 8)) }
    }
}

impl PanelFormat for Q4_1P {
    const BLOCK_BYTES: usize = 20;
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pb[2 * lane..][..2].copy_from_slice(&block[..2]);
        pb[32 + 2 * lane..][..2].copy_from_slice(&block[2..4]);
        pack_nibbles(&block[4..20], lane, pb, 64);
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        block[..2].copy_from_slice(&pb[2 * lane..][..2]);
        block[2..4].copy_from_slice(&pb[32 + 2 * lane..][..2]);
        unpack_nibbles(pb, lane, 64, &mut block[4..20]);
    }
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { (V::f16s(pb), V::f16s(pb.add(32))) }
    }
    /// `fma(d, q, m)`, `q` = nibble.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, m): (V, V), k: usize) -> V {
        // SAFETY: as above.
        unsafe { V::fma(d, V::nibbles::<0>(pb.add(64 + 64 * (k / 8)), k % 8), m) }
    }
}

impl PanelFormat for Q8_0P {
    const BLOCK_BYTES: usize = 34;
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pb[2 * lane..][..2].copy_from_slice(&block[..2]);
        for (k, &code) in block[2..34].iter().enumerate() {
            pb[32 + PANEL_ROWS * k + lane] = code;
        }
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        block[..2].copy_from_slice(&pb[2 * lane..][..2]);
        for (k, code) in block[2..34].iter_mut().enumerate() {
            *code = pb[32 + PANEL_ROWS * k + lane];
        }
    }
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { (V::f16s(pb), V::splat(0.0)) }
    }
    /// `d * q`, `q` = the i8 code.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, _): (V, V), k: usize) -> V {
        // SAFETY: as above.
        unsafe { V::mul(d, V::bytes_i8(pb.add(32 + PANEL_ROWS * k))) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dot_q_f32;
    use samebits_ggml::dequantize_row;

    /// `rows` rows of `cols` elements of `t` with varied scales, mins and codes (scales include
    /// negative and subnormal f16 values).
    fn blocks(t: GgmlType, rows: usize, cols: usize) -> Vec<u8> {
        let n = rows * cols / BLOCK;
        let mut bytes = Vec::new();
        for b in 0..n {
            let d = half::f16::from_f32(match b % 5 {
                0 => 0.013,
                1 => -0.0071,
                2 => 3.0e-6,
                3 => 0.25,
                _ => -1.5,
            });
            bytes.extend_from_slice(&d.to_le_bytes());
            if t == GgmlType::Q4_1 {
                let m = half::f16::from_f32(-0.11 + (b % 3) as f32 * 0.07);
                bytes.extend_from_slice(&m.to_le_bytes());
            }
            let codes = if t == GgmlType::Q8_0 { 32 } else { 16 };
            bytes.extend((0..codes).map(|i| ((b * 131 + i * 29 + 7) % 256) as u8));
        }
        bytes
    }

    fn pack(t: GgmlType, rows: usize, cols: usize, src: &[u8]) -> Vec<u8> {
        let row_bytes = t.row_bytes(cols).unwrap();
        pack_panels(t, rows, cols, |first, out| {
            out.copy_from_slice(&src[first * row_bytes..][..out.len()]);
            Ok::<(), QuantError>(())
        })
        .unwrap()
    }

    const TYPES: [GgmlType; 3] = [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0];

    #[test]
    fn rows_dequantize_as_their_ggml_blocks() {
        for t in TYPES {
            let (rows, cols) = (37, 96);
            let src = blocks(t, rows, cols);
            let packed = pack(t, rows, cols, &src);
            assert_eq!(packed.len(), 48 * t.row_bytes(cols).unwrap());
            let m = PanelMatrix::new(t, rows, cols, &packed).unwrap();
            let row_bytes = t.row_bytes(cols).unwrap();
            for r in 0..rows {
                let mut expected = vec![0f32; cols];
                dequantize_row(t, &src[r * row_bytes..][..row_bytes], &mut expected).unwrap();
                let mut got = vec![0f32; cols];
                m.dequantize_row(r, &mut got).unwrap();
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&expected), "{t} row {r}");
            }
        }
    }

    /// Every ISA path dequantizes a panel to samebits-ggml's values: with one-hot activation
    /// rows each product is one weight itself (`fma(w, 1, +0) = w`, other terms add `±0`; a
    /// `-0.0` weight gives `+0.0`), on the few-token path (one row at a time) and on the prefill
    /// path (all one-hot rows at once).
    #[test]
    fn panel_weights_equal_samebits_ggml_on_every_isa() {
        for t in TYPES {
            let (rows, cols) = (20, 64);
            let src = blocks(t, rows, cols);
            let packed = pack(t, rows, cols, &src);
            let m = PanelMatrix::new(t, rows, cols, &packed).unwrap();
            let mut expected = vec![0f32; rows * cols];
            dequantize_row(t, &src, &mut expected).unwrap();
            let identity: Vec<f32> = (0..cols * cols)
                .map(|i| if i / cols == i % cols { 1.0 } else { 0.0 })
                .collect();
            for isa in Isa::available() {
                let mut all = vec![0f32; cols * rows];
                m.matmul(0..m.panels(), &identity, &mut all, isa).unwrap();
                for k in 0..cols {
                    let mut one = vec![0f32; rows];
                    let x = &identity[k * cols..][..cols];
                    m.matmul(0..m.panels(), x, &mut one, isa).unwrap();
                    for r in 0..rows {
                        let want = (expected[r * cols + k] + 0.0).to_bits();
                        assert_eq!(one[r].to_bits(), want, "{t}, {isa}, row {r}, weight {k}");
                        let got = all[k * rows + r].to_bits();
                        assert_eq!(got, want, "{t}, {isa}, prefill, row {r}, weight {k}");
                    }
                }
            }
        }
    }

    /// Every ISA, every token count and every split into panel ranges gives `dot_q_f32` of the
    /// ggml row bit for bit; `cols` = 160 ends on a half tile.
    #[test]
    fn matmul_equals_dot_q_f32_on_every_isa_and_split() {
        for t in TYPES {
            let (rows, cols) = (75, 160);
            let src = blocks(t, rows, cols);
            let packed = pack(t, rows, cols, &src);
            let m = PanelMatrix::new(t, rows, cols, &packed).unwrap();
            let row_bytes = t.row_bytes(cols).unwrap();
            for tokens in [1, 2, 3, 5, 9, 13, 20] {
                let x: Vec<f32> = (0..tokens * cols)
                    .map(|i| ((i * 7919) % 97) as f32 / 13.0 - 3.5)
                    .collect();
                let expected: Vec<u32> = (0..tokens)
                    .flat_map(|tk| {
                        let x = &x[tk * cols..][..cols];
                        let src = &src;
                        (0..rows).map(move |r| {
                            dot_q_f32(t, &src[r * row_bytes..][..row_bytes], x)
                                .unwrap()
                                .to_bits()
                        })
                    })
                    .collect();
                for isa in Isa::available() {
                    for split in [0, 1, 3] {
                        let mut got = vec![0u32; tokens * rows];
                        for range in [0..split, split..m.panels()] {
                            let first = range.start * PANEL_ROWS;
                            let n = (range.end * PANEL_ROWS).min(rows).saturating_sub(first);
                            let mut out = vec![0f32; tokens * n];
                            m.matmul(range, &x, &mut out, isa).unwrap();
                            for tk in 0..tokens {
                                for i in 0..n {
                                    got[tk * rows + first + i] = out[tk * n + i].to_bits();
                                }
                            }
                        }
                        assert_eq!(got, expected, "{t}, {isa}, {tokens} tokens, split {split}");
                    }
                }
            }
        }
    }

    #[test]
    fn rejects_types_without_panels_and_wrong_sizes() {
        assert!(panel_bytes(GgmlType::Q6K, 16, 256).is_none());
        assert!(PanelMatrix::new(GgmlType::Q8_0, 16, 32, &[0u8; 10]).is_err());
        let packed = pack(GgmlType::Q8_0, 16, 32, &blocks(GgmlType::Q8_0, 16, 32));
        let m = PanelMatrix::new(GgmlType::Q8_0, 16, 32, &packed).unwrap();
        let mut out = [0f32; 16];
        assert!(m.matmul(0..2, &[0f32; 32], &mut out, Isa::Scalar).is_err());
        assert!(m.dequantize_row(16, &mut [0f32; 32]).is_err());
    }
}
