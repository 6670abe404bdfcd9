//! N-d max and average pooling (1D/2D/3D) and global pooling.
//!
//! Implements contract section `pool` (docs/contract.md). Tensors are dense `[N, C, spatial...]`.
//! A window's taps are visited in row-major kernel order; only taps inside the input take part
//! (padding is never a term). Average = canonical sum (`canonical-sum`) of those taps divided by
//! the count; max = `canonical_max` of them (order free, so taken tap by tap over whole output
//! rows). Parallel over `(n, c)` planes.

use rayon::prelude::*;

use crate::Isa;
use crate::canonical::REDUCTION_TILE;
use crate::reduce::{ReduceKind, canonical_max, reduce_f32};
use crate::taps::{Taps, widen};

/// Pooling geometry. Spatial vectors have one entry per spatial axis (1 to 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolGeometry {
    pub batch: usize,
    pub channels: usize,
    pub in_spatial: Vec<usize>,
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pads_begin: Vec<usize>,
    pub pads_end: Vec<usize>,
    /// Round output sizes up instead of down (a window must still start inside the input or
    /// the leading padding).
    pub ceil_mode: bool,
}

/// What a window computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    /// `count_include_pad`: divide by the taps inside the padded input instead of only the
    /// taps inside the input.
    Average {
        count_include_pad: bool,
    },
}

impl PoolGeometry {
    /// Output size per axis: `(in + pad_begin + pad_end - dil * (k - 1) - 1) / s + 1`, rounded
    /// down, or up with `ceil_mode` minus one when the last window would start past
    /// `in + pad_begin`.
    pub fn out_spatial(&self) -> Vec<usize> {
        (0..self.in_spatial.len())
            .map(|d| {
                let padded = self.in_spatial[d] + self.pads_begin[d] + self.pads_end[d];
                let extent = self.dilations[d] * (self.kernel[d] - 1) + 1;
                assert!(
                    padded >= extent,
                    "pool: kernel extent exceeds padded input on axis {d}"
                );
                let s = self.strides[d];
                let mut out = if self.ceil_mode {
                    (padded - extent).div_ceil(s) + 1
                } else {
                    (padded - extent) / s + 1
                };
                if self.ceil_mode && (out - 1) * s >= self.in_spatial[d] + self.pads_begin[d] {
                    out -= 1;
                }
                out
            })
            .collect()
    }

    /// The spatial geometry widened to 3 axes (the one the CPU kernels, kernels/pool.cu and
    /// samebits-ops' index walks use); `pads_end` widens with [`widen`]`(.., 0)`.
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
        assert!((1..=3).contains(&dims), "pool: 1 to 3 spatial axes");
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
                "pool: every spatial vector needs {dims} entries"
            );
        }
        assert!(
            self.kernel
                .iter()
                .chain(&self.strides)
                .chain(&self.dilations)
                .all(|&v| v > 0)
        );
    }
}

/// Streaming form of `canonical-sum` for terms produced one at a time.
struct TiledSum {
    total: Option<f32>,
    partial: f32,
    in_tile: usize,
}

impl TiledSum {
    fn new() -> TiledSum {
        TiledSum {
            total: None,
            partial: 0.0,
            in_tile: 0,
        }
    }

    fn push(&mut self, x: f32) {
        self.partial += x;
        self.in_tile += 1;
        if self.in_tile == REDUCTION_TILE {
            self.close_tile();
        }
    }

    fn close_tile(&mut self) {
        self.total = Some(self.total.map_or(self.partial, |s| s + self.partial));
        self.partial = 0.0;
        self.in_tile = 0;
    }

    fn finish(mut self) -> f32 {
        if self.in_tile > 0 {
            self.close_tile();
        }
        self.total.unwrap_or(0.0)
    }
}

/// Pools `input` (`[N, C, in...]`) into `out` (`[N, C, out...]`) as contract section `pool`
/// writes.
pub fn pool_f32(geometry: &PoolGeometry, kind: PoolKind, input: &[f32], out: &mut [f32]) {
    geometry.check();
    let out_spatial = geometry.out_spatial();
    let planes = geometry.batch * geometry.channels;
    let (in_len, out_len) = (
        geometry.in_spatial.iter().product::<usize>(),
        out_spatial.iter().product::<usize>(),
    );
    assert_eq!(input.len(), planes * in_len, "pool_f32: input length");
    assert_eq!(out.len(), planes * out_len, "pool_f32: output length");
    if out_len == 0 {
        return;
    }
    let taps = geometry.taps();
    let Taps {
        input: input_dims,
        output: output_dims,
        kernel,
        strides,
        dilations,
        pads_begin,
    } = taps;
    let pads_end = widen(&geometry.pads_end, 0);
    let isa = Isa::active();
    // Planes by index, not `input.par_chunks(in_len)`: an empty input plane (padding only)
    // still has output windows, and chunks of 0 would panic.
    out.par_chunks_mut(out_len)
        .enumerate()
        .for_each(|(p, out_plane)| {
            let plane = &input[p * in_len..(p + 1) * in_len];
            let count_include_pad = match kind {
                PoolKind::Max => return max_plane(&taps, plane, out_plane, isa),
                PoolKind::Average { count_include_pad } => count_include_pad,
            };
            for (o, slot) in out_plane.iter_mut().enumerate() {
                let o_idx = [
                    o / (output_dims[1] * output_dims[2]),
                    o / output_dims[2] % output_dims[1],
                    o % output_dims[2],
                ];
                let mut sum = TiledSum::new();
                let (mut inside, mut inside_padded) = (0usize, 0usize);
                for kd in 0..kernel[0] {
                    for kh in 0..kernel[1] {
                        for kw in 0..kernel[2] {
                            let tap = [kd, kh, kw];
                            // Position in padded coordinates (0 = first padding element).
                            let padded_pos: [usize; 3] = std::array::from_fn(|a| {
                                o_idx[a] * strides[a] + tap[a] * dilations[a]
                            });
                            if (0..3).any(|a| {
                                padded_pos[a] >= pads_begin[a] + input_dims[a] + pads_end[a]
                            }) {
                                continue;
                            }
                            inside_padded += 1;
                            let mut pos = [0usize; 3];
                            let mut in_input = true;
                            for a in 0..3 {
                                match padded_pos[a].checked_sub(pads_begin[a]) {
                                    Some(p) if p < input_dims[a] => pos[a] = p,
                                    _ => in_input = false,
                                }
                            }
                            if !in_input {
                                continue;
                            }
                            let [d, h, w] = pos;
                            sum.push(plane[(d * input_dims[1] + h) * input_dims[2] + w]);
                            inside += 1;
                        }
                    }
                }
                let count = if count_include_pad {
                    inside_padded
                } else {
                    inside
                };
                *slot = if inside == 0 {
                    0.0
                } else {
                    sum.finish() / count as f32
                };
            }
        });
}

/// Max pooling of one plane. `canonical_max` is a maximum under one total order (NaN absorbing
/// and canonical, `-0.0 < +0.0`), so it does not depend on the order of the taps: each output
/// row takes its taps tap by tap over the whole row (a loop over contiguous outputs without
/// bounds tests), the same value as the windows' row-major order. `isa` picks the code path
/// (the same operations compiled for AVX2 where allowed), never the bits.
fn max_plane(taps: &Taps, plane: &[f32], out_plane: &mut [f32], isa: Isa) {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && Isa::Avx2.is_available() {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { max_plane_avx2(taps, plane, out_plane) };
    }
    let _ = isa;
    max_plane_rows(taps, plane, out_plane)
}

/// [`max_plane_rows`] compiled for AVX2 (8-lane compares and blends).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_plane_avx2(taps: &Taps, plane: &[f32], out_plane: &mut [f32]) {
    max_plane_rows(taps, plane, out_plane)
}

/// The body of [`max_plane`].
#[inline(always)]
fn max_plane_rows(taps: &Taps, plane: &[f32], out_plane: &mut [f32]) {
    let [_, out_h, out_w] = taps.output;
    let [_, in_h, in_w] = taps.input;
    let stride = taps.strides[2];
    // A strided pooling reads each input row deinterleaved into its `stride` phases (phase `p`,
    // from `starts[p]`, holds the row's elements p, p + stride, ...), so that every tap is a
    // contiguous run; the same elements as a strided walk, only their addresses differ.
    let starts: Vec<usize> = (0..=stride)
        .map(|p| {
            (0..p)
                .map(|q| in_w.saturating_sub(q).div_ceil(stride))
                .sum()
        })
        .collect();
    let mut phases = vec![0.0f32; if stride > 1 { in_w } else { 0 }];
    out_plane.fill(f32::NEG_INFINITY);
    for (r, out_row) in out_plane.chunks_exact_mut(out_w).enumerate() {
        let (od, oh) = (r / out_h, r % out_h);
        for kd in 0..taps.kernel[0] {
            let Some(d) = taps.input_index(0, od, kd) else {
                continue;
            };
            for kh in 0..taps.kernel[1] {
                let Some(h) = taps.input_index(1, oh, kh) else {
                    continue;
                };
                let in_row = &plane[(d * in_h + h) * in_w..][..in_w];
                if stride > 1 {
                    for (p, &start) in starts[..stride].iter().enumerate() {
                        let phase = in_row.get(p..).unwrap_or_default().iter().step_by(stride);
                        for (slot, &x) in phases[start..].iter_mut().zip(phase) {
                            *slot = x;
                        }
                    }
                }
                for kw in 0..taps.kernel[2] {
                    let outputs = taps.inner_outputs(kw);
                    if outputs.is_empty() {
                        continue;
                    }
                    // Input index of output o: o * stride + kw * dilation - pads_begin.
                    let first = (outputs.start * taps.strides[2] + kw * taps.dilations[2])
                        .saturating_sub(taps.pads_begin[2]);
                    let out = &mut out_row[outputs];
                    match stride {
                        1 => max_into(out, in_row[first..].iter()),
                        s => {
                            let phase = first % s;
                            let run = &phases[starts[phase] + first / s..starts[phase + 1]];
                            max_into(out, run.iter());
                        }
                    }
                }
            }
        }
    }
}

/// `y_i = canonical_max(y_i, x_i)` along `y` (contiguous taps vectorise).
#[inline(always)]
fn max_into<'a>(y: &mut [f32], taps: impl Iterator<Item = &'a f32>) {
    for (y, &x) in y.iter_mut().zip(taps) {
        *y = canonical_max(*y, x);
    }
}

/// Global pooling of `[planes, len]` into `[planes]`: max = `canonical_max` of the plane,
/// average = canonical sum of the plane divided by `len`.
pub fn global_pool_f32(kind: PoolKind, input: &[f32], planes: usize, len: usize, out: &mut [f32]) {
    match kind {
        PoolKind::Max => reduce_f32(ReduceKind::Max, input, planes, len, 1, out),
        PoolKind::Average { .. } => {
            reduce_f32(ReduceKind::Sum, input, planes, len, 1, out);
            out.iter_mut().for_each(|v| *v /= len as f32);
        }
    }
}
