//! Row panels: a block-quantized weight matrix rearranged once, at load time, so that SIMD lanes
//! are output rows (`docs/gguf.md`, section "Row panels").
//!
//! A panel is [`PANEL_ROWS`] = 16 consecutive rows (the last panel padded with zero rows). For
//! each ggml block column (32 elements; 256 for the k-quants Q4_K, Q5_K, Q6_K and for IQ4_XS),
//! the 16 rows' blocks are stored together as one *panel block*: the 16 scales (and mins), then
//! the codes interleaved so that one load gives the code of one element for all 16 rows (IQ4
//! codes index the non-linear table in the lanes: one `vpermps` on AVX-512). The bytes are the
//! ggml bytes moved around, nothing is converted, so a panel matrix is exactly as large as the
//! ggml one (plus the padding rows), and
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
use samebits_ggml::iquant::{self, IQ4_NL_VALUES};
use samebits_ggml::{BlockFormat, GgmlType, QuantError, Result, kquant, legacy};
use std::ops::Range;

mod int8;

pub use int8::{INT8_TYPES, Int8Activations, has_int8_products, int8_block_codes, int8_dot};

/// Rows per panel: the lanes of one AVX-512 register, two AVX2 registers.
pub const PANEL_ROWS: usize = 16;
/// Elements per block column of the kernels: a ggml block, or a 32-element sub-block of a
/// k-quant's 256-element super-block.
const BLOCK: usize = 32;
/// Blocks per reduction tile.
const BLOCKS_PER_TILE: usize = REDUCTION_TILE / BLOCK;

/// The types with a panel layout. `samebits::MatMulGguf` packs the weights of these types into
/// panels on the CPU.
pub const PANEL_TYPES: [GgmlType; 10] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
    GgmlType::Iq4Nl,
    GgmlType::Iq4Xs,
];

/// Whether `ggml_type` has a panel layout (one of [`PANEL_TYPES`]).
pub fn has_panel_layout(ggml_type: GgmlType) -> bool {
    PANEL_TYPES.contains(&ggml_type)
}

/// A `[rows, cols]` matrix in panel layout, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct PanelMatrix<'a> {
    ggml_type: GgmlType,
    rows: usize,
    cols: usize,
    bytes: &'a [u8],
}

/// Runs `$body` with `$F` bound to the [`PanelFormat`] of `$ggml_type`, one of the types
/// [`has_panel_layout`] accepts (callers check it first; Q8_0 is the last arm).
macro_rules! with_panel_format {
    ($ggml_type:expr, $F:ident => $body:expr) => {
        match $ggml_type {
            GgmlType::Q4_0 => {
                type $F = Q4_0P;
                $body
            }
            GgmlType::Q4_1 => {
                type $F = Q4_1P;
                $body
            }
            GgmlType::Q5_0 => {
                type $F = Q5_0P;
                $body
            }
            GgmlType::Q5_1 => {
                type $F = Q5_1P;
                $body
            }
            GgmlType::Q4K => {
                type $F = Q4KP;
                $body
            }
            GgmlType::Q5K => {
                type $F = Q5KP;
                $body
            }
            GgmlType::Q6K => {
                type $F = Q6KP;
                $body
            }
            GgmlType::Iq4Nl => {
                type $F = Iq4NlP;
                $body
            }
            GgmlType::Iq4Xs => {
                type $F = Iq4XsP;
                $body
            }
            _ => {
                type $F = Q8_0P;
                $body
            }
        }
    };
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
                with_panel_format!(ggml_type, F => F::pack(row_block(r), r, panel_block));
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
        let mut block = [0u8; kquant::Q6K::BYTES];
        let block = &mut block[..block_bytes];
        for (panel_block, values) in panel
            .chunks_exact(PANEL_ROWS * block_bytes)
            .zip(out.chunks_exact_mut(self.ggml_type.block_elems()))
        {
            with_panel_format!(self.ggml_type, F => {
                F::unpack(panel_block, lane, block);
                <F as PanelFormat>::Ggml::dequantize_block(block, values);
            });
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
        with_panel_format!(self.ggml_type, F => run_format::<F>(&mut job, isa));
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
    // stays inside the job's panels (blocks / F::SUBS * F::PANEL_BLOCK bytes each) and `x`.
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
                        let (block, sub) = F::locate(panel, b + bb);
                        let scales = F::scales::<V>(block, sub);
                        each_element!(k, {
                            *w.get_unchecked_mut((bb * BLOCK + k) * PREFILL_PANELS + i) =
                                F::weight::<V>(block, scales, sub, k);
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
                for (i, &total) in token_totals[..np].iter().enumerate() {
                    store_panel(job.out, job.n, p + i, t, total);
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

/// Stores `total`, the outputs of panel `panel` for token row `t`, into `out` (rows of `n`
/// outputs), without the padding rows past `n`.
///
/// # Safety
/// `V`'s CPU features are enabled.
#[inline(always)]
unsafe fn store_panel<V: Lanes>(out: &mut [f32], n: usize, panel: usize, t: usize, total: V) {
    let first = panel * PANEL_ROWS;
    let valid = n.saturating_sub(first).min(PANEL_ROWS);
    let mut lanes = [0f32; PANEL_ROWS];
    // SAFETY: the caller's contract; `lanes` holds the PANEL_ROWS lanes.
    unsafe { total.store(lanes.as_mut_ptr()) };
    out[t * n + first..][..valid].copy_from_slice(&lanes[..valid]);
}

/// The panels after `p..p + np` of `panels` (`stride` bytes each), at most `np` of them: the
/// next register tile's, which [`prefetch_share`] fetches while this tile is summed.
fn next_panels(panels: &[u8], stride: usize, p: usize, np: usize) -> &[u8] {
    let start = ((p + np) * stride).min(panels.len());
    &panels[start..(start + np * stride).min(panels.len())]
}

/// Asks for block `b`'s share (of `blocks`) of `ahead`'s cache lines, into the L2 cache: a
/// decode step streams each panel once, and with the hardware prefetcher alone the tile's
/// loads wait on memory (`benches/decode_stream.rs`: on an AMD Zen 4, the exact-integer
/// products read 8-10 GB/s without, 15-19 with). A hint only: no value depends on it.
#[inline(always)]
fn prefetch_share(ahead: &[u8], b: usize, blocks: usize) {
    let share = ahead.len().div_ceil(blocks.max(1));
    let end = ((b + 1) * share).min(ahead.len());
    let mut at = (b * share) & !63;
    while at < end {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `at` is inside `ahead`; a prefetch reads nothing into the program.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T1>(ahead.as_ptr().add(at).cast());
        }
        at += 64;
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
    let ahead = next_panels(all_panels, job.panel_stride, p, NP);
    // SAFETY: forwarded from the caller.
    let totals = unsafe { panel_tile::<V, F, NP, NT>(panels, job.blocks, x, ahead) };
    for (i, panel_totals) in totals.iter().enumerate() {
        for (j, &total) in panel_totals.iter().enumerate() {
            // SAFETY: forwarded from the caller.
            unsafe { store_panel(job.out, job.n, p + i, t + j, total) };
        }
    }
}

/// The canonical dot products of the rows of `NP` panels with `NT` activation rows: per tile of
/// 64 terms, `acc = fma(w_k, x_k, acc)` from `+0.0` in index order, then `total = total + acc`
/// from `total = -0.0` (which leaves the first tile's partial exactly as it is, `-0.0 + p = p`
/// for every `p`, so the fold is `s = p_0`, `s = s + p_j`). `ahead` is fetched meanwhile.
#[inline(always)]
unsafe fn panel_tile<V: PanelLanes, F: PanelFormat, const NP: usize, const NT: usize>(
    panels: [&[u8]; NP],
    blocks: usize,
    x: [&[f32]; NT],
    ahead: &[u8],
) -> [[V; NT]; NP] {
    // SAFETY (whole body): V's features are enabled (the caller's contract); every pointer read
    // stays inside `panels` (blocks / F::SUBS * F::PANEL_BLOCK bytes each) and `x` (blocks * 32
    // values).
    unsafe {
        let mut total = [[V::splat(-0.0); NT]; NP];
        let mut b = 0;
        while b < blocks {
            let mut acc = [[V::splat(0.0); NT]; NP];
            for b in b..(b + BLOCKS_PER_TILE).min(blocks) {
                prefetch_share(ahead, b, blocks);
                let (block, sub): ([*const u8; NP], usize) = (
                    std::array::from_fn(|i| F::locate(panels[i].as_ptr(), b).0),
                    b % F::SUBS,
                );
                let scales: [(V, V); NP] = std::array::from_fn(|i| F::scales::<V>(block[i], sub));
                // Unrolled so that every code offset and shift is a constant.
                each_element!(k, {
                    let xk: [V; NT] =
                        std::array::from_fn(|j| V::splat(*x[j].get_unchecked(b * BLOCK + k)));
                    for i in 0..NP {
                        let w = F::weight::<V>(block[i], scales[i], sub, k);
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
    /// `-x` in every lane: the sign bit flipped (NaN included).
    unsafe fn negated(self) -> Self;
    /// From the 16 little-endian u32 at `p`, `((u >> 4 * nibble) & 15) - BIAS`, exactly.
    unsafe fn nibbles<const BIAS: i32>(p: *const u8, nibble: usize) -> Self;
    /// From the 16 little-endian u32 at `p`, `IQ4_NL_VALUES[(u >> 4 * nibble) & 15]` (the IQ4
    /// code table of samebits-ggml), exactly.
    unsafe fn iq4_values(p: *const u8, nibble: usize) -> Self;
    /// The 16 i8 at `p`, exactly.
    unsafe fn bytes_i8(p: *const u8) -> Self;
    /// From the 16 u8 at `p`, `(u >> shift) & mask`, exactly.
    unsafe fn bits(p: *const u8, shift: u32, mask: u32) -> Self;
    /// From the 16 little-endian u32 at `p`, the `BITS`-bit field `index`,
    /// `(u >> BITS * index) & (2^BITS - 1)`, exactly.
    unsafe fn fields<const BITS: u32>(p: *const u8, index: usize) -> Self;
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
    unsafe fn negated(self) -> Self {
        self.map(|v| -v)
    }
    #[inline(always)]
    unsafe fn nibbles<const BIAS: i32>(p: *const u8, nibble: usize) -> Self {
        // SAFETY: the caller passes 64 readable bytes.
        unsafe { Self::fields::<4>(p, nibble).map(|code| code - BIAS as f32) }
    }
    #[inline(always)]
    unsafe fn iq4_values(p: *const u8, nibble: usize) -> Self {
        // SAFETY: the caller passes 64 readable bytes.
        let codes = unsafe { Self::fields::<4>(p, nibble) };
        codes.map(|code| f32::from(IQ4_NL_VALUES[code as usize]))
    }
    #[inline(always)]
    unsafe fn bytes_i8(p: *const u8) -> Self {
        // SAFETY: the caller passes 16 readable bytes.
        let b = unsafe { std::slice::from_raw_parts(p, PANEL_ROWS) };
        std::array::from_fn(|i| f32::from(b[i] as i8))
    }
    #[inline(always)]
    unsafe fn bits(p: *const u8, shift: u32, mask: u32) -> Self {
        // SAFETY: the caller passes 16 readable bytes.
        let b = unsafe { std::slice::from_raw_parts(p, PANEL_ROWS) };
        std::array::from_fn(|i| ((u32::from(b[i]) >> shift) & mask) as f32)
    }
    #[inline(always)]
    unsafe fn fields<const BITS: u32>(p: *const u8, index: usize) -> Self {
        // SAFETY: the caller passes 64 readable bytes.
        let b = unsafe { std::slice::from_raw_parts(p, 4 * PANEL_ROWS) };
        std::array::from_fn(|i| {
            let u = u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
            ((u >> (BITS as usize * index)) & ((1 << BITS) - 1)) as f32
        })
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! [`PanelLanes`](super::PanelLanes) as one AVX-512 register or a pair of AVX2 registers.
    use super::{IQ4_NL_VALUES, PanelLanes};
    use crate::lanes::Pair;
    use std::arch::x86_64::*;

    /// The float value of every 4-bit code minus `BIAS` (a table for `vpermps`, which reads
    /// only the low 4 bits of each index).
    #[inline(always)]
    fn code_table<const BIAS: i32>() -> [f32; 16] {
        std::array::from_fn(|i| (i as i32 - BIAS) as f32)
    }

    /// The IQ4 code table as floats.
    #[inline(always)]
    fn iq4_table() -> [f32; 16] {
        IQ4_NL_VALUES.map(f32::from)
    }

    /// `table[(u >> 4 * nibble) & 15]` for the 16 little-endian u32 `u` at `p`: one `vpermps`,
    /// which reads only the low 4 bits of each index.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn lookup_512(p: *const u8, nibble: usize, table: [f32; 16]) -> __m512 {
        // SAFETY: the caller passes 64 readable bytes.
        let codes = unsafe { _mm512_loadu_si512(p.cast()) };
        let shifted = _mm512_srlv_epi32(codes, _mm512_set1_epi32(4 * nibble as i32));
        // SAFETY: the table is 16 floats.
        let table = unsafe { _mm512_loadu_ps(table.as_ptr()) };
        _mm512_permutexvar_ps(shifted, table)
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
        unsafe fn negated(self) -> Self {
            let sign = _mm512_set1_epi32(i32::MIN);
            _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(self), sign))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn nibbles<const BIAS: i32>(p: *const u8, nibble: usize) -> Self {
            // SAFETY: the caller passes 64 readable bytes.
            unsafe { lookup_512(p, nibble, code_table::<BIAS>()) }
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn iq4_values(p: *const u8, nibble: usize) -> Self {
            // SAFETY: the caller passes 64 readable bytes.
            unsafe { lookup_512(p, nibble, iq4_table()) }
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn bytes_i8(p: *const u8) -> Self {
            // SAFETY: the caller passes 16 readable bytes.
            unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.cast()))) }
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn bits(p: *const u8, shift: u32, mask: u32) -> Self {
            // SAFETY: the caller passes 16 readable bytes.
            let b = unsafe { _mm512_cvtepu8_epi32(_mm_loadu_si128(p.cast())) };
            let b = _mm512_srlv_epi32(b, _mm512_set1_epi32(shift as i32));
            _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(mask as i32)))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn fields<const BITS: u32>(p: *const u8, index: usize) -> Self {
            // SAFETY: the caller passes 64 readable bytes.
            let u = unsafe { _mm512_loadu_si512(p.cast()) };
            let u = _mm512_srlv_epi32(u, _mm512_set1_epi32((BITS as usize * index) as i32));
            _mm512_cvtepi32_ps(_mm512_and_si512(u, _mm512_set1_epi32((1 << BITS) - 1)))
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
        unsafe fn negated(self) -> Self {
            let sign = _mm256_set1_ps(-0.0);
            Pair(_mm256_xor_ps(self.0, sign), _mm256_xor_ps(self.1, sign))
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
        /// Per 8 lanes, `vpermps` over each half of the table (it reads the low 3 bits of the
        /// index), then the half that bit 3 picks (`blendvps` reads bit 31, where bit 3 is
        /// shifted).
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn iq4_values(p: *const u8, nibble: usize) -> Self {
            let shift = _mm256_set1_epi32(4 * nibble as i32);
            let table = iq4_table();
            // SAFETY: the table is 16 floats.
            let (low, high) = unsafe {
                (
                    _mm256_loadu_ps(table.as_ptr()),
                    _mm256_loadu_ps(table.as_ptr().add(8)),
                )
            };
            let half = |p: *const u8| {
                // SAFETY: the caller passes 64 readable bytes.
                let codes = unsafe { _mm256_loadu_si256(p.cast()) };
                let code = _mm256_srlv_epi32(codes, shift);
                let pick = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(code));
                _mm256_blendv_ps(
                    _mm256_permutevar8x32_ps(low, code),
                    _mm256_permutevar8x32_ps(high, code),
                    pick,
                )
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
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn bits(p: *const u8, shift: u32, mask: u32) -> Self {
            let (shift, mask) = (
                _mm256_set1_epi32(shift as i32),
                _mm256_set1_epi32(mask as i32),
            );
            let half = |p: *const u8| {
                // SAFETY: the caller passes 16 readable bytes.
                let b = unsafe { _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast())) };
                _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(b, shift), mask))
            };
            // SAFETY: as above.
            Pair(half(p), half(unsafe { p.add(8) }))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn fields<const BITS: u32>(p: *const u8, index: usize) -> Self {
            let shift = _mm256_set1_epi32((BITS as usize * index) as i32);
            let mask = _mm256_set1_epi32((1 << BITS) - 1);
            let half = |p: *const u8| {
                // SAFETY: the caller passes 64 readable bytes.
                let u = unsafe { _mm256_loadu_si256(p.cast()) };
                _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(u, shift), mask))
            };
            // SAFETY: as above.
            Pair(half(p), half(unsafe { p.add(32) }))
        }
    }
}

/// A ggml block type's panel block: how 16 row blocks are interleaved and how an element's 16
/// weights are dequantized (the formulas of `docs/gguf.md`).
trait PanelFormat {
    /// The ggml block format (samebits-ggml's one definition of its dequantization).
    type Ggml: BlockFormat;
    /// 32-element sub-blocks per ggml block (8 for the k-quants).
    const SUBS: usize = Self::Ggml::ELEMS / BLOCK;
    /// Bytes of one panel block.
    const PANEL_BLOCK: usize = PANEL_ROWS * Self::Ggml::BYTES;
    /// Moves the ggml block of row `lane` into its places in `panel_block`.
    fn pack(block: &[u8], lane: usize, panel_block: &mut [u8]);
    /// The ggml block of row `lane`, back from `panel_block`.
    fn unpack(panel_block: &[u8], lane: usize, block: &mut [u8]);
    /// The panel block holding 32-element block column `b` of `panel`, and `b`'s sub-block in it.
    #[inline(always)]
    unsafe fn locate(panel: *const u8, b: usize) -> (*const u8, usize) {
        // SAFETY: the caller passes a panel of more than `b` block columns.
        (
            unsafe { panel.add(b / Self::SUBS * Self::PANEL_BLOCK) },
            b % Self::SUBS,
        )
    }
    /// Sub-block `sub`'s two per-lane factors (scales `d` and mins `m`, zero where the type has
    /// none; Q6_K: the scales of its two 16-element halves).
    unsafe fn scales<V: PanelLanes>(panel_block: *const u8, sub: usize) -> (V, V);
    /// The 16 rows' weight `k` (0..32) of sub-block `sub`, dequantized.
    unsafe fn weight<V: PanelLanes>(
        panel_block: *const u8,
        scales: (V, V),
        sub: usize,
        k: usize,
    ) -> V;
}

/// Stores the `N`-bit codes of 32 elements (`code(e)`, e in 0..32) of one lane as the panel's
/// code groups: group `g` (64 bytes at `at + 64 g`) holds one little-endian u32 per lane whose
/// field `i` (bits `N i .. N i + N - 1`) is element `32 / G * g + i`, `G = 32 N / 32` groups.
fn pack_fields<const N: usize>(code: impl Fn(usize) -> u8, lane: usize, pb: &mut [u8], at: usize) {
    let per_word = 32 / N;
    for g in 0..32 / per_word {
        let mut word = 0u32;
        for i in 0..per_word {
            word |= u32::from(code(per_word * g + i)) << (N * i);
        }
        pb[at + 64 * g + 4 * lane..][..4].copy_from_slice(&word.to_le_bytes());
    }
}

/// The 32 codes [`pack_fields`] stored for `lane` at `at`.
fn unpack_fields<const N: usize>(pb: &[u8], lane: usize, at: usize) -> [u8; 32] {
    let per_word = 32 / N;
    std::array::from_fn(|e| {
        let (g, i) = (e / per_word, e % per_word);
        let bytes = &pb[at + 64 * g + 4 * lane..][..4];
        let word = u32::from_le_bytes(bytes.try_into().expect("4 bytes"));
        ((word >> (N * i)) & ((1 << N) - 1)) as u8
    })
}

/// Stores the bytes of one lane so that byte `i` of lane `l` is at `at + 16 i + l` (one load
/// gives byte `i` of all 16 rows).
fn pack_bytes(bytes: &[u8], lane: usize, pb: &mut [u8], at: usize) {
    for (i, &byte) in bytes.iter().enumerate() {
        pb[at + PANEL_ROWS * i + lane] = byte;
    }
}

/// The bytes [`pack_bytes`] stored for `lane` at `at`.
fn unpack_bytes(pb: &[u8], lane: usize, at: usize, bytes: &mut [u8]) {
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = pb[at + PANEL_ROWS * i + lane];
    }
}

/// The legacy Q4 types' `qs` (element `e < 16` in the low nibble of byte `e`, element `e + 16`
/// in its high nibble) as code groups at `at`.
fn pack_nibbles(qs: &[u8], lane: usize, panel_block: &mut [u8], at: usize) {
    let code = |e: usize| if e < 16 { qs[e] & 15 } else { qs[e - 16] >> 4 };
    pack_fields::<4>(code, lane, panel_block, at);
}

fn unpack_nibbles(panel_block: &[u8], lane: usize, at: usize, qs: &mut [u8]) {
    let codes = unpack_fields::<4>(panel_block, lane, at);
    for e in 0..16 {
        qs[e] = codes[e] | (codes[e + 16] << 4);
    }
}

/// Q4_0 panel block (288 bytes): `d` of the 16 rows (f16), then 4 code groups.
struct Q4_0P;
/// Q4_1 panel block (320 bytes): `d` of the 16 rows, their `m`, then 4 code groups.
struct Q4_1P;
/// Q5_0 panel block (352 bytes): `d` of the 16 rows, their `qh` (one u32 per lane, bit `l` =
/// bit 4 of element `l`), then the low nibbles' 4 code groups.
struct Q5_0P;
/// Q5_1 panel block (384 bytes): `d` of the 16 rows, their `m`, their `qh`, then 4 code groups.
struct Q5_1P;
/// Q8_0 panel block (544 bytes): `d` of the 16 rows, then per element the 16 rows' i8 codes.
struct Q8_0P;

/// The 16 rows' 5-bit code of element `k` minus `BIAS`: the low nibble (minus `BIAS`) from the
/// code groups at `low`, plus 16 times bit 4 from the one u32 per lane at `high` (exact).
#[inline(always)]
unsafe fn five_bit_codes<V: PanelLanes, const BIAS: i32>(
    low: *const u8,
    high: *const u8,
    k: usize,
) -> V {
    // SAFETY: the caller passes 4 code groups at `low` and 64 bytes at `high`.
    unsafe {
        let low = V::nibbles::<BIAS>(low.add(64 * (k / 8)), k % 8);
        V::fma(V::fields::<1>(high, k), V::splat(16.0), low)
    }
}

impl PanelFormat for Q4_0P {
    type Ggml = legacy::Q4_0;
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pb[2 * lane..][..2].copy_from_slice(&block[..2]);
        pack_nibbles(&block[2..18], lane, pb, 32);
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        block[..2].copy_from_slice(&pb[2 * lane..][..2]);
        unpack_nibbles(pb, lane, 32, &mut block[2..18]);
    }
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8, _: usize) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { (V::f16s(pb), V::splat(0.0)) }
    }
    /// `d * q`, `q` = nibble − 8.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, _): (V, V), _: usize, k: usize) -> V {
        // SAFETY: as above.
        unsafe { V::mul(d, V::nibbles::<8>(pb.add(32 + 64 * (k / 8)), k % 8)) }
    }
}

impl PanelFormat for Q4_1P {
    type Ggml = legacy::Q4_1;
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
    unsafe fn scales<V: PanelLanes>(pb: *const u8, _: usize) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { (V::f16s(pb), V::f16s(pb.add(32))) }
    }
    /// `fma(d, q, m)`, `q` = nibble.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, m): (V, V), _: usize, k: usize) -> V {
        // SAFETY: as above.
        unsafe { V::fma(d, V::nibbles::<0>(pb.add(64 + 64 * (k / 8)), k % 8), m) }
    }
}

impl PanelFormat for Q5_0P {
    type Ggml = legacy::Q5_0;
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pb[2 * lane..][..2].copy_from_slice(&block[..2]);
        pb[32 + 4 * lane..][..4].copy_from_slice(&block[2..6]);
        pack_nibbles(&block[6..22], lane, pb, 96);
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        block[..2].copy_from_slice(&pb[2 * lane..][..2]);
        block[2..6].copy_from_slice(&pb[32 + 4 * lane..][..4]);
        unpack_nibbles(pb, lane, 96, &mut block[6..22]);
    }
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8, _: usize) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { (V::f16s(pb), V::splat(0.0)) }
    }
    /// `d * (q - 16)`, `q` = nibble + 16 * high bit.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, _): (V, V), _: usize, k: usize) -> V {
        // SAFETY: as above.
        unsafe { V::mul(d, five_bit_codes::<V, 16>(pb.add(96), pb.add(32), k)) }
    }
}

impl PanelFormat for Q5_1P {
    type Ggml = legacy::Q5_1;
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pb[2 * lane..][..2].copy_from_slice(&block[..2]);
        pb[32 + 2 * lane..][..2].copy_from_slice(&block[2..4]);
        pb[64 + 4 * lane..][..4].copy_from_slice(&block[4..8]);
        pack_nibbles(&block[8..24], lane, pb, 128);
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        block[..2].copy_from_slice(&pb[2 * lane..][..2]);
        block[2..4].copy_from_slice(&pb[32 + 2 * lane..][..2]);
        block[4..8].copy_from_slice(&pb[64 + 4 * lane..][..4]);
        unpack_nibbles(pb, lane, 128, &mut block[8..24]);
    }
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8, _: usize) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { (V::f16s(pb), V::f16s(pb.add(32))) }
    }
    /// `fma(d, q, m)`, `q` = nibble + 16 * high bit.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, m): (V, V), _: usize, k: usize) -> V {
        // SAFETY: as above.
        unsafe { V::fma(d, five_bit_codes::<V, 0>(pb.add(128), pb.add(64), k), m) }
    }
}

impl PanelFormat for Q8_0P {
    type Ggml = legacy::Q8_0;
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pb[2 * lane..][..2].copy_from_slice(&block[..2]);
        pack_bytes(&block[2..34], lane, pb, 32);
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        block[..2].copy_from_slice(&pb[2 * lane..][..2]);
        unpack_bytes(pb, lane, 32, &mut block[2..34]);
    }
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8, _: usize) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { (V::f16s(pb), V::splat(0.0)) }
    }
    /// `d * q`, `q` = the i8 code.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, _): (V, V), _: usize, k: usize) -> V {
        // SAFETY: as above.
        unsafe { V::mul(d, V::bytes_i8(pb.add(32 + PANEL_ROWS * k))) }
    }
}

/// IQ4_NL panel block (288 bytes): Q4_0's layout (the ggml blocks are alike, `d: f16, qs[16]`).
struct Iq4NlP;
/// IQ4_XS panel block (2,176 bytes, one 256-element super-block of 16 rows): `d[16]` (f16), the
/// 6 scale bytes `scales_h` (u16, little-endian) and `scales_l[4]` (byte `i` of lane `l` at
/// `32 + 16 i + l`), then for each 32-element sub-block `s` its 4 code groups at `128 + 256 s`.
struct Iq4XsP;

impl PanelFormat for Iq4NlP {
    type Ggml = iquant::Iq4Nl;
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        Q4_0P::pack(block, lane, pb);
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        Q4_0P::unpack(pb, lane, block);
    }
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8, sub: usize) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { Q4_0P::scales(pb, sub) }
    }
    /// `d * K[q]`.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, _): (V, V), _: usize, k: usize) -> V {
        // SAFETY: as above.
        unsafe { V::mul(d, V::iq4_values(pb.add(32 + 64 * (k / 8)), k % 8)) }
    }
}

impl PanelFormat for Iq4XsP {
    type Ggml = iquant::Iq4Xs;
    /// Sub-block `s` takes the codes `qs[16 s .. 16 s + 16]` as IQ4_NL (and Q4_0) do.
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pb[2 * lane..][..2].copy_from_slice(&block[..2]);
        pack_bytes(&block[2..8], lane, pb, 32);
        for (s, qs) in block[8..136].chunks_exact(16).enumerate() {
            pack_nibbles(qs, lane, pb, 128 + 256 * s);
        }
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        block[..2].copy_from_slice(&pb[2 * lane..][..2]);
        unpack_bytes(pb, lane, 32, &mut block[2..8]);
        for (s, qs) in block[8..136].chunks_exact_mut(16).enumerate() {
            unpack_nibbles(pb, lane, 128 + 256 * s, qs);
        }
    }
    /// `(d * (ls - 32), 0)`, exact, with the 6-bit `ls`: its low 4 bits from `scales_l[s / 2]`
    /// (scale byte `2 + s / 2`), its high 2 bits from `scales_h >> 2 s` (scale byte `s / 4`).
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8, s: usize) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe {
            let byte = |i: usize| pb.add(32 + PANEL_ROWS * i);
            let low = V::bits(byte(2 + s / 2), 4 * (s as u32 % 2), 15);
            let high = V::bits(byte(s / 4), 2 * (s as u32 % 4), 3);
            let ls = V::fma(high, V::splat(16.0), low);
            (
                V::mul(V::f16s(pb), V::add(ls, V::splat(-32.0))),
                V::splat(0.0),
            )
        }
    }
    /// `(d * (ls - 32)) * K[q]`.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, _): (V, V), s: usize, k: usize) -> V {
        // SAFETY: as above.
        unsafe {
            V::mul(
                d,
                V::iq4_values(pb.add(128 + 256 * s + 64 * (k / 8)), k % 8),
            )
        }
    }
}

/// Q4_K panel block (2,304 bytes, one 256-element super-block of 16 rows): `d[16]`, `dmin[16]`
/// (f16), the 12 packed scale bytes (byte `i` of lane `l` at `64 + 16 i + l`), then for each
/// sub-block `s` its 4 code groups at `256 + 256 s`.
struct Q4KP;
/// Q5_K panel block (2,816 bytes): Q4_K's `d`, `dmin`, scale bytes and low-nibble code groups,
/// then for each sub-block `s` its high bits, one u32 per lane (bit `l` = element `l`), at
/// `2304 + 64 s`.
struct Q5KP;
/// Q6_K panel block (3,360 bytes): `d[16]`, the 16 i8 scales (scale `i` of lane `l` at
/// `32 + 16 i + l`), for each sub-block `s` the low nibbles' 4 code groups at `288 + 256 s`,
/// then for each sub-block the high 2 bits' 2 code groups at `2336 + 128 s`.
struct Q6KP;

impl PanelFormat for Q4KP {
    type Ggml = kquant::Q4K;
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pack_scaled_min_head(block, lane, pb);
        let qs = &block[16..144];
        for s in 0..8 {
            let code = |l: usize| (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
            pack_fields::<4>(code, lane, pb, 256 + 256 * s);
        }
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        unpack_scaled_min_head(pb, lane, block);
        let qs = &mut block[16..144];
        qs.fill(0);
        for s in 0..8 {
            for (l, code) in unpack_fields::<4>(pb, lane, 256 + 256 * s)
                .into_iter()
                .enumerate()
            {
                qs[32 * (s / 2) + l] |= code << (4 * (s % 2));
            }
        }
    }
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8, s: usize) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { scaled_min_factors(pb, s) }
    }
    /// `fma(d * sc, q, -(dmin * mn))`, `q` = nibble.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, m): (V, V), s: usize, k: usize) -> V {
        // SAFETY: as above.
        unsafe {
            V::fma(
                d,
                V::nibbles::<0>(pb.add(256 + 256 * s + 64 * (k / 8)), k % 8),
                m,
            )
        }
    }
}

impl PanelFormat for Q5KP {
    type Ggml = kquant::Q5K;
    /// Element `l` of sub-block `s`: nibble `s % 2` of `qs[32 (s / 2) + l]`, bit 4 from bit `s`
    /// of `qh[l]`.
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pack_scaled_min_head(block, lane, pb);
        let (qh, qs) = (&block[16..48], &block[48..176]);
        for s in 0..8 {
            let low = |l: usize| (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
            pack_fields::<4>(low, lane, pb, 256 + 256 * s);
            pack_fields::<1>(|l| (qh[l] >> s) & 1, lane, pb, 2304 + 64 * s);
        }
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        unpack_scaled_min_head(pb, lane, block);
        block[16..176].fill(0);
        for s in 0..8 {
            let low = unpack_fields::<4>(pb, lane, 256 + 256 * s);
            let high = unpack_fields::<1>(pb, lane, 2304 + 64 * s);
            for l in 0..32 {
                block[48 + 32 * (s / 2) + l] |= low[l] << (4 * (s % 2));
                block[16 + l] |= high[l] << s;
            }
        }
    }
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8, s: usize) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe { scaled_min_factors(pb, s) }
    }
    /// `fma(d * sc, q, -(dmin * mn))`, `q` = nibble + 16 * high bit (exact).
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (d, m): (V, V), s: usize, k: usize) -> V {
        // SAFETY: as above.
        unsafe {
            let q = five_bit_codes::<V, 0>(pb.add(256 + 256 * s), pb.add(2304 + 64 * s), k);
            V::fma(d, q, m)
        }
    }
}

/// Moves a Q4_K / Q5_K block's `d`, `dmin` and packed scale bytes to their panel places:
/// `d[16]`, `dmin[16]`, then byte `i` of lane `l` at `64 + 16 i + l`.
fn pack_scaled_min_head(block: &[u8], lane: usize, pb: &mut [u8]) {
    pb[2 * lane..][..2].copy_from_slice(&block[..2]);
    pb[32 + 2 * lane..][..2].copy_from_slice(&block[2..4]);
    pack_bytes(&block[4..16], lane, pb, 64);
}

fn unpack_scaled_min_head(pb: &[u8], lane: usize, block: &mut [u8]) {
    block[..2].copy_from_slice(&pb[2 * lane..][..2]);
    block[2..4].copy_from_slice(&pb[32 + 2 * lane..][..2]);
    unpack_bytes(pb, lane, 64, &mut block[4..16]);
}

/// Q4_K's and Q5_K's factors of sub-block `s`: `(d * sc, -(dmin * mn))` with the 6-bit `sc`,
/// `mn` of samebits-ggml's `scale_and_min`, both products exact (the negation a sign flip).
#[inline(always)]
unsafe fn scaled_min_factors<V: PanelLanes>(pb: *const u8, s: usize) -> (V, V) {
    // SAFETY (whole body): the caller passes a whole panel block.
    unsafe {
        let byte = |i: usize| pb.add(64 + PANEL_ROWS * i);
        let sixteen = V::splat(16.0);
        let (sc, mn) = if s < 4 {
            (V::bits(byte(s), 0, 63), V::bits(byte(s + 4), 0, 63))
        } else {
            (
                V::fma(
                    V::bits(byte(s - 4), 6, 3),
                    sixteen,
                    V::bits(byte(s + 4), 0, 15),
                ),
                V::fma(V::bits(byte(s), 6, 3), sixteen, V::bits(byte(s + 4), 4, 15)),
            )
        };
        (
            V::mul(V::f16s(pb), sc),
            V::mul(V::f16s(pb.add(32)), mn).negated(),
        )
    }
}

impl PanelFormat for Q6KP {
    type Ggml = kquant::Q6K;
    /// Element `l` of sub-block `s = 4 h + r` (samebits-ggml's Q6K): low nibble from
    /// `ql[64 h + l + 32 (r % 2)] >> 4 (r / 2)`, high 2 bits from `qh[32 h + l] >> 2 r`.
    fn pack(block: &[u8], lane: usize, pb: &mut [u8]) {
        pb[2 * lane..][..2].copy_from_slice(&block[208..210]);
        pack_bytes(&block[192..208], lane, pb, 32);
        let (ql, qh) = (&block[..128], &block[128..192]);
        for s in 0..8 {
            let (h, r) = (s / 4, s % 4);
            let low = |l: usize| (ql[64 * h + l + 32 * (r % 2)] >> (4 * (r / 2))) & 15;
            let high = |l: usize| (qh[32 * h + l] >> (2 * r)) & 3;
            pack_fields::<4>(low, lane, pb, 288 + 256 * s);
            pack_fields::<2>(high, lane, pb, 2336 + 128 * s);
        }
    }
    fn unpack(pb: &[u8], lane: usize, block: &mut [u8]) {
        block[208..210].copy_from_slice(&pb[2 * lane..][..2]);
        unpack_bytes(pb, lane, 32, &mut block[192..208]);
        block[..192].fill(0);
        for s in 0..8 {
            let (h, r) = (s / 4, s % 4);
            let low = unpack_fields::<4>(pb, lane, 288 + 256 * s);
            let high = unpack_fields::<2>(pb, lane, 2336 + 128 * s);
            for l in 0..32 {
                block[64 * h + l + 32 * (r % 2)] |= low[l] << (4 * (r / 2));
                block[128 + 32 * h + l] |= high[l] << (2 * r);
            }
        }
    }
    /// `(d * sc_lo, d * sc_hi)`: the scales of the sub-block's two 16-element halves, exact.
    #[inline(always)]
    unsafe fn scales<V: PanelLanes>(pb: *const u8, s: usize) -> (V, V) {
        // SAFETY: the caller passes a whole panel block.
        unsafe {
            let d = V::f16s(pb);
            let scale = |i: usize| V::mul(d, V::bytes_i8(pb.add(32 + PANEL_ROWS * i)));
            (scale(2 * s), scale(2 * s + 1))
        }
    }
    /// `(d * sc) * (q - 32)`, `q` = low nibble + 16 * high bits.
    #[inline(always)]
    unsafe fn weight<V: PanelLanes>(pb: *const u8, (lo, hi): (V, V), s: usize, k: usize) -> V {
        // SAFETY: as above.
        unsafe {
            let low = V::nibbles::<32>(pb.add(288 + 256 * s + 64 * (k / 8)), k % 8);
            let high = V::fields::<2>(pb.add(2336 + 128 * s + 64 * (k / 16)), k % 16);
            let q = V::fma(high, V::splat(16.0), low);
            V::mul(if k < 16 { lo } else { hi }, q)
        }
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
        let n = rows * cols / t.block_elems();
        let mut bytes = Vec::new();
        let scale = |b: usize| {
            half::f16::from_f32(match b % 5 {
                0 => 0.013,
                1 => -0.0071,
                2 => 3.0e-6,
                3 => 0.25,
                _ => -1.5,
            })
        };
        let pattern =
            |b: usize, len: usize| (0..len).map(move |i| ((b * 131 + i * 29 + 7) % 256) as u8);
        for b in 0..n {
            let d = scale(b);
            if t == GgmlType::Q4K || t == GgmlType::Q5K {
                bytes.extend_from_slice(&d.to_le_bytes());
                bytes.extend_from_slice(&scale(b + 2).to_le_bytes());
                bytes.extend(pattern(b, t.block_bytes() - 4));
                continue;
            }
            if t == GgmlType::Q6K {
                bytes.extend(pattern(b, 208));
                bytes.extend_from_slice(&d.to_le_bytes());
                continue;
            }
            bytes.extend_from_slice(&d.to_le_bytes());
            let mut head = 2;
            if t == GgmlType::Q4_1 || t == GgmlType::Q5_1 {
                let m = half::f16::from_f32(-0.11 + (b % 3) as f32 * 0.07);
                bytes.extend_from_slice(&m.to_le_bytes());
                head += 2;
            }
            // The codes, Q5_0's and Q5_1's high bits, IQ4_XS's scale bytes.
            bytes.extend(pattern(b, t.block_bytes() - head));
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

    /// `cols` for the 32-element types, the next multiple of 256 for the 256-element ones.
    fn cols_for(t: GgmlType, cols: usize) -> usize {
        cols.next_multiple_of(t.block_elems())
    }

    #[test]
    fn rows_dequantize_as_their_ggml_blocks() {
        for t in PANEL_TYPES {
            let (rows, cols) = (37, cols_for(t, 96));
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
        for t in PANEL_TYPES {
            let (rows, cols) = (20, cols_for(t, 64));
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
    /// ggml row bit for bit; `cols` = 160 ends on a half tile (k-quants: 3 super-blocks).
    #[test]
    fn matmul_equals_dot_q_f32_on_every_isa_and_split() {
        for t in PANEL_TYPES {
            let cols = if t.block_elems() == BLOCK { 160 } else { 768 };
            let rows = 75;
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
        assert!(panel_bytes(GgmlType::Q3K, 16, 256).is_none());
        assert!(PanelMatrix::new(GgmlType::Q8_0, 16, 32, &[0u8; 10]).is_err());
        let packed = pack(GgmlType::Q8_0, 16, 32, &blocks(GgmlType::Q8_0, 16, 32));
        let m = PanelMatrix::new(GgmlType::Q8_0, 16, 32, &packed).unwrap();
        let mut out = [0f32; 16];
        assert!(m.matmul(0..2, &[0f32; 32], &mut out, Isa::Scalar).is_err());
        assert!(m.dequantize_row(16, &mut [0f32; 32]).is_err());
    }
}
