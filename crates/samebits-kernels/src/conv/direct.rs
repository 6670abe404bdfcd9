//! Direct convolution for groups with few input channels (depthwise 3x3 / 5x5 above all).
//!
//! Implements contract section `conv` (docs/contract.md) without an im2col matrix. A task takes
//! one image, one group and a band of output lines (rows, or depth slices in 3D). It copies the
//! input region the band reads into a zero-padded scratch box, one per input channel of the
//! group, with each box row split into `stride` phases (padded columns `r, r + s, r + 2s, ...`)
//! so that every tap of a line reads consecutive floats. Then, line by line, SIMD lanes are
//! consecutive output columns and each lane runs its output's own chain over (input channel,
//! kernel tap row-major): tiles of 64 terms from `+0.0`, `p = fma(x, w, p)` with `x = 0.0` for a
//! tap in the padding (executed, never skipped), partials folded left to right, then `+ bias`.
//! These are the bits of im2col + GEMM. The box is thread-local scratch, bounded by band size.
//! The optional [`OutputMap`] transforms each output line once it is complete.

use std::cell::Cell;

use rayon::prelude::*;

use super::{OutputMap, Taps};
use crate::canonical::REDUCTION_TILE;
use crate::isa::Isa;

/// Most input channels per group that take the direct path (depthwise has one).
pub(super) const MAX_GROUP_CHANNELS: usize = 4;
/// Floats of padded input per task that bands aim for.
const BOX_FLOATS: usize = 1 << 16;
/// Lanes of the main column blocks of a line.
const WIDE: usize = 64;
/// Lanes of the remaining column blocks; lines are computed `NARROW`-rounded.
const NARROW: usize = 16;

thread_local! {
    /// Per-thread padded input box, reused across calls.
    static BOX: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// The operands of one direct convolution (input `[N, C, in...]`, weight `[M, C/g, k...]`).
pub(super) struct DirectConv<'a> {
    pub taps: &'a Taps,
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

    /// Output columns computed per line (rounded up to whole `NARROW` blocks).
    fn padded_width(&self) -> usize {
        self.taps.output[2].next_multiple_of(NARROW)
    }

    /// The box read by output lines `lo .. hi` along the band axis.
    fn box_shape(&self, lo: usize, hi: usize) -> BoxShape {
        let t = self.taps;
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
        let wanted_bands = (4 * rayon::current_num_threads()).div_ceil(batch * self.groups);
        let per_line = self.cg * self.box_shape(0, 1).floats();
        let by_budget = (BOX_FLOATS / per_line.max(1)).max(1);
        lines.div_ceil(wanted_bands).min(by_budget).max(1)
    }

    /// Fills `bx` with the zero-padded input of `image`, group `g`, for `shape`.
    fn fill_box(&self, image: usize, g: usize, shape: &BoxShape, bx: &mut [f32]) {
        let t = self.taps;
        let in_len = t.input_len();
        let [_, in_h, in_w] = t.input;
        let (stride_w, pad_w) = (t.strides[2], t.pads_begin[2]);
        let in_channels = self.groups * self.cg;
        for (c, channel_box) in bx.chunks_exact_mut(shape.floats()).enumerate() {
            let plane = &self.input[(image * in_channels + g * self.cg + c) * in_len..][..in_len];
            for (row, dst) in channel_box.chunks_exact_mut(shape.row_len).enumerate() {
                let (bd, bh) = (row / shape.len[1], row % shape.len[1]);
                let d = (shape.start[0] + bd).checked_sub(t.pads_begin[0]);
                let h = (shape.start[1] + bh).checked_sub(t.pads_begin[1]);
                let src = match (d, h) {
                    (Some(d), Some(h)) if d < t.input[0] && h < in_h => {
                        &plane[(d * in_h + h) * in_w..][..in_w]
                    }
                    _ => {
                        dst.fill(0.0);
                        continue;
                    }
                };
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
                        for (q, v) in inside.iter_mut().enumerate() {
                            *v = src[q * stride_w];
                        }
                    }
                }
            }
        }
    }

    /// Offsets, relative to a line's base in the box, of each term (input channel, tap) in
    /// canonical order.
    fn term_offsets(&self, shape: &BoxShape) -> Vec<usize> {
        let t = self.taps;
        let channel_len = shape.floats();
        let mut offsets = Vec::with_capacity(self.cg * t.kernel_len());
        for c in 0..self.cg {
            for tap in 0..t.kernel_len() {
                let [kd, kh, kw] = t.tap(tap);
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

    /// Computes output lines `lo .. hi` (along the band axis) of image `image`, group `g`;
    /// `outs[mm]` is that band of output channel `g * mg + mm`.
    fn run_band(&self, isa: Isa, image: usize, g: usize, lo: usize, hi: usize, outs: Band<'_>) {
        let shape = self.box_shape(lo, hi);
        let mut bx = BOX.take();
        bx.resize(self.cg * shape.floats(), 0.0);
        self.fill_box(image, g, &shape, &mut bx);
        let offsets = self.term_offsets(&shape);
        let job = BandJob {
            conv: self,
            shape: &shape,
            bx: &bx,
            offsets: &offsets,
            image,
            g,
            lo,
        };
        match isa {
            // SAFETY: `isa` comes from `Isa::active()`, which only returns available ISAs.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { band_avx512(&job, outs) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { band_avx2(&job, outs) },
            // SAFETY: as above.
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => unsafe { band_neon(&job, outs) },
            _ => job.run(outs),
        }
        BOX.set(bx);
    }
}

/// The output slices of one band, one per output channel of the group.
type Band<'o> = Vec<&'o mut [f32]>;

/// One band ready to compute: its filled box and term offsets.
struct BandJob<'a> {
    conv: &'a DirectConv<'a>,
    shape: &'a BoxShape,
    bx: &'a [f32],
    offsets: &'a [usize],
    image: usize,
    g: usize,
    lo: usize,
}

impl BandJob<'_> {
    #[inline(always)]
    fn run(&self, mut outs: Band<'_>) {
        let conv = self.conv;
        let t = conv.taps;
        let out_w = t.output[2];
        let terms = self.offsets.len();
        let lines = outs[0].len() / out_w;
        // Flat output index of this band's first element in channel 0 of image 0.
        let line_floats: usize = t.output[conv.band_axis() + 1..].iter().product();
        let (out_len, channels) = (t.output_len(), conv.groups * conv.mg);
        let band_start = self.lo * line_floats;
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
            for (mm, out) in outs.iter_mut().enumerate() {
                let m = self.g * conv.mg + mm;
                let weights = &conv.weight[m * terms..][..terms];
                let bias = conv.bias.map(|b| b[m]);
                let line = &mut out[li * out_w..][..out_w];
                let mut ow = 0;
                while ow < out_w {
                    // The last block may reach past `out_w` (into the box's zero columns);
                    // those lanes are not stored.
                    let x = &self.bx[base + ow..];
                    if out_w - ow >= WIDE {
                        chain_lanes::<WIDE>(x, self.offsets, weights, bias, &mut line[ow..]);
                        ow += WIDE;
                    } else {
                        chain_lanes::<NARROW>(x, self.offsets, weights, bias, &mut line[ow..]);
                        ow += NARROW;
                    }
                }
                if let Some(map) = conv.map {
                    let start = (self.image * channels + m) * out_len + band_start + li * out_w;
                    map.apply(m, start, line);
                }
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

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
/// # Safety
/// The CPU supports AVX-512F.
unsafe fn band_avx512(job: &BandJob<'_>, outs: Band<'_>) {
    job.run(outs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
/// # Safety
/// The CPU supports AVX2 and FMA.
unsafe fn band_avx2(job: &BandJob<'_>, outs: Band<'_>) {
    job.run(outs)
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
/// # Safety
/// The CPU supports NEON.
unsafe fn band_neon(job: &BandJob<'_>, outs: Band<'_>) {
    job.run(outs)
}

/// Direct convolution of `batch` images into `out` (`[N, M, out...]`), in parallel over
/// (image, group, band).
pub(super) fn conv_direct(conv: &DirectConv<'_>, batch: usize, out: &mut [f32]) {
    let isa = Isa::active();
    let t = conv.taps;
    let out_len = t.output_len();
    let band_axis = conv.band_axis();
    let line_floats: usize = t.output[band_axis + 1..].iter().product();
    let band_lines = conv.band_lines(batch);
    let band_floats = band_lines * line_floats;
    let bands = t.output[band_axis].div_ceil(band_lines);
    // Task (image, group, band) owns that band of each of the group's output planes.
    let mut tasks: Vec<(usize, usize, usize, Band<'_>)> = Vec::new();
    for (image, out_image) in out
        .chunks_exact_mut(conv.groups * conv.mg * out_len)
        .enumerate()
    {
        for (g, out_group) in out_image.chunks_exact_mut(conv.mg * out_len).enumerate() {
            let mut per_band: Vec<Band<'_>> = (0..bands).map(|_| Vec::new()).collect();
            for plane in out_group.chunks_exact_mut(out_len) {
                for (band, chunk) in plane.chunks_mut(band_floats).enumerate() {
                    per_band[band].push(chunk);
                }
            }
            for (band, outs) in per_band.into_iter().enumerate() {
                tasks.push((image, g, band, outs));
            }
        }
    }
    tasks.into_par_iter().for_each(|(image, g, band, outs)| {
        let lo = band * band_lines;
        let hi = (lo + band_lines).min(t.output[band_axis]);
        conv.run_band(isa, image, g, lo, hi, outs);
    });
}
