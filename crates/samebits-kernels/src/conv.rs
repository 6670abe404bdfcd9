//! N-d convolution (1D/2D/3D) and transposed convolution: the direct kernel of
//! `conv/direct.rs`, or the canonical GEMM for 1x1 convolutions read in place.
//!
//! Implements contract sections `conv` and `conv-transpose` (docs/contract.md). Tensors are
//! dense NC(D)(H)W row-major; weights are `[M, C/g, k...]` (conv) or `[C, M/g, k...]`
//! (transposed conv). Convolutions take the direct kernel, which reads every term from a
//! zero-padded copy of the input (transposed: of the zero-upsampled input), except those with
//! more than `direct::MAX_GROUP_CHANNELS` input channels per group that are 1x1 with unit
//! stride and no padding (the GEMM reads their input planes in place, in column blocks, against
//! weights packed once per call) or whose output lines are too short for the direct kernel's
//! column blocks (the GEMM reduces im2col columns, rows ordered (input channel in group, kernel
//! taps row-major), `0.0` for taps in the padding). Transposed convolutions whose leading
//! padding exceeds the kernel extent write each block's taps as columns of a gather matrix,
//! rows ordered (input channel in group, kernel taps row-major), with `0.0` for taps no input
//! reaches, which the GEMM reduces in the canonical order. Transposed convolutions whose kernel
//! is a whole number of strides on every axis (stride = kernel, or overlapping windows such as
//! k = 4, s = 2) skip the terms of the taps no input can reach: per output phase, the GEMM of
//! that phase's filter taps with gather columns of the input, in shorter reduction tiles, and
//! the contract's full chain again for the outputs that come out `-0.0` (same bits, see
//! `conv_transpose_phases`). Images are independent, so an image's bits do not depend on the
//! batch size. An optional [`OutputMap`] transforms finished outputs (after the
//! bias) block by block while they are still in cache: the hook through which an operator
//! applies an elementwise epilogue without another pass over memory.

mod direct;

use std::cell::Cell;

use rayon::prelude::*;

use crate::canonical::{REDUCTION_TILE, canonical_fold};
use crate::gemm::{Epilogue, MatRef, OutLayout, PackedA, gemm_serial, gemm_serial_tiled};
use crate::isa::Isa;
use crate::taps::Taps;
use direct::DirectConv;

/// An in-place transformation of finished convolution outputs, applied once to every output
/// after `acc + bias` (contract: conv). `values` are the outputs of output channel `channel` at
/// flat indices `start .. start + values.len()` of the `[N, M, out...]` output; a call never
/// spans two channels or images. Calls come from any thread, in any order.
pub trait OutputMap: Sync {
    fn apply(&self, channel: usize, start: usize, values: &mut [f32]);
}

/// Geometry of a convolution. Spatial vectors have one entry per spatial axis (1 to 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvGeometry {
    pub batch: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    pub groups: usize,
    pub in_spatial: Vec<usize>,
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pads_begin: Vec<usize>,
    pub pads_end: Vec<usize>,
}

impl ConvGeometry {
    /// A geometry with unit strides and dilations and no padding.
    pub fn new(
        batch: usize,
        in_channels: usize,
        out_channels: usize,
        in_spatial: &[usize],
        kernel: &[usize],
    ) -> ConvGeometry {
        let dims = in_spatial.len();
        ConvGeometry {
            batch,
            in_channels,
            out_channels,
            groups: 1,
            in_spatial: in_spatial.to_vec(),
            kernel: kernel.to_vec(),
            strides: vec![1; dims],
            dilations: vec![1; dims],
            pads_begin: vec![0; dims],
            pads_end: vec![0; dims],
        }
    }

    /// Output spatial size per axis: `(in + pad_begin + pad_end - dil * (k - 1) - 1) / s + 1`.
    pub fn out_spatial(&self) -> Vec<usize> {
        (0..self.in_spatial.len())
            .map(|d| {
                let padded = self.in_spatial[d] + self.pads_begin[d] + self.pads_end[d];
                let extent = self.dilations[d] * (self.kernel[d] - 1) + 1;
                assert!(
                    padded >= extent,
                    "conv: kernel extent exceeds padded input on axis {d}"
                );
                (padded - extent) / self.strides[d] + 1
            })
            .collect()
    }

    /// Number of elements of the input, weight and output tensors.
    pub fn sizes(&self) -> (usize, usize, usize) {
        let input = self.batch * self.in_channels * self.in_spatial.iter().product::<usize>();
        let weight = self.out_channels
            * (self.in_channels / self.groups)
            * self.kernel.iter().product::<usize>();
        let output = self.batch * self.out_channels * self.out_spatial().iter().product::<usize>();
        (input, weight, output)
    }

    fn check(&self) {
        let dims = self.in_spatial.len();
        assert!((1..=3).contains(&dims), "conv: 1 to 3 spatial axes");
        for v in [
            &self.kernel,
            &self.strides,
            &self.dilations,
            &self.pads_begin,
            &self.pads_end,
        ] {
            assert_eq!(
                v.len(),
                dims,
                "conv: every spatial vector needs {dims} entries"
            );
        }
        assert!(
            self.kernel
                .iter()
                .chain(&self.strides)
                .chain(&self.dilations)
                .all(|&v| v > 0)
        );
        assert!(self.groups > 0 && self.in_channels.is_multiple_of(self.groups));
        assert!(
            self.out_channels.is_multiple_of(self.groups),
            "conv: groups must divide out_channels"
        );
    }

    /// The spatial geometry widened to 3 axes (the one the CPU kernels and kernels/conv.cu
    /// walk).
    pub fn taps(&self) -> Taps {
        Taps::new(
            &self.in_spatial,
            &self.out_spatial(),
            &self.kernel,
            &self.strides,
            &self.dilations,
            &self.pads_begin,
        )
    }
}

/// Bias broadcast over the output positions: element `(group, m, p)` is `bias[group * mg + m]`.
fn bias_epilogue(bias: Option<&[f32]>, out_per_group: usize) -> Epilogue<'_> {
    match bias {
        None => Epilogue::None,
        Some(bias) => Epilogue::Add(MatRef {
            data: bias,
            offset: 0,
            batch_stride: out_per_group,
            row_stride: 1,
            col_stride: 0,
        }),
    }
}

/// Convolution `out[n, m, o] = bias[m] + sum over (c, taps) of x * w` in the order of contract
/// section `conv`. `input` is `[N, C, in...]`, `weight` `[M, C/g, k...]`, `out` `[N, M, out...]`.
pub fn conv_f32(
    geometry: &ConvGeometry,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) {
    conv_f32_mapped(geometry, input, weight, None, bias, None, out);
}

/// A convolution weight (`[M, C/g, k...]`) rearranged once for the kernels of the ISA active
/// when it was packed, so that repeated calls skip that copy (packing only copies, contract:
/// conv). Calls on another ISA, or with another weight shape, pack for themselves.
pub struct PackedConvWeights {
    isa: Isa,
    /// `(out channels, groups, terms per output)` of the weight.
    shape: (usize, usize, usize),
    /// The direct kernel's register-tile layout, when groups have enough output channels.
    tiled: Option<Vec<f32>>,
    /// The GEMM's panels, for the convolutions the GEMM computes ([`gemm_columns`]).
    gemm: Option<PackedA>,
}

impl std::fmt::Debug for PackedConvWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedConvWeights")
            .field("isa", &self.isa)
            .field("shape", &self.shape)
            .field("tiled", &self.tiled.is_some())
            .field("gemm", &self.gemm.is_some())
            .finish()
    }
}

impl PackedConvWeights {
    /// Packs `weight` of a convolution with `geometry`'s channels, groups and kernel.
    pub fn new(geometry: &ConvGeometry, weight: &[f32]) -> PackedConvWeights {
        geometry.check();
        let groups = geometry.groups;
        let (cg, mg) = (
            geometry.in_channels / groups,
            geometry.out_channels / groups,
        );
        let terms = cg * geometry.kernel.iter().product::<usize>();
        assert_eq!(
            weight.len(),
            geometry.out_channels * terms,
            "PackedConvWeights: length"
        );
        let isa = Isa::active();
        let gemm = gemm_columns(geometry, &geometry.taps()).map(|_| {
            PackedA::for_active_isa(groups, mg, terms, &MatRef::row_major(weight, mg, terms))
        });
        let tiled = match gemm {
            Some(_) => None,
            None => direct::pack_tiled(isa, weight, groups, mg, terms),
        };
        PackedConvWeights {
            isa,
            shape: (geometry.out_channels, groups, terms),
            tiled,
            gemm,
        }
    }

    /// This packing, when it fits a call on `isa` with this weight shape.
    fn usable(&self, isa: Isa, shape: (usize, usize, usize)) -> Option<&PackedConvWeights> {
        (self.isa == isa && self.shape == shape).then_some(self)
    }
}

/// [`conv_f32`] with `weight` optionally also given packed (`packed`, made from the same
/// values by [`PackedConvWeights::new`]), then `map` applied to every finished output (see
/// [`OutputMap`]).
pub fn conv_f32_mapped(
    geometry: &ConvGeometry,
    input: &[f32],
    weight: &[f32],
    packed: Option<&PackedConvWeights>,
    bias: Option<&[f32]>,
    map: Option<&dyn OutputMap>,
    out: &mut [f32],
) {
    geometry.check();
    let (input_len, weight_len, output_len) = geometry.sizes();
    assert_eq!(input.len(), input_len, "conv_f32: input length");
    assert_eq!(weight.len(), weight_len, "conv_f32: weight length");
    assert_eq!(out.len(), output_len, "conv_f32: output length");
    if let Some(bias) = bias {
        assert_eq!(bias.len(), geometry.out_channels, "conv_f32: bias length");
    }
    let taps = geometry.taps();
    let groups = geometry.groups;
    let (cg, mg) = (
        geometry.in_channels / groups,
        geometry.out_channels / groups,
    );
    let packed = packed.and_then(|p| {
        p.usable(
            Isa::active(),
            (geometry.out_channels, groups, cg * taps.kernel_len()),
        )
    });
    let Some(columns) = gemm_columns(geometry, &taps) else {
        let prepacked = packed.and_then(|p| Some((p.isa, p.tiled.as_deref()?)));
        let conv = DirectConv {
            taps,
            real: taps.input,
            upsample: [1; 3],
            transposed: false,
            groups,
            cg,
            mg,
            input,
            weight,
            bias,
            map,
        };
        direct::conv_direct(&conv, prepacked, geometry.batch, out);
        return;
    };
    let (in_len, out_len) = (taps.input_len(), taps.output_len());
    let reduction = cg * taps.kernel_len();
    let weights = MatRef::row_major(weight, mg, reduction);
    let epilogue = bias_epilogue(bias, mg);
    let images = out
        .chunks_exact_mut(geometry.out_channels * out_len)
        .zip(input.chunks_exact(geometry.in_channels * in_len));
    let packed_here;
    let packed = match packed.and_then(|p| p.gemm.as_ref()) {
        Some(packed) => packed,
        None => {
            packed_here = PackedA::for_active_isa(groups, mg, reduction, &weights);
            &packed_here
        }
    };
    gemm_over_column_blocks(
        images,
        &taps,
        columns,
        packed,
        &epilogue,
        map,
        (groups, reduction, mg),
    );
}

/// Where the reduction rows of a column block come from.
#[derive(Clone, Copy)]
enum Columns {
    /// Written into thread-local scratch: `build(taps, planes, col0, cols, scratch)` (the
    /// im2col matrix of convolution, the gather matrix of transposed convolution).
    Built(fn(&Taps, &[f32], usize, usize, &mut [f32])),
    /// The input planes themselves (1x1 convolution, unit stride, no padding).
    InPlace,
}

/// The columns through which the GEMM computes a convolution, or `None` for the direct kernel.
/// Groups need more than `direct::MAX_GROUP_CHANNELS` input channels, or (ungrouped) a
/// reduction of at least a whole tile over output lines the direct kernel would mostly pad (a
/// one-channel signal framed by a 256-tap filter: Silero's STFT); then a 1x1 convolution with
/// unit stride and no padding reads its input in place, and one whose output lines the direct
/// kernel would mostly pad ([`direct::pads_lines_heavily`]: the 7- and 14-wide maps of a
/// ResNet's late stages) goes through im2col. Tiling only: every path computes each output as
/// contract section `conv` orders it.
fn gemm_columns(geometry: &ConvGeometry, taps: &Taps) -> Option<Columns> {
    let group_channels = geometry.in_channels / geometry.groups;
    let long_sparse_lines = geometry.groups == 1
        && group_channels * taps.kernel_len() >= REDUCTION_TILE
        && direct::pads_lines_heavily(taps);
    if group_channels <= direct::MAX_GROUP_CHANNELS && !long_sparse_lines {
        return None;
    }
    let pointwise = taps.kernel_len() == 1
        && taps.strides == [1; 3]
        && taps.pads_begin == [0; 3]
        && geometry.pads_end.iter().all(|&p| p == 0);
    if pointwise {
        Some(Columns::InPlace)
    } else if direct::pads_lines_heavily(taps) {
        Some(Columns::Built(im2col_columns))
    } else {
        None
    }
}

/// Writes columns `col0 .. col0 + cols` of the im2col matrix of convolution into `columns`
/// (`[rows, cols]` row-major): row `c * kernel_len + t` (input channel in group, kernel taps
/// row-major), column = output position (row-major), value `x[c, o * s + t * d - pad]` on every
/// axis, or `0.0` where that lies in the padding.
fn im2col_columns(taps: &Taps, planes: &[f32], col0: usize, cols: usize, columns: &mut [f32]) {
    let (kernel_len, in_len) = (taps.kernel_len(), taps.input_len());
    let [_, in_h, in_w] = taps.input;
    let [_, out_h, out_w] = taps.output;
    let (stride_w, pad_w) = (taps.strides[2], taps.pads_begin[2]);
    for (row, column_row) in columns.chunks_exact_mut(cols).enumerate() {
        let (c, t) = (row / kernel_len, row % kernel_len);
        let plane = &planes[c * in_len..(c + 1) * in_len];
        let tap = taps.tap(t);
        let inner = taps.inner_outputs(tap[2]);
        let shift = tap[2] * taps.dilations[2];
        let mut pos = col0;
        let mut dst = column_row;
        while !dst.is_empty() {
            let (line, ow0) = (pos / out_w, pos % out_w);
            let seg = (out_w - ow0).min(dst.len());
            let (now, rest) = std::mem::take(&mut dst).split_at_mut(seg);
            let rows = (
                taps.input_index(0, line / out_h, tap[0]),
                taps.input_index(1, line % out_h, tap[1]),
            );
            // Outputs `lo .. hi` of this segment read inside the input row; the rest pad.
            let lo = inner.start.clamp(ow0, ow0 + seg);
            let hi = inner.end.clamp(lo, ow0 + seg);
            match rows {
                (Some(d), Some(h)) if lo < hi => {
                    let src = &plane[(d * in_h + h) * in_w..][..in_w];
                    now[..lo - ow0].fill(0.0);
                    now[hi - ow0..].fill(0.0);
                    let first = lo * stride_w + shift - pad_w;
                    let inside = &mut now[lo - ow0..hi - ow0];
                    let reach = &src[first..=first + (inside.len() - 1) * stride_w];
                    match stride_w {
                        1 => inside.copy_from_slice(reach),
                        2 => direct::every_nth::<2>(reach, inside),
                        _ => {
                            for (v, &x) in inside.iter_mut().zip(reach.iter().step_by(stride_w)) {
                                *v = x;
                            }
                        }
                    }
                }
                _ => now.fill(0.0),
            }
            pos += seg;
            dst = rest;
        }
    }
}

/// One column-block GEMM pass, shared by convolution and transposed convolution: for each
/// image, the output columns are split into blocks of `im2col_block_columns`; `columns` gives
/// each block's reduction rows, the packed filters multiply them (contract: conv,
/// conv-transpose), and `map` transforms the finished block. Blocks run in parallel; each output
/// is one task's canonical chain, so the split does not change bits.
fn gemm_over_column_blocks<'a>(
    images: impl Iterator<Item = (&'a mut [f32], &'a [f32])>,
    taps: &Taps,
    columns: Columns,
    packed: &PackedA,
    epilogue: &Epilogue,
    map: Option<&dyn OutputMap>,
    (groups, reduction, mg): (usize, usize, usize),
) {
    let out_len = taps.output_len();
    let rows = groups * reduction;
    let images: Vec<_> = images.collect();
    if let Columns::Built(build) = columns
        && images.len() > 1
        && (1..IM2COL_BLOCK_STEP).contains(&out_len)
    {
        let parts = (packed, epilogue, map);
        return images_as_columns(images, taps, build, parts, (groups, reduction, mg));
    }
    let block = im2col_block_columns(rows, out_len);
    let image_len = groups * mg * out_len;
    // Fewer column blocks than threads (small output maps): the output channels are split too,
    // in whole microkernel panels (each part builds its block's columns itself).
    let col_blocks = out_len.div_ceil(block);
    let parts = rayon::current_num_threads()
        .div_ceil(col_blocks)
        .min(mg.div_ceil(packed.mr()));
    let part_rows = mg.div_ceil(parts).next_multiple_of(packed.mr());
    let parts = mg.div_ceil(part_rows);
    for (image, (out_image, planes)) in images.into_iter().enumerate() {
        let layout = OutLayout {
            ptr: out_image.as_mut_ptr(),
            batch_stride: mg * out_len,
            row_stride: out_len,
        };
        (0..col_blocks * parts).into_par_iter().for_each(|task| {
            let col0 = task / parts * block;
            let cols = block.min(out_len - col0);
            let row0 = task % parts * part_rows;
            let part = row0..(row0 + part_rows).min(mg);
            let out_block = layout.shifted_to_column(col0);
            match columns {
                Columns::Built(build) => {
                    let mut scratch = COLUMNS.take();
                    scratch.resize(rows * cols, 0.0);
                    build(taps, planes, col0, cols, &mut scratch);
                    let col_view = MatRef::row_major(&scratch, reduction, cols);
                    // SAFETY: task `task` is the only writer of output columns `col0 ..
                    // col0 + cols` of rows `part` of every group of this image, which
                    // `out_block` addresses inside `out_image`. The bias epilogue
                    // broadcasts over columns (column stride 0), so the local column index
                    // it gets is immaterial.
                    unsafe {
                        gemm_serial(packed, part.clone(), cols, &col_view, epilogue, out_block)
                    };
                    COLUMNS.set(scratch);
                }
                Columns::InPlace => {
                    let col_view = MatRef::row_major(planes, reduction, out_len).with_offset(col0);
                    // SAFETY: as above.
                    unsafe {
                        gemm_serial(packed, part.clone(), cols, &col_view, epilogue, out_block)
                    };
                }
            }
            let Some(map) = map else { return };
            for m in (0..groups).flat_map(|g| part.clone().map(move |r| g * mg + r)) {
                // SAFETY: as above: columns `col0 .. col0 + cols` of row `m` belong to this
                // task alone, and `gemm_serial` has returned.
                let values =
                    unsafe { std::slice::from_raw_parts_mut(out_block.ptr.add(m * out_len), cols) };
                map.apply(m, image * image_len + m * out_len + col0, values);
            }
        });
    }
}

/// [`gemm_over_column_blocks`] for output maps shorter than one column block of several
/// images: the images' columns side by side in one matrix and one GEMM over them (tiling only:
/// each output is still its own canonical chain, contract conv), then each image's outputs
/// moved to their place and mapped.
fn images_as_columns(
    images: Vec<(&mut [f32], &[f32])>,
    taps: &Taps,
    build: fn(&Taps, &[f32], usize, usize, &mut [f32]),
    (packed, epilogue, map): (&PackedA, &Epilogue, Option<&dyn OutputMap>),
    (groups, reduction, mg): (usize, usize, usize),
) {
    let out_len = taps.output_len();
    let rows = groups * reduction;
    let cols = images.len() * out_len;
    let mut matrix = vec![0.0f32; rows * cols];
    let mut one = vec![0.0f32; rows * out_len];
    for (n, (_, planes)) in images.iter().enumerate() {
        build(taps, planes, 0, out_len, &mut one);
        for (dst, src) in matrix.chunks_exact_mut(cols).zip(one.chunks_exact(out_len)) {
            dst[n * out_len..][..out_len].copy_from_slice(src);
        }
    }
    let mut result = vec![0.0f32; groups * mg * cols];
    let view = MatRef::row_major(&matrix, reduction, cols);
    let layout = OutLayout {
        ptr: result.as_mut_ptr(),
        batch_stride: mg * cols,
        row_stride: cols,
    };
    // SAFETY: `result` holds the `groups * mg` rows of `cols` outputs the call writes, and
    // nothing else reads or writes it meanwhile.
    unsafe { gemm_serial(packed, 0..mg, cols, &view, epilogue, layout) };
    let image_len = groups * mg * out_len;
    for (n, (out_image, _)) in images.into_iter().enumerate() {
        for (m, dst) in out_image.chunks_exact_mut(out_len).enumerate() {
            dst.copy_from_slice(&result[m * cols + n * out_len..][..out_len]);
            if let Some(map) = map {
                map.apply(m, n * image_len + m * out_len, dst);
            }
        }
    }
}

thread_local! {
    /// Per-thread im2col column block, reused across calls.
    static COLUMNS: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
    /// Per-thread products of a phase of a transposed convolution (`conv_transpose_phases`),
    /// reused across calls.
    static PRODUCTS: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Floats of im2col scratch per task that column blocks aim for.
const IM2COL_BLOCK_FLOATS: usize = 1 << 16;
/// Column blocks are whole multiples of this many output positions.
const IM2COL_BLOCK_STEP: usize = 64;

/// Output positions per im2col column block of `rows` rows: near `IM2COL_BLOCK_FLOATS`, and
/// small enough that every thread gets a few blocks (tiling only, never order).
fn im2col_block_columns(rows: usize, out_len: usize) -> usize {
    let by_budget = IM2COL_BLOCK_FLOATS / rows.max(1) / IM2COL_BLOCK_STEP * IM2COL_BLOCK_STEP;
    let by_threads = out_len
        .div_ceil(4 * rayon::current_num_threads())
        .next_multiple_of(IM2COL_BLOCK_STEP);
    by_budget.min(by_threads).max(IM2COL_BLOCK_STEP)
}

/// Geometry of a transposed convolution. Spatial vectors have one entry per spatial axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvTransposeGeometry {
    pub batch: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    pub groups: usize,
    pub in_spatial: Vec<usize>,
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pads_begin: Vec<usize>,
    pub pads_end: Vec<usize>,
    pub output_padding: Vec<usize>,
}

impl ConvTransposeGeometry {
    /// Output size per axis:
    /// `(in - 1) * s - pad_begin - pad_end + dil * (k - 1) + output_padding + 1`.
    pub fn out_spatial(&self) -> Vec<usize> {
        (0..self.in_spatial.len())
            .map(|d| {
                let full = (self.in_spatial[d] - 1) * self.strides[d]
                    + self.dilations[d] * (self.kernel[d] - 1)
                    + self.output_padding[d]
                    + 1;
                let pads = self.pads_begin[d] + self.pads_end[d];
                assert!(
                    full > pads,
                    "conv_transpose: padding removes the whole output"
                );
                full - pads
            })
            .collect()
    }

    /// Number of elements of the input, weight and output tensors.
    pub fn sizes(&self) -> (usize, usize, usize) {
        let input = self.batch * self.in_channels * self.in_spatial.iter().product::<usize>();
        let weight = self.in_channels
            * (self.out_channels / self.groups)
            * self.kernel.iter().product::<usize>();
        let output = self.batch * self.out_channels * self.out_spatial().iter().product::<usize>();
        (input, weight, output)
    }

    /// The spatial geometry widened to 3 axes, in the gather form kernels/conv.cu walks: input
    /// and output as they are, pads at the beginning.
    pub fn taps(&self) -> Taps {
        Taps::new(
            &self.in_spatial,
            &self.out_spatial(),
            &self.kernel,
            &self.strides,
            &self.dilations,
            &self.pads_begin,
        )
    }

    fn check(&self) {
        let dims = self.in_spatial.len();
        assert!(
            (1..=3).contains(&dims),
            "conv_transpose: 1 to 3 spatial axes"
        );
        for v in [
            &self.kernel,
            &self.strides,
            &self.dilations,
            &self.pads_begin,
            &self.pads_end,
            &self.output_padding,
        ] {
            assert_eq!(
                v.len(),
                dims,
                "conv_transpose: every spatial vector needs {dims} entries"
            );
        }
        assert!(self.in_spatial.iter().chain(&self.kernel).all(|&v| v > 0));
        assert!(self.strides.iter().chain(&self.dilations).all(|&v| v > 0));
        assert!(self.groups > 0 && self.in_channels.is_multiple_of(self.groups));
        assert!(self.out_channels.is_multiple_of(self.groups));
    }
}

/// Writes columns `col0 .. col0 + cols` of the gather matrix of transposed convolution into
/// `columns` (`[rows, cols]` row-major): row `c * kernel_len + t`, column = output position
/// (row-major), value `x[c, i]` where `o + pad_begin = i * s + t * d` on every axis, else `0.0`.
fn gather_columns(taps: &Taps, planes: &[f32], col0: usize, cols: usize, columns: &mut [f32]) {
    let (kernel_len, in_len) = (taps.kernel_len(), taps.input_len());
    let [_, in_h, in_w] = taps.input;
    let [_, out_h, out_w] = taps.output;
    let (stride_w, pad_w) = (taps.strides[2], taps.pads_begin[2]);
    for (row, column_row) in columns.chunks_exact_mut(cols).enumerate() {
        let (c, t) = (row / kernel_len, row % kernel_len);
        let plane = &planes[c * in_len..(c + 1) * in_len];
        let tap = taps.tap(t);
        // Input index reaching output `o` on `axis` through this tap, if any.
        let source = |axis: usize, o: usize| -> Option<usize> {
            let q = (o + taps.pads_begin[axis]).checked_sub(tap[axis] * taps.dilations[axis])?;
            let s = taps.strides[axis];
            (q.is_multiple_of(s) && q / s < taps.input[axis]).then_some(q / s)
        };
        // On the last axis, output `ow` reads input `(ow + pad - shift) / s` when that divides
        // exactly and lies in `0 .. in_w`: the outputs `ow_lo, ow_lo + s, ...` below `ow_hi`.
        let shift = tap[2] * taps.dilations[2];
        let ow_lo = shift.saturating_sub(pad_w);
        let ow_lo = ow_lo + (stride_w - (ow_lo + pad_w - shift) % stride_w) % stride_w;
        let ow_hi = ((in_w - 1) * stride_w + shift + 1)
            .saturating_sub(pad_w)
            .min(out_w);
        let mut pos = col0;
        let mut dst = column_row;
        while !dst.is_empty() {
            let (line, ow0) = (pos / out_w, pos % out_w);
            let seg = (out_w - ow0).min(dst.len());
            let (now, rest) = std::mem::take(&mut dst).split_at_mut(seg);
            now.fill(0.0);
            if let (Some(d), Some(h)) = (source(0, line / out_h), source(1, line % out_h)) {
                let src = &plane[(d * in_h + h) * in_w..][..in_w];
                // First reached output at or after `ow0`, then every `stride_w`-th one.
                let first = if ow0 <= ow_lo {
                    ow_lo
                } else {
                    ow0 + (stride_w - (ow0 - ow_lo) % stride_w) % stride_w
                };
                let end = ow_hi.min(ow0 + seg);
                if first < end {
                    let i0 = (first + pad_w - shift) / stride_w;
                    let reached = now[first - ow0..end - ow0].iter_mut().step_by(stride_w);
                    for (v, &x) in reached.zip(&src[i0..]) {
                        *v = x;
                    }
                }
            }
            pos += seg;
            dst = rest;
        }
    }
}

/// Transposed convolution in the order of contract section `conv-transpose`: `input` is
/// `[N, C, in...]`, `weight` `[C, M/g, k...]`, `out` `[N, M, out...]`. The gather matrix is
/// built in column blocks, one per parallel task, against filters packed once per call.
pub fn conv_transpose_f32(
    geometry: &ConvTransposeGeometry,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) {
    conv_transpose_f32_mapped(geometry, input, weight, bias, None, out);
}

/// [`conv_transpose_f32`], then `map` applied to every finished output (see [`OutputMap`]).
pub fn conv_transpose_f32_mapped(
    geometry: &ConvTransposeGeometry,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    map: Option<&dyn OutputMap>,
    out: &mut [f32],
) {
    geometry.check();
    let (input_len, weight_len, output_len) = geometry.sizes();
    assert_eq!(input.len(), input_len, "conv_transpose_f32: input length");
    assert_eq!(
        weight.len(),
        weight_len,
        "conv_transpose_f32: weight length"
    );
    assert_eq!(out.len(), output_len, "conv_transpose_f32: output length");
    if let Some(bias) = bias {
        assert_eq!(
            bias.len(),
            geometry.out_channels,
            "conv_transpose_f32: bias length"
        );
    }
    let out_spatial = geometry.out_spatial();
    let taps = geometry.taps();
    if phase_windows(geometry, weight) {
        return conv_transpose_phases(geometry, &taps, input, weight, bias, map, out);
    }
    let groups = geometry.groups;
    let (cg, mg) = (
        geometry.in_channels / groups,
        geometry.out_channels / groups,
    );
    let (kernel_len, in_len, out_len) = (taps.kernel_len(), taps.input_len(), taps.output_len());
    let reduction = cg * kernel_len;
    let every_tap: Vec<usize> = (0..kernel_len).collect();
    let filters = transposed_filter_rows(weight, (groups, cg, mg), kernel_len, &every_tap);
    // The direct kernel over the zero-upsampled input needs the box to start at or before the
    // first input: `dil * (k - 1) >= pad_begin` on every axis.
    let lead: Option<Vec<usize>> = (0..geometry.in_spatial.len())
        .map(|d| {
            (geometry.dilations[d] * (geometry.kernel[d] - 1)).checked_sub(geometry.pads_begin[d])
        })
        .collect();
    if let Some(lead) = lead {
        let dims = geometry.in_spatial.len();
        let upsampled: Vec<usize> = (0..dims)
            .map(|d| (geometry.in_spatial[d] - 1) * geometry.strides[d] + 1)
            .collect();
        let conv = DirectConv {
            taps: Taps::new(
                &upsampled,
                &out_spatial,
                &geometry.kernel,
                &vec![1; dims],
                &geometry.dilations,
                &lead,
            ),
            real: taps.input,
            upsample: taps.strides,
            transposed: true,
            groups,
            cg,
            mg,
            input,
            weight: &filters,
            bias,
            map,
        };
        direct::conv_direct(&conv, None, geometry.batch, out);
        return;
    }
    let filters_view = MatRef::row_major(&filters[..], mg, reduction);
    let packed = PackedA::for_active_isa(groups, mg, reduction, &filters_view);
    let epilogue = bias_epilogue(bias, mg);
    let images = out
        .chunks_exact_mut(geometry.out_channels * out_len)
        .zip(input.chunks_exact(geometry.in_channels * in_len));
    gemm_over_column_blocks(
        images,
        &taps,
        Columns::Built(gather_columns),
        &packed,
        &epilogue,
        map,
        (groups, reduction, mg),
    );
}

/// Whether [`conv_transpose_phases`] computes this transposed convolution: on every axis the
/// kernel is a whole number of strides and the dilation 1, the kernel's tap count divides the
/// reduction tile, and every weight is finite.
fn phase_windows(geometry: &ConvTransposeGeometry, weight: &[f32]) -> bool {
    (0..geometry.in_spatial.len()).all(|d| {
        geometry.kernel[d].is_multiple_of(geometry.strides[d]) && geometry.dilations[d] == 1
    }) && REDUCTION_TILE.is_multiple_of(geometry.kernel.iter().product())
        && weight.iter().all(|w| w.is_finite())
}

/// The outputs of one phase of a transposed convolution with `k = r * s` on every axis: those
/// with `(o + pad_begin) mod s = phi` per axis, reached by taps `t = phi + s * j`, `j < r`
/// only, from input `i = q - j` where `o + pad_begin = phi + s * q`.
struct Phase {
    /// First output of the phase per axis.
    first: [usize; 3],
    /// Outputs of the phase per axis (spaced `s` apart).
    count: [usize; 3],
    /// `q` of the first output per axis.
    base: [usize; 3],
    /// The phase's taps `(j per axis, flat tap index)`, in row-major tap order.
    taps: Vec<([usize; 3], usize)>,
}

impl Phase {
    /// Phase `phi` (flat, row-major over the strides), or `None` when it reaches no output.
    fn new(taps: &Taps, phi: usize) -> Option<Phase> {
        let [s, k, out, pad] = [taps.strides, taps.kernel, taps.output, taps.pads_begin];
        let phi = [phi / (s[1] * s[2]), phi / s[2] % s[1], phi % s[2]];
        let first: [usize; 3] = std::array::from_fn(|d| (phi[d] + s[d] - pad[d] % s[d]) % s[d]);
        if (0..3).any(|d| first[d] >= out[d]) {
            return None;
        }
        let r: [usize; 3] = std::array::from_fn(|d| k[d] / s[d]);
        let taps = (0..r.iter().product())
            .map(|j| {
                let j = [j / (r[1] * r[2]), j / r[2] % r[1], j % r[2]];
                let t: [usize; 3] = std::array::from_fn(|d| phi[d] + s[d] * j[d]);
                (j, (t[0] * k[1] + t[1]) * k[2] + t[2])
            })
            .collect();
        Some(Phase {
            first,
            count: std::array::from_fn(|d| (out[d] - first[d]).div_ceil(s[d])),
            base: std::array::from_fn(|d| (first[d] + pad[d] - phi[d]) / s[d]),
            taps,
        })
    }

    /// Outputs of the phase.
    fn len(&self) -> usize {
        self.count.iter().product()
    }

    /// Position per axis of the phase's output `u` (flat, row-major) on the phase's grid.
    fn grid(&self, u: usize) -> [usize; 3] {
        let n = self.count;
        [u / (n[1] * n[2]), u / n[2] % n[1], u % n[2]]
    }
}

/// Filter rows `[g, m, (c, t)]` for the taps `taps` (in that order) from the `[C, M/g, k...]`
/// weight of a transposed convolution of `(groups, C/g, M/g)` channels: a copy, no arithmetic.
fn transposed_filter_rows(
    weight: &[f32],
    (groups, cg, mg): (usize, usize, usize),
    kernel_len: usize,
    taps: &[usize],
) -> Vec<f32> {
    let reduction = cg * taps.len();
    let mut filters = vec![0.0f32; groups * mg * reduction];
    for (row, filter) in filters.chunks_exact_mut(reduction).enumerate() {
        let (g, m) = (row / mg, row % mg);
        for (c, dst) in filter.chunks_exact_mut(taps.len()).enumerate() {
            let src = &weight[((g * cg + c) * mg + m) * kernel_len..][..kernel_len];
            for (d, &t) in dst.iter_mut().zip(taps) {
                *d = src[t];
            }
        }
    }
    filters
}

/// Transposed convolution with `k = r * s` on every axis ([`phase_windows`]), with the bits of
/// contract section `conv-transpose` but without the terms of the taps no input can reach.
/// Output `o` of phase `phi` ([`Phase`]) is reached by its `R = prod(r)` taps `phi + s * j`
/// only; every other tap's term is `fma(0.0, w, p)`, which for a finite `w` leaves `p` as it
/// is, except that `-0.0` may become `+0.0`. The taps of a phase are in the contract's
/// (row-major) order, and a contract tile of 64 terms is `64 / L` whole channels of `L` taps,
/// so `64 / L * R` of the phase's terms. The chain of the phase's terms alone, in those tiles,
/// then equals the contract's chain or is `-0.0` where that is `+0.0`: by induction over the
/// terms, the tile folds and the bias add, since adding `+0.0` or `-0.0` to the same value gives
/// different bits only when that value is `-0.0`. So per image and phase, the outputs are the
/// GEMM of filter rows `m` (columns `(c, j)`: `w[g * C/g + c, m, phi + s * j]`) with gather
/// columns `x[c, q - j]` (`0.0` outside the input, the contract's own term) in reduction tiles
/// of `64 / L * R` (`gemm_serial_tiled`), then `+ bias[m]`, except those that come out `-0.0`,
/// which are computed again in the contract's order ([`Phases::contract_output`]); then `map`,
/// plane by plane. `k = s` (`R = 1`) is the case of windows that tile the output.
fn conv_transpose_phases(
    geometry: &ConvTransposeGeometry,
    taps: &Taps,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    map: Option<&dyn OutputMap>,
    out: &mut [f32],
) {
    let groups = geometry.groups;
    let (cg, mg) = (
        geometry.in_channels / groups,
        geometry.out_channels / groups,
    );
    let (kernel_len, out_len) = (taps.kernel_len(), taps.output_len());
    let phases: Vec<Phase> = (0..taps.strides.iter().product())
        .filter_map(|phi| Phase::new(taps, phi))
        .collect();
    let per_phase = kernel_len / taps.strides.iter().product::<usize>();
    let reduction = cg * per_phase;
    // Filter rows `[g, m, (c, j)]` of each phase, packed once per call.
    let packed: Vec<PackedA> = phases
        .iter()
        .map(|phase| {
            let taps: Vec<usize> = phase.taps.iter().map(|&(_, t)| t).collect();
            let filters = transposed_filter_rows(weight, (groups, cg, mg), kernel_len, &taps);
            PackedA::for_active_isa(
                groups,
                mg,
                reduction,
                &MatRef::row_major(&filters[..], mg, reduction),
            )
        })
        .collect();
    let widest = phases.iter().map(Phase::len).max().unwrap_or(0);
    let block = im2col_block_columns(groups * reduction, widest);
    let tasks: Vec<(usize, usize, usize)> = (0..geometry.batch)
        .flat_map(|image| {
            phases.iter().enumerate().flat_map(move |(p, phase)| {
                (0..phase.len())
                    .step_by(block)
                    .map(move |u0| (image, p, u0))
            })
        })
        .collect();
    let conv = Phases {
        taps,
        cg,
        mg,
        image_len: (
            geometry.in_channels * taps.input_len(),
            geometry.out_channels * out_len,
        ),
        input,
        weight,
        bias,
        out: out.as_mut_ptr(),
    };
    let tile = REDUCTION_TILE / kernel_len * per_phase;
    tasks.into_par_iter().for_each(|(image, p, u0)| {
        let phase = &phases[p];
        let cols = block.min(phase.len() - u0);
        let mut columns = COLUMNS.take();
        columns.resize(groups * reduction * cols, 0.0);
        conv.gather(image, phase, u0, cols, &mut columns);
        let mut products = PRODUCTS.take();
        products.resize(groups * mg * cols, 0.0);
        let layout = OutLayout {
            ptr: products.as_mut_ptr(),
            batch_stride: mg * cols,
            row_stride: cols,
        };
        // SAFETY: `products` holds the `groups * mg` rows of `cols` floats the call writes, and
        // belongs to this task alone.
        unsafe {
            gemm_serial_tiled(
                &packed[p],
                0..mg,
                cols,
                &MatRef::row_major(&columns[..], reduction, cols),
                &Epilogue::None,
                layout,
                tile,
            )
        };
        for (m, row) in products.chunks_exact(cols).enumerate() {
            // SAFETY: the outputs of channel `m` of this image that are the phase's outputs
            // `u0 .. u0 + cols` belong to this task alone.
            unsafe { conv.finish(image, m, phase, u0, row) };
        }
        COLUMNS.set(columns);
        PRODUCTS.set(products);
    });
    if let Some(map) = map {
        out.par_chunks_exact_mut(out_len)
            .enumerate()
            .for_each(|(plane, values)| {
                map.apply(plane % geometry.out_channels, plane * out_len, values)
            });
    }
}

/// What the tasks of [`conv_transpose_phases`] share.
struct Phases<'a> {
    taps: &'a Taps,
    cg: usize,
    mg: usize,
    /// Floats per image of the input and of the output.
    image_len: (usize, usize),
    input: &'a [f32],
    weight: &'a [f32],
    bias: Option<&'a [f32]>,
    /// The `[N, M, out...]` output, written by the tasks in disjoint pieces.
    out: *mut f32,
}

// SAFETY: `out` is written only through `Phases::finish`, whose callers own disjoint pieces.
unsafe impl Sync for Phases<'_> {}

impl Phases<'_> {
    /// Gather columns `u0 .. u0 + cols` of `phase` for `image` into `columns`
    /// (`[g, (c, j), cols]`): `x[g * C/g + c, q - j]`, `0.0` where that is outside the input.
    fn gather(&self, image: usize, phase: &Phase, u0: usize, cols: usize, columns: &mut [f32]) {
        let input = self.taps.input;
        let in_len = self.taps.input_len();
        let planes = &self.input[image * self.image_len.0..][..self.image_len.0];
        let rows = columns.chunks_exact_mut(cols);
        let channel_taps = planes
            .chunks_exact(in_len)
            .flat_map(|plane| phase.taps.iter().map(move |&(j, _)| (plane, j)));
        for (dst, (plane, j)) in rows.zip(channel_taps) {
            let mut u = u0;
            while u < u0 + cols {
                let at = phase.grid(u);
                let seg = (phase.count[2] - at[2]).min(u0 + cols - u);
                let out = &mut dst[u - u0..][..seg];
                // Input index per axis of grid position `a` on axis `d`, if inside.
                let index = |d: usize, a: usize| {
                    (phase.base[d] + a)
                        .checked_sub(j[d])
                        .filter(|&i| i < input[d])
                };
                match (index(0, at[0]), index(1, at[1])) {
                    (Some(i0), Some(i1)) => {
                        let line = &plane[(i0 * input[1] + i1) * input[2]..][..input[2]];
                        for (w, v) in out.iter_mut().enumerate() {
                            *v = index(2, at[2] + w).map_or(0.0, |i2| line[i2]);
                        }
                    }
                    _ => out.fill(0.0),
                }
                u += seg;
            }
        }
    }

    /// Writes the outputs of channel `m` of `image` that are `phase`'s outputs `u0 ..
    /// u0 + products.len()`, from their phase chains `products`: `acc + bias[m]`, or the
    /// contract's chain where that is `-0.0`.
    ///
    /// # Safety
    /// Those outputs are accessed by nothing else during the call.
    unsafe fn finish(&self, image: usize, m: usize, phase: &Phase, u0: usize, products: &[f32]) {
        let [_, out_h, out_w] = self.taps.output;
        let s = self.taps.strides;
        let plane = image * self.image_len.1 + m * self.taps.output_len();
        for (u, &acc) in (u0..).zip(products) {
            let at = phase.grid(u);
            let o: [usize; 3] = std::array::from_fn(|d| phase.first[d] + s[d] * at[d]);
            let o = (o[0] * out_h + o[1]) * out_w + o[2];
            let value = self.bias.map_or(acc, |b| acc + b[m]);
            let value = if value.to_bits() == (-0.0f32).to_bits() {
                self.contract_output(image, m, o)
            } else {
                value
            };
            // SAFETY: output `o` of channel `m` of `image` is the caller's.
            unsafe { *self.out.add(plane + o) = value };
        }
    }

    /// Output `o` (flat) of channel `m` of `image` in the order of contract section
    /// `conv-transpose`: every tap a term, `0.0` for those no input reaches.
    fn contract_output(&self, image: usize, m: usize, o: usize) -> f32 {
        let Taps {
            input,
            output,
            strides,
            pads_begin,
            ..
        } = *self.taps;
        let (kernel_len, in_len) = (self.taps.kernel_len(), self.taps.input_len());
        let o = [
            o / (output[1] * output[2]),
            o / output[2] % output[1],
            o % output[2],
        ];
        let (g, mm) = (m / self.mg, m % self.mg);
        let planes = &self.input[image * self.image_len.0..];
        let acc = canonical_fold(
            self.cg * kernel_len,
            0.0f32,
            |p, k| {
                let (c, tap) = (g * self.cg + k / kernel_len, k % kernel_len);
                let t = self.taps.tap(tap);
                let index = (0..3).try_fold(0, |index, d| {
                    let q = (o[d] + pads_begin[d]).checked_sub(t[d])?;
                    let i = q / strides[d];
                    (q.is_multiple_of(strides[d]) && i < input[d]).then_some(index * input[d] + i)
                });
                let x = index.map_or(0.0, |i| planes[c * in_len + i]);
                x.mul_add(self.weight[(c * self.mg + mm) * kernel_len + tap], p)
            },
            |s, p| s + p,
        );
        self.bias.map_or(acc, |b| acc + b[m])
    }
}
