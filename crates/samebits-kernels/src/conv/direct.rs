//! Direct convolution: every convolution except 1x1 read in place, and transposed convolution.
//!
//! Implements contract sections `conv` and `conv-transpose` (docs/contract.md) without an
//! im2col matrix. A task takes one image, a band of output lines (rows, or depth slices in 3D)
//! and a run of consecutive groups (one group unless there are many). For each group it copies
//! the input region the band reads into a zero-padded scratch box, one per input channel of the
//! group, with each box row split into `stride` phases (padded columns `r, r + s, r + 2s, ...`)
//! so that every tap of a line reads consecutive floats. Then, line by
//! line, SIMD lanes are consecutive output columns and each lane runs its output's own chain
//! over (input channel, kernel tap row-major): tiles of 64 terms from `+0.0`,
//! `p = fma(w, x, p)` with `x = 0.0` for a tap in the padding (executed, never skipped),
//! partials folded left to right, then `+ bias`. These are the bits of im2col + GEMM.
//!
//! With several output channels per group, a register tile holds `R` output channels times
//! two vectors of columns ([`panel_tile`], one generic body over the [`Lanes`] of each ISA,
//! shared with the quantized panels):
//! each box load serves `R` channels, weights are packed `[term][R]` once per call.
//!
//! A transposed convolution is the same computation on a box holding the zero-upsampled
//! input: input `i` sits at virtual position `i * s`, the box starts `dil * (k - 1) - pad`
//! before it, and the term of tap `t` reads offset `(k - 1 - t) * dil`, so output `o` reads
//! virtual position `o + pad - t * dil` as section `conv-transpose` writes (every tap a term,
//! zero where no input reaches). The box is thread-local scratch, bounded by band size. The
//! optional [`OutputMap`] transforms each channel's band of output lines once the band is
//! complete (one call per channel and band: the map's cost per call is paid once per band).

use std::borrow::Cow;
use std::cell::Cell;

use rayon::prelude::*;

use super::{OutputMap, Taps};
use crate::canonical::REDUCTION_TILE;
use crate::isa::Isa;
use crate::lanes::Lanes;

/// Most input channels per group that take the direct path when 1x1 reads in place instead.
pub(super) const MAX_GROUP_CHANNELS: usize = 4;
/// Tasks per thread that bands and runs of groups aim for.
const TASKS_PER_THREAD: usize = 4;
/// Floats of padded input per task that bands aim for.
const BOX_FLOATS: usize = 1 << 16;
/// Lanes of the main column blocks of a line (one output channel at a time).
const WIDE: usize = 64;
/// Lanes of the remaining column blocks; lines are computed `NARROW`-rounded.
const NARROW: usize = 16;
/// Columns of a register tile of several channels on the widest ISA; lines are computed
/// rounded up to it.
const TILE_COLUMNS: usize = 32;
/// Fewest output channels per group that take the register tiles of several channels.
const TILED_MIN_CHANNELS: usize = 4;

thread_local! {
    /// Per-thread padded input box, reused across calls.
    static BOX: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// The operands of one direct convolution: input `[N, C, real...]`, weights `[M, C/g, k...]`
/// (for transposed convolution, the filters rearranged to this layout), and the convolution
/// the kernel runs (`taps`: for a transposed convolution, stride 1 over the upsampled input,
/// taps read flipped).
pub(super) struct DirectConv<'a> {
    pub taps: Taps,
    /// Spatial size of the input tensor (widened to 3 axes).
    pub real: [usize; 3],
    /// Input `i` lies at position `i * upsample` of the input the taps read (transposed
    /// convolution); all ones otherwise.
    pub upsample: [usize; 3],
    /// A transposed convolution: tap `t` reads offset `k - 1 - t`.
    pub transposed: bool,
    pub groups: usize,
    /// Input channels per group.
    pub cg: usize,
    /// Output channels per group.
    pub mg: usize,
    pub input: &'a [f32],
    pub weight: &'a [f32],
    pub bias: Option<&'a [f32]>,
    pub map: Option<&'a dyn OutputMap>,
}

/// Box layout of one band: axes 0 and 1 (depth, height) start at padded position `start` and
/// span `len`; each row holds `stride_w` phases of `phase_len` floats.
struct BoxShape {
    start: [usize; 2],
    len: [usize; 2],
    phase_len: usize,
    row_len: usize,
}

impl BoxShape {
    fn floats(&self) -> usize {
        self.len[0] * self.len[1] * self.row_len
    }
}

impl DirectConv<'_> {
    /// Output axis (0 or 1) along which a plane is cut into bands.
    fn band_axis(&self) -> usize {
        if self.taps.output[0] > 1 { 0 } else { 1 }
    }

    /// Output columns computed per line (rounded up to whole column blocks of either path).
    fn padded_width(&self) -> usize {
        self.taps.output[2].next_multiple_of(TILE_COLUMNS)
    }

    /// Whether the output channels of a group go through register tiles of several channels.
    fn tiled(&self) -> bool {
        self.mg >= TILED_MIN_CHANNELS
    }

    /// The box read by output lines `lo .. hi` along the band axis.
    fn box_shape(&self, lo: usize, hi: usize) -> BoxShape {
        let t = &self.taps;
        let band_axis = self.band_axis();
        let mut start = [0; 2];
        let mut len = [0; 2];
        for axis in 0..2 {
            let (o_lo, o_hi) = if axis == band_axis {
                (lo, hi)
            } else {
                (0, t.output[axis])
            };
            start[axis] = o_lo * t.strides[axis];
            len[axis] =
                (o_hi - 1 - o_lo) * t.strides[axis] + (t.kernel[axis] - 1) * t.dilations[axis] + 1;
        }
        let phase_len = self.padded_width() + (t.kernel[2] - 1) * t.dilations[2] / t.strides[2];
        BoxShape {
            start,
            len,
            phase_len,
            row_len: t.strides[2] * phase_len,
        }
    }

    /// Output lines per band: enough bands to feed every thread, boxes near `BOX_FLOATS`.
    fn band_lines(&self, batch: usize) -> usize {
        let lines = self.taps.output[self.band_axis()];
        let wanted_bands =
            (TASKS_PER_THREAD * rayon::current_num_threads()).div_ceil(batch * self.groups);
        let per_line = self.cg * self.box_shape(0, 1).floats();
        let by_budget = (BOX_FLOATS / per_line.max(1)).max(1);
        lines.div_ceil(wanted_bands).min(by_budget).max(1)
    }

    /// Consecutive groups per task when there are `tasks` (image, band) pairs: one group while
    /// that makes few enough tasks, else as many as spread the groups over `TASKS_PER_THREAD`
    /// tasks per thread (depthwise layers: hundreds of groups of a few hundred outputs each,
    /// where a task per group costs more in scheduling than in arithmetic).
    fn groups_per_task(&self, tasks: usize) -> usize {
        let wanted = (TASKS_PER_THREAD * rayon::current_num_threads()).div_ceil(tasks.max(1));
        self.groups.div_ceil(wanted.max(1)).max(1)
    }

    /// The input position on `axis` at padded position `p`, if there is an input there.
    fn source(&self, axis: usize, p: usize) -> Option<usize> {
        let v = p.checked_sub(self.taps.pads_begin[axis])?;
        let up = self.upsample[axis];
        (v.is_multiple_of(up) && v / up < self.real[axis]).then_some(v / up)
    }

    /// Fills `bx` with the zero-padded input of `image`, group `g`, for `shape`.
    fn fill_box(&self, image: usize, g: usize, shape: &BoxShape, bx: &mut [f32]) {
        let t = &self.taps;
        let [_, in_h, in_w] = self.real;
        let in_len = self.real.iter().product::<usize>();
        let (stride_w, pad_w, up_w) = (t.strides[2], t.pads_begin[2], self.upsample[2]);
        let in_channels = self.groups * self.cg;
        for (c, channel_box) in bx.chunks_exact_mut(shape.floats()).enumerate() {
            let plane = &self.input[(image * in_channels + g * self.cg + c) * in_len..][..in_len];
            for (row, dst) in channel_box.chunks_exact_mut(shape.row_len).enumerate() {
                let (bd, bh) = (row / shape.len[1], row % shape.len[1]);
                let src = match (
                    self.source(0, shape.start[0] + bd),
                    self.source(1, shape.start[1] + bh),
                ) {
                    (Some(d), Some(h)) => &plane[(d * in_h + h) * in_w..][..in_w],
                    _ => {
                        dst.fill(0.0);
                        continue;
                    }
                };
                if up_w > 1 {
                    // Upsampled (stride 1 in the box): input `i` at column `i * up + pad`.
                    dst.fill(0.0);
                    for (i, &x) in src.iter().enumerate() {
                        if let Some(v) = dst.get_mut(i * up_w + pad_w) {
                            *v = x;
                        }
                    }
                    continue;
                }
                for (phase, dst) in dst.chunks_exact_mut(shape.phase_len).enumerate() {
                    // Padded column `q * s + phase` is input column `q * s + phase - pad`,
                    // inside the input for `q_lo <= q < q_hi`.
                    let q_hi = (in_w + pad_w)
                        .saturating_sub(phase)
                        .div_ceil(stride_w)
                        .min(shape.phase_len);
                    let q_lo = pad_w.saturating_sub(phase).div_ceil(stride_w).min(q_hi);
                    dst[..q_lo].fill(0.0);
                    dst[q_hi..].fill(0.0);
                    let inside = &mut dst[q_lo..q_hi];
                    if inside.is_empty() {
                        continue;
                    }
                    let first = q_lo * stride_w + phase - pad_w;
                    if stride_w == 1 {
                        inside.copy_from_slice(&src[first..first + inside.len()]);
                    } else {
                        let src = &src[first..=first + (inside.len() - 1) * stride_w];
                        match stride_w {
                            2 => every_nth::<2>(src, inside),
                            _ => {
                                for (v, step) in inside.iter_mut().zip(src.chunks(stride_w)) {
                                    *v = step[0];
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Offsets, relative to a line's base in the box, of each term (input channel, tap) in
    /// canonical order; transposed convolutions read tap `t` at `k - 1 - t`.
    fn term_offsets(&self, shape: &BoxShape) -> Vec<usize> {
        let t = &self.taps;
        let channel_len = shape.floats();
        let flip = self.transposed;
        let mut offsets = Vec::with_capacity(self.cg * t.kernel_len());
        for c in 0..self.cg {
            for tap in 0..t.kernel_len() {
                let mut at = t.tap(tap);
                if flip {
                    for (a, k) in at.iter_mut().zip(t.kernel) {
                        *a = k - 1 - *a;
                    }
                }
                let [kd, kh, kw] = at;
                let (dd, dh, dw) = (
                    kd * t.dilations[0],
                    kh * t.dilations[1],
                    kw * t.dilations[2],
                );
                offsets.push(
                    c * channel_len
                        + (dd * shape.len[1] + dh) * shape.row_len
                        + dw % t.strides[2] * shape.phase_len
                        + dw / t.strides[2],
                );
            }
        }
        offsets
    }

    /// Computes output lines `lo .. hi` (along the band axis) of image `image` for each
    /// `(g, outs)` of `groups`: `outs[mm]` is that band of output channel `g * mg + mm`. The box
    /// layout and term offsets, the same for every group, are worked out once.
    fn run_band(
        &self,
        job: &Job<'_>,
        image: usize,
        (lo, hi): (usize, usize),
        groups: Vec<(usize, Band<'_>)>,
    ) {
        let shape = self.box_shape(lo, hi);
        let offsets = self.term_offsets(&shape);
        let mut bx = BOX.take();
        bx.resize(self.cg * shape.floats(), 0.0);
        for (g, outs) in groups {
            self.fill_box(image, g, &shape, &mut bx);
            let band = BandJob {
                conv: self,
                shape: &shape,
                bx: &bx,
                offsets: &offsets,
                packed: job.packed.as_deref(),
                image,
                g,
                lo,
            };
            match job.isa {
                // SAFETY: `isa` comes from `Isa::active()`, which only returns available ISAs.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => unsafe { band_avx512(&band, outs) },
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => unsafe { band_avx2(&band, outs) },
                // SAFETY: as above.
                #[cfg(target_arch = "aarch64")]
                Isa::Neon => unsafe { band_neon(&band, outs) },
                _ => band.run::<[f32; 8], 4>(outs),
            }
        }
        BOX.set(bx);
    }
}

/// `dst[q] = src[q * S]` for every `q` of `dst` (`src` holds `(dst.len() - 1) * S + 1`
/// floats): a box row's phase (or an im2col row) gathered with a stride known at compile time,
/// which the compiler turns into vector shuffles.
#[inline(always)]
pub(super) fn every_nth<const S: usize>(src: &[f32], dst: &mut [f32]) {
    let whole = dst.len() - 1;
    let (body, last) = dst.split_at_mut(whole);
    for (v, step) in body.iter_mut().zip(src.chunks_exact(S)) {
        *v = step[0];
    }
    last[0] = src[whole * S];
}

/// Whether most of the columns this kernel computes per output line would be padding: lines
/// are computed in blocks of `TILE_COLUMNS`, so a 7-wide line is 22% useful work.
pub(super) fn pads_lines_heavily(taps: &Taps) -> bool {
    let width = taps.output[2];
    4 * width < 3 * width.next_multiple_of(TILE_COLUMNS)
}

/// Register tile height (output channels) of each ISA's tiled path.
fn tile_rows(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 8,
        Isa::Avx2 => 6,
        _ => 4,
    }
}

/// What every band of one call shares: the ISA and, for the tiled path, the weights packed
/// `[group][panel][term][rows]` (zero rows past the group's channels).
struct Job<'p> {
    isa: Isa,
    packed: Option<Cow<'p, [f32]>>,
}

/// Weights `[groups * mg, terms]` packed for the tiled path of `isa`, when a group has enough
/// output channels to take it (a copy, no arithmetic).
pub(super) fn pack_tiled(
    isa: Isa,
    weight: &[f32],
    groups: usize,
    mg: usize,
    terms: usize,
) -> Option<Vec<f32>> {
    if mg < TILED_MIN_CHANNELS {
        return None;
    }
    let rows = tile_rows(isa);
    let panels = mg.div_ceil(rows);
    let mut packed = vec![0.0f32; groups * panels * terms * rows];
    for (gp, panel) in packed.chunks_exact_mut(terms * rows).enumerate() {
        let (g, p) = (gp / panels, gp % panels);
        for r in 0..rows.min(mg - p * rows) {
            let m = g * mg + p * rows + r;
            for (j, &w) in weight[m * terms..][..terms].iter().enumerate() {
                panel[j * rows + r] = w;
            }
        }
    }
    Some(packed)
}

impl<'p> Job<'p> {
    /// `prepacked`: the tiled weights packed for `isa` ahead of time, if any.
    fn new(conv: &DirectConv<'_>, prepacked: Option<(Isa, &'p [f32])>) -> Job<'p> {
        let isa = Isa::active();
        let packed = match prepacked {
            Some((packed_isa, packed)) if packed_isa == isa && conv.tiled() => {
                Some(Cow::Borrowed(packed))
            }
            _ => {
                let terms = conv.cg * conv.taps.kernel_len();
                pack_tiled(isa, conv.weight, conv.groups, conv.mg, terms).map(Cow::Owned)
            }
        };
        Job { isa, packed }
    }
}

/// The output slices of one band, one per output channel of the group.
type Band<'o> = Vec<&'o mut [f32]>;

/// One task of [`conv_direct`]: image, band, and the bands of a run of groups (group index and
/// its channels' slices).
type Task<'o> = (usize, usize, Vec<(usize, Band<'o>)>);

/// One band ready to compute: its filled box and term offsets.
struct BandJob<'a> {
    conv: &'a DirectConv<'a>,
    shape: &'a BoxShape,
    bx: &'a [f32],
    offsets: &'a [usize],
    packed: Option<&'a [f32]>,
    image: usize,
    g: usize,
    lo: usize,
}

impl BandJob<'_> {
    /// Computes the band, `R` output channels per register tile of two `V` (tiled path), or
    /// one channel at a time.
    #[inline(always)]
    fn run<V: Lanes, const R: usize>(&self, mut outs: Band<'_>) {
        let conv = self.conv;
        let t = &conv.taps;
        let out_w = t.output[2];
        let terms = self.offsets.len();
        let lines = outs[0].len() / out_w;
        // Flat output index of this band's first element in channel 0 of image 0.
        let line_floats: usize = t.output[conv.band_axis() + 1..].iter().product();
        let (out_len, channels) = (t.output_len(), conv.groups * conv.mg);
        let band_start = self.lo * line_floats;
        let panels = conv.mg.div_ceil(R);
        for li in 0..lines {
            // Output line (od, oh) and the box row its first tap reads.
            let (od, oh) = if conv.band_axis() == 0 {
                (self.lo + li / t.output[1], li % t.output[1])
            } else {
                (0, self.lo + li)
            };
            let row_d = od * t.strides[0] - self.shape.start[0];
            let row_h = oh * t.strides[1] - self.shape.start[1];
            let base = (row_d * self.shape.len[1] + row_h) * self.shape.row_len;
            match self.packed {
                Some(packed) => {
                    for p in 0..panels {
                        let weights = &packed[(self.g * panels + p) * terms * R..][..terms * R];
                        let first = p * R;
                        let bias: [f32; R] = std::array::from_fn(|r| {
                            let m = (self.g * conv.mg + first + r).min(channels - 1);
                            conv.bias.map_or(0.0, |b| b[m])
                        });
                        let rows = R.min(conv.mg - first);
                        let mut ow = 0;
                        while ow < out_w {
                            // SAFETY: the box row holds `padded_width` columns past every
                            // term's offset (see `box_shape`), and `ow < out_w`.
                            let total = unsafe {
                                panel_tile::<V, R>(
                                    self.bx[base + ow..].as_ptr(),
                                    self.offsets,
                                    weights,
                                )
                            };
                            let width = (out_w - ow).min(2 * V::N);
                            for (r, halves) in total.iter().enumerate().take(rows) {
                                let mut values = [0.0f32; 2 * TILE_COLUMNS];
                                // SAFETY: `values` holds `2 * V::N <= 2 * TILE_COLUMNS` floats.
                                unsafe {
                                    halves[0].store(values.as_mut_ptr());
                                    halves[1].store(values.as_mut_ptr().add(V::N));
                                }
                                let line = &mut outs[first + r][li * out_w + ow..][..width];
                                for (o, &v) in line.iter_mut().zip(&values) {
                                    *o = if conv.bias.is_some() { v + bias[r] } else { v };
                                }
                            }
                            ow += 2 * V::N;
                        }
                    }
                }
                None => {
                    for (mm, out) in outs.iter_mut().enumerate() {
                        let m = self.g * conv.mg + mm;
                        let weights = &conv.weight[m * terms..][..terms];
                        let bias = conv.bias.map(|b| b[m]);
                        let line = &mut out[li * out_w..][..out_w];
                        let mut ow = 0;
                        while ow < out_w {
                            // The last block may reach past `out_w` (into the box's zero
                            // columns); those lanes are not stored.
                            let x = &self.bx[base + ow..];
                            if out_w - ow >= WIDE {
                                chain_lanes::<WIDE>(
                                    x,
                                    self.offsets,
                                    weights,
                                    bias,
                                    &mut line[ow..],
                                );
                                ow += WIDE;
                            } else {
                                chain_lanes::<NARROW>(
                                    x,
                                    self.offsets,
                                    weights,
                                    bias,
                                    &mut line[ow..],
                                );
                                ow += NARROW;
                            }
                        }
                    }
                }
            }
        }
        // Each channel's band at once (its lines are consecutive), while it is in cache.
        if let Some(map) = conv.map {
            for (mm, out) in outs.iter_mut().enumerate() {
                let m = self.g * conv.mg + mm;
                map.apply(m, (self.image * channels + m) * out_len + band_start, out);
            }
        }
    }
}

/// Up to `L` outputs (`out.len()` of them, at most `L` stored) whose term `j` for lane `l` is
/// `x[offsets[j] + l] * weights[j]`, each the canonical chain over `j` (contract:
/// canonical-sum), then `+ bias` when there is one. `offsets` is not empty.
#[inline(always)]
fn chain_lanes<const L: usize>(
    x: &[f32],
    offsets: &[usize],
    weights: &[f32],
    bias: Option<f32>,
    out: &mut [f32],
) {
    let mut tiles = offsets
        .chunks(REDUCTION_TILE)
        .zip(weights.chunks(REDUCTION_TILE));
    let (offsets0, weights0) = tiles.next().expect("at least one term");
    let mut total = tile_chain::<L>(x, offsets0, weights0);
    for (offsets, weights) in tiles {
        let partial = tile_chain::<L>(x, offsets, weights);
        for (s, p) in total.iter_mut().zip(partial) {
            *s += p;
        }
    }
    if let Some(bias) = bias {
        for s in &mut total {
            *s += bias;
        }
    }
    match out.get_mut(..L) {
        Some(full) => full.copy_from_slice(&total),
        None => {
            for (o, s) in out.iter_mut().zip(total) {
                *o = s;
            }
        }
    }
}

/// One reduction tile's partials: per lane `p = fma(w, x, p)` from `+0.0` over the tile's terms.
#[inline(always)]
fn tile_chain<const L: usize>(x: &[f32], offsets: &[usize], weights: &[f32]) -> [f32; L] {
    let mut partial = [0.0f32; L];
    for (&offset, &w) in offsets.iter().zip(weights) {
        let xs: &[f32; L] = x[offset..offset + L].try_into().expect("L lanes");
        for (p, &xv) in partial.iter_mut().zip(xs) {
            *p = w.mul_add(xv, *p);
        }
    }
    partial
}

/// `R` output channels by `2 * V::N` columns: lane `l` of channel `r` is the canonical chain
/// (contract: canonical-sum) over terms `j` of `weights[j * R + r] * x[offsets[j] + l]`: tiles
/// of 64 terms from `+0.0` with `fma`, partials folded left to right.
///
/// # Safety
/// `V`'s ISA is available, and `x.add(offsets[j])` points to `2 * V::N` readable floats for
/// every `j`; `weights` holds `offsets.len() * R` floats.
#[inline(always)]
unsafe fn panel_tile<V: Lanes, const R: usize>(
    x: *const f32,
    offsets: &[usize],
    weights: &[f32],
) -> [[V; 2]; R] {
    // SAFETY: the caller guarantees the ISA and the extents.
    unsafe {
        let mut total = [[V::zero(); 2]; R];
        for (tile, (offsets, weights)) in offsets
            .chunks(REDUCTION_TILE)
            .zip(weights.chunks(REDUCTION_TILE * R))
            .enumerate()
        {
            let mut acc = [[V::zero(); 2]; R];
            for (&offset, w) in offsets.iter().zip(weights.chunks_exact(R)) {
                let x0 = V::load(x.add(offset));
                let x1 = V::load(x.add(offset + V::N));
                for (acc_r, &w_r) in acc.iter_mut().zip(w) {
                    let w_r = V::splat(w_r);
                    acc_r[0] = V::fma(w_r, x0, acc_r[0]);
                    acc_r[1] = V::fma(w_r, x1, acc_r[1]);
                }
            }
            if tile == 0 {
                total = acc;
            } else {
                for (total_r, acc_r) in total.iter_mut().zip(&acc) {
                    total_r[0] = V::add(total_r[0], acc_r[0]);
                    total_r[1] = V::add(total_r[1], acc_r[1]);
                }
            }
        }
        total
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
/// # Safety
/// The CPU supports AVX-512F.
unsafe fn band_avx512(job: &BandJob<'_>, outs: Band<'_>) {
    job.run::<std::arch::x86_64::__m512, 8>(outs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
/// # Safety
/// The CPU supports AVX2 and FMA.
unsafe fn band_avx2(job: &BandJob<'_>, outs: Band<'_>) {
    job.run::<std::arch::x86_64::__m256, 6>(outs)
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
/// # Safety
/// The CPU supports NEON.
unsafe fn band_neon(job: &BandJob<'_>, outs: Band<'_>) {
    job.run::<[f32; 8], 4>(outs)
}

/// Direct convolution of `batch` images into `out` (`[N, M, out...]`), in parallel over
/// (image, group, band); `prepacked` as [`pack_tiled`] made it for that ISA.
pub(super) fn conv_direct(
    conv: &DirectConv<'_>,
    prepacked: Option<(Isa, &[f32])>,
    batch: usize,
    out: &mut [f32],
) {
    let job = Job::new(conv, prepacked);
    let t = &conv.taps;
    let out_len = t.output_len();
    let band_axis = conv.band_axis();
    let line_floats: usize = t.output[band_axis + 1..].iter().product();
    let band_lines = conv.band_lines(batch);
    let band_floats = band_lines * line_floats;
    let bands = t.output[band_axis].div_ceil(band_lines);
    let run = conv.groups_per_task(batch * bands);
    // Task (image, band, run of groups) owns that band of each output plane of those groups.
    let mut tasks: Vec<Task<'_>> = Vec::new();
    for (image, out_image) in out
        .chunks_exact_mut(conv.groups * conv.mg * out_len)
        .enumerate()
    {
        let first_task = tasks.len();
        for (g, out_group) in out_image.chunks_exact_mut(conv.mg * out_len).enumerate() {
            let mut per_band: Vec<Band<'_>> = (0..bands).map(|_| Vec::new()).collect();
            for plane in out_group.chunks_exact_mut(out_len) {
                for (band, chunk) in plane.chunks_mut(band_floats).enumerate() {
                    per_band[band].push(chunk);
                }
            }
            if g % run == 0 {
                tasks.extend((0..bands).map(|band| (image, band, Vec::with_capacity(run))));
            }
            let row = first_task + g / run * bands;
            for (band, outs) in per_band.into_iter().enumerate() {
                tasks[row + band].2.push((g, outs));
            }
        }
    }
    tasks.into_par_iter().for_each(|(image, band, groups)| {
        let lo = band * band_lines;
        let hi = (lo + band_lines).min(t.output[band_axis]);
        conv.run_band(&job, image, (lo, hi), groups);
    });
}
