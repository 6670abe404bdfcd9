//! RoiAlign (opsets 10 and 16): pools each region of interest of `X [N, C, H, W]` to
//! `[output_height, output_width]` bins by bilinear samples on a regular grid per bin,
//! averaged (`avg`) or maximized (`max`); the output is `[num_rois, C, oh, ow]`.
//!
//! Implements contract section `roialign`: coordinates and weights are f32 operations in the
//! order written there, an `avg` bin is the `canonical-sum` dot product of its taps divided by
//! the sample count, a `max` bin the maximum of the weighted taps. f16 / bf16 compute in f32
//! and round once at the store. There is no GPU kernel: on a GPU the step runs this CPU op.

use crate::registry::Registry;
use crate::staging::{f32_values, store_f32};
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail};
use rayon::prelude::*;
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Value, ValueType};
use samebits_kernels::canonical_fold;

pub fn register(r: &mut Registry) {
    r.register("", "RoiAlign", RoiAlign::build);
}

/// The most sampling points one bin may take (a bound against hostile region sizes).
const MAX_SAMPLES_PER_BIN: usize = 1 << 20;

#[derive(Debug)]
struct RoiAlign {
    half_pixel: bool,
    max: bool,
    out_h: usize,
    out_w: usize,
    sampling_ratio: usize,
    spatial_scale: f32,
}

impl RoiAlign {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let default_mode = if ctx.opset >= 16 {
            "half_pixel"
        } else {
            "output_half_pixel"
        };
        let half_pixel = match args
            .string_or("coordinate_transformation_mode", default_mode.into())?
            .as_str()
        {
            "half_pixel" => true,
            "output_half_pixel" => false,
            other => bail!(
                "RoiAlign: attribute \"coordinate_transformation_mode\" must be half_pixel or \
                 output_half_pixel, got {other:?}"
            ),
        };
        let max = match args.string_or("mode", "avg".into())?.as_str() {
            "avg" => false,
            "max" => true,
            other => bail!("RoiAlign: attribute \"mode\" must be avg or max, got {other:?}"),
        };
        let positive = |name: &str| -> Result<usize> {
            match args.int_or(name, 1)? {
                v if v >= 1 => Ok(v as usize),
                v => bail!("RoiAlign: attribute \"{name}\" must be >= 1, got {v}"),
            }
        };
        let sampling_ratio = match args.int_or("sampling_ratio", 0)? {
            v if v >= 0 => v as usize,
            v => bail!("RoiAlign: attribute \"sampling_ratio\" must be >= 0, got {v}"),
        };
        Ok(Box::new(RoiAlign {
            half_pixel,
            max,
            out_h: positive("output_height")?,
            out_w: positive("output_width")?,
            sampling_ratio,
            spatial_scale: args.float_or("spatial_scale", 1.0)?,
        }))
    }
}

/// One axis of a region: its start, bin size and samples per bin.
#[derive(Clone, Copy, Debug)]
struct RoiAxis {
    start: f32,
    bin: f32,
    grid: usize,
}

impl RoiAxis {
    /// Sample `i` of bin `p`: `(start + p * bin) + ((i + 0.5) * bin) / grid`.
    fn sample(&self, p: usize, i: usize) -> f32 {
        (self.start + p as f32 * self.bin) + ((i as f32 + 0.5) * self.bin) / self.grid as f32
    }
}

/// The two taps of coordinate `v` on an axis of length `len`: `(low, high, weight of low,
/// weight of high)`, or `None` outside `[-1, len]`.
fn axis_taps(v: f32, len: usize) -> Option<(usize, usize, f32, f32)> {
    let l = len as f32;
    if v.is_nan() || v < -1.0 || v > l || len == 0 {
        return None;
    }
    let v = v.max(0.0);
    let low = v.floor() as usize;
    let (low, high, v) = match low >= len - 1 {
        true => (len - 1, len - 1, (len - 1) as f32),
        false => (low, low + 1, v),
    };
    let frac = v - low as f32;
    Some((low, high, 1.0 - frac, frac))
}

impl Op for RoiAlign {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(super::output_of(super::input_dtype(inputs, 0)))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (x, rois) = (inputs.tensor(0)?, inputs.tensor(1)?);
        let xs = x.shape();
        if xs.len() != 4 {
            bail!("RoiAlign: input 0 (X) must be [N, C, H, W], got shape {xs:?}");
        }
        let (batch, channels, h, w) = (xs[0], xs[1], xs[2], xs[3]);
        let count = match rois.shape() {
            [r, 4] => *r,
            other => bail!("RoiAlign: input 1 (rois) must be [num_rois, 4], got shape {other:?}"),
        };
        let indices = inputs.ints(2, "batch_indices")?;
        if indices.len() != count {
            bail!(
                "RoiAlign: input 2 (batch_indices) has {} values for {count} rois",
                indices.len()
            );
        }
        if let Some(bad) = indices.iter().find(|&&b| b < 0 || b as usize >= batch) {
            bail!("RoiAlign: batch index {bad} is outside [0, {batch})");
        }
        let boxes = f32_values(rois, "RoiAlign input 1 (rois)")?;
        let values = f32_values(x, "RoiAlign input 0 (X)")?;
        let shape = vec![count, channels, self.out_h, self.out_w];
        check_tensor_size("RoiAlign output", &shape, DType::F32)?;
        let offset = if self.half_pixel { 0.5f32 } else { 0.0 };
        let mut regions = Vec::with_capacity(count);
        for r in 0..count {
            let b = &boxes[r * 4..][..4];
            let axis = |lo: f32, hi: f32, bins: usize| -> Result<RoiAxis> {
                let start = lo * self.spatial_scale - offset;
                let end = hi * self.spatial_scale - offset;
                let mut size = end - start;
                if !self.half_pixel {
                    size = size.max(1.0);
                }
                let bin = size / bins as f32;
                let grid = match self.sampling_ratio {
                    0 => {
                        let g = (size / bins as f32).ceil();
                        if g.is_nan() || g > MAX_SAMPLES_PER_BIN as f32 {
                            bail!(
                                "RoiAlign: roi {r} needs {g} samples per bin along an axis, \
                                 more than {MAX_SAMPLES_PER_BIN}"
                            );
                        }
                        g.max(0.0) as usize
                    }
                    s => s,
                };
                Ok(RoiAxis { start, bin, grid })
            };
            let (ay, ax) = (axis(b[1], b[3], self.out_h)?, axis(b[0], b[2], self.out_w)?);
            if ay.grid.saturating_mul(ax.grid) > MAX_SAMPLES_PER_BIN {
                bail!(
                    "RoiAlign: roi {r} needs {} x {} samples per bin, more than {MAX_SAMPLES_PER_BIN}",
                    ay.grid,
                    ax.grid
                );
            }
            regions.push((indices[r] as usize, ay, ax));
        }
        let plane = self.out_h * self.out_w;
        let mut out = vec![0.0f32; shape.iter().product()];
        if out.is_empty() {
            return Ok(vec![store_f32(x.dtype(), shape, out)?.into()]);
        }
        // One (roi, channel) output plane per task.
        out.par_chunks_mut(plane).enumerate().for_each(|(rc, dst)| {
            let (r, c) = (rc / channels, rc % channels);
            let (n, ay, ax) = regions[r];
            let input = &values[(n * channels + c) * h * w..][..h * w];
            let mut taps: Vec<(f32, f32)> = Vec::new();
            for (p, v) in dst.iter_mut().enumerate() {
                let (ph, pw) = (p / self.out_w, p % self.out_w);
                taps.clear();
                for iy in 0..ay.grid {
                    let y = axis_taps(ay.sample(ph, iy), h);
                    for ix in 0..ax.grid {
                        let x = axis_taps(ax.sample(pw, ix), w);
                        match (y, x) {
                            (Some((yl, yh, wyl, wyh)), Some((xl, xh, wxl, wxh))) => {
                                for (yi, wy) in [(yl, wyl), (yh, wyh)] {
                                    for (xi, wx) in [(xl, wxl), (xh, wxh)] {
                                        taps.push((wy * wx, input[yi * w + xi]));
                                    }
                                }
                            }
                            // Outside: four zero taps.
                            _ => taps.extend([(0.0, 0.0); 4]),
                        }
                    }
                }
                *v = self.pool(&taps, ay.grid * ax.grid);
            }
        });
        Ok(vec![store_f32(x.dtype(), shape, out)?.into()])
    }
}

impl RoiAlign {
    /// The bin value from its taps (weight, value), four per sample (contract: roialign).
    fn pool(&self, taps: &[(f32, f32)], samples: usize) -> f32 {
        if self.max {
            // Per sample the largest weighted tap, then the largest over samples; NaN wins.
            let mut best: Option<f32> = None;
            for t in taps {
                let v = t.0 * t.1;
                best = Some(match best {
                    None => v,
                    Some(b) if b.is_nan() => b,
                    Some(_) if v.is_nan() => v,
                    Some(b) if v > b => v,
                    Some(b) => b,
                });
            }
            return best.unwrap_or(0.0);
        }
        let sum = canonical_fold(
            taps.len(),
            0.0f32,
            |p, k| taps[k].0.mul_add(taps[k].1, p),
            |a, b| a + b,
        );
        sum / samples.max(1) as f32
    }
}
