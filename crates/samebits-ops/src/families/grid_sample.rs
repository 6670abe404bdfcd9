//! GridSample (opsets 16 and 20): samples `X [N, C, D1..Dr]` at the points of
//! `grid [N, O1..Ok, r]` (normalized coordinates in `[-1, 1]`, the last axis's components in
//! x, y, z order: the innermost spatial axis first) with nearest, (multi)linear or (multi)cubic
//! interpolation and zeros, border or reflection padding; the output is `[N, C, O1..Ok]`.
//!
//! Implements contract section `gridsample`: coordinates, rounding, reflection and taps are f32
//! operations in the order written there, the cubic weights are Resize's (`A = -0.75`), and an
//! output is the `canonical-sum` dot product of its taps (weights the products of the axes'
//! weights, outermost axis first; taps row-major, outermost axis slowest; `p = fma(w, v, p)`
//! from `+0.0`). f16 / bf16 compute in f32 and round once at the store. There is no GPU kernel
//! yet: on a GPU the step runs this CPU op.

use super::resize::cubic_weight;
use crate::registry::Registry;
use crate::staging::{f32_values, store_f32};
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail};
use rayon::prelude::*;
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Value, ValueType};

pub fn register(r: &mut Registry) {
    r.register("", "GridSample", grid_sample);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Interpolation {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// The cubic convolution constant of GridSample (ONNX fixes it).
const CUBIC_A: f32 = -0.75;

#[derive(Debug)]
struct GridSample {
    interpolation: Interpolation,
    padding: Padding,
    align_corners: bool,
}

fn grid_sample(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let interpolation = match args.string_or("mode", "linear".into())?.as_str() {
        "nearest" => Interpolation::Nearest,
        "linear" | "bilinear" => Interpolation::Linear,
        "cubic" | "bicubic" => Interpolation::Cubic,
        other => bail!(
            "GridSample: attribute \"mode\" must be nearest, linear or cubic (bilinear, bicubic), \
             got {other:?}"
        ),
    };
    let padding = match args.string_or("padding_mode", "zeros".into())?.as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        other => bail!(
            "GridSample: attribute \"padding_mode\" must be zeros, border or reflection, got \
             {other:?}"
        ),
    };
    Ok(Box::new(GridSample {
        interpolation,
        padding,
        align_corners: args.int_or("align_corners", 0)? != 0,
    }))
}

/// One spatial axis of X: its length and the range a coordinate may take before padding
/// applies (`[-0.5, L - 0.5]`, or `[0, L - 1]` with `align_corners`).
#[derive(Clone, Copy)]
struct Axis {
    len: usize,
    low: f32,
    high: f32,
}

impl GridSample {
    fn axis(&self, len: usize) -> Axis {
        let l = len as f32;
        match self.align_corners {
            true => Axis {
                len,
                low: 0.0,
                high: l - 1.0,
            },
            false => Axis {
                len,
                low: -0.5,
                high: l - 0.5,
            },
        }
    }

    /// The input coordinate of normalized coordinate `g` (contract: gridsample), with the
    /// nearest rounding and the padding of out-of-range coordinates applied.
    fn coordinate(&self, axis: Axis, g: f32) -> f32 {
        let l = axis.len as f32;
        let mut x = match self.align_corners {
            true => (g + 1.0) / 2.0 * (l - 1.0),
            false => ((g + 1.0) * l - 1.0) / 2.0,
        };
        if self.interpolation == Interpolation::Nearest {
            x = x.round_ties_even();
        }
        if x < axis.low || x > axis.high {
            x = match self.padding {
                Padding::Zeros => x,
                Padding::Border => x.clamp(0.0, l - 1.0),
                Padding::Reflection => reflect(x, axis.low, axis.high),
            };
        }
        x
    }

    /// The input index of tap `i` on `axis`, or `None` for a zero (outside, zeros padding).
    fn tap_index(&self, axis: Axis, i: i64) -> Option<usize> {
        let last = axis.len as i64 - 1;
        match self.padding {
            Padding::Zeros => (0..=last).contains(&i).then_some(i as usize),
            Padding::Border => Some(i.clamp(0, last) as usize),
            Padding::Reflection => {
                let r = reflect(i as f32, axis.low, axis.high).trunc() as i64;
                Some(r.clamp(0, last) as usize)
            }
        }
    }

    /// The taps of coordinate `x` on `axis`: (index, weight), zeros dropped.
    fn taps(&self, axis: Axis, x: f32, taps: &mut Vec<(usize, f32)>) {
        taps.clear();
        let floor = x.floor();
        let t = x - floor;
        let base = floor as i64;
        let mut push = |i: i64, w: f32| {
            if let Some(index) = self.tap_index(axis, i) {
                taps.push((index, w));
            }
        };
        match self.interpolation {
            Interpolation::Nearest => push(x as i64, 1.0),
            Interpolation::Linear => {
                push(base, 1.0 - t);
                push(base.saturating_add(1), t);
            }
            Interpolation::Cubic => {
                for (k, d) in [1.0 + t, t, 1.0 - t, 2.0 - t].into_iter().enumerate() {
                    push(base.saturating_add(k as i64 - 1), cubic_weight(CUBIC_A, d));
                }
            }
        }
    }
}

/// Reflects `x` at the borders `low` and `high` until it lies between them: with
/// `range = high - low`, `d` the distance past the border crossed, `n = trunc(d / range)` and
/// `r = d - n * range`, the result is `r` inside from that border when `n` is even, else `r`
/// inside from the other one.
fn reflect(x: f32, low: f32, high: f32) -> f32 {
    let range = high - low;
    if range <= 0.0 {
        return low;
    }
    let (d, near, far, inward) = if x < low {
        (low - x, low, high, 1.0f32)
    } else if x > high {
        (x - high, high, low, -1.0)
    } else {
        return x;
    };
    let n = (d / range).trunc();
    let r = d - n * range;
    match n % 2.0 == 0.0 {
        true => near + inward * r,
        false => far - inward * r,
    }
}

impl Op for GridSample {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().cloned().flatten().and_then(|t| t.dtype());
        Ok(vec![dtype.map(|d| ValueType::tensor(d, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (x, grid) = (inputs.tensor(0)?, inputs.tensor(1)?);
        let (xs, gs) = (x.shape(), grid.shape());
        let rank = xs.len();
        if rank < 3 {
            bail!("GridSample: X must be [N, C, D1, ...], got shape {xs:?}");
        }
        let spatial = rank - 2;
        if gs.len() < 2 || gs[0] != xs[0] || gs[gs.len() - 1] != spatial {
            bail!(
                "GridSample: grid {gs:?} must be [N, ..., {spatial}] for X {xs:?} (N = {}, one \
                 coordinate per spatial axis of X)",
                xs[0]
            );
        }
        let (batch, channels) = (xs[0], xs[1]);
        let points: usize = gs[1..gs.len() - 1].iter().product();
        let shape: Vec<usize> = [batch, channels]
            .into_iter()
            .chain(gs[1..gs.len() - 1].iter().copied())
            .collect();
        check_tensor_size("GridSample output", &shape, DType::F32)?;
        let values = f32_values(x, "GridSample input X")?;
        let coords = f32_values(grid, "GridSample input grid")?;
        // Axes of X, outermost first; grid components come innermost first.
        let axes: Vec<Axis> = xs[2..].iter().map(|&l| self.axis(l)).collect();
        let strides: Vec<usize> = (0..spatial).map(|a| xs[3 + a..].iter().product()).collect();
        let plane: usize = xs[2..].iter().product();
        let mut out = vec![0.0f32; shape.iter().product()];
        if out.is_empty() || plane == 0 {
            return Ok(vec![store_f32(x.dtype(), shape, out)?.into()]);
        }
        // One (n, c) output plane per task.
        out.par_chunks_mut(points)
            .enumerate()
            .for_each(|(nc, dst)| {
                let n = nc / channels;
                let input = &values[nc * plane..][..plane];
                let mut axis_taps: Vec<Vec<(usize, f32)>> = vec![Vec::new(); spatial];
                let mut counters = vec![0usize; spatial];
                for (p, v) in dst.iter_mut().enumerate() {
                    let point = &coords[(n * points + p) * spatial..][..spatial];
                    for (a, taps) in axis_taps.iter_mut().enumerate() {
                        let g = point[spatial - 1 - a];
                        self.taps(axes[a], self.coordinate(axes[a], g), taps);
                    }
                    *v = dot_taps(&axis_taps, &strides, input, &mut counters);
                }
            });
        Ok(vec![store_f32(x.dtype(), shape, out)?.into()])
    }
}

/// GridSample's bilinear sampling (linear taps, zeros padding, `align_corners`) of row-major
/// `[height, width]` planes at input coordinates `(y, x)` themselves, not normalized ones:
/// DeformConv's sampling (contract: deform-conv). Keeps its tap lists between samples.
#[derive(Default)]
pub(super) struct BilinearZeros {
    taps: [Vec<(usize, f32)>; 2],
}

impl BilinearZeros {
    const SAMPLER: GridSample = GridSample {
        interpolation: Interpolation::Linear,
        padding: Padding::Zeros,
        align_corners: true,
    };

    /// The sample of `plane` at `(y, x)`.
    pub(super) fn at(&mut self, plane: &[f32], height: usize, width: usize, y: f32, x: f32) -> f32 {
        let s = &Self::SAMPLER;
        s.taps(s.axis(height), y, &mut self.taps[0]);
        s.taps(s.axis(width), x, &mut self.taps[1]);
        dot_taps(&self.taps, &[width, 1], plane, &mut [0, 0])
    }
}

/// The `canonical-sum` dot product of the row-major product of the axes' taps with the input:
/// `p = fma(w, v, p)` from `+0.0`, each weight the product of its axes' weights, outermost
/// axis first.
fn dot_taps(
    axis_taps: &[Vec<(usize, f32)>],
    strides: &[usize],
    input: &[f32],
    counters: &mut [usize],
) -> f32 {
    if axis_taps.iter().any(Vec::is_empty) {
        return 0.0;
    }
    counters.fill(0);
    let mut p = 0.0f32;
    loop {
        let (mut offset, mut weight) = (0, 1.0f32);
        for (a, (taps, &c)) in axis_taps.iter().zip(counters.iter()).enumerate() {
            let (index, w) = taps[c];
            offset += index * strides[a];
            weight = if a == 0 { w } else { weight * w };
        }
        p = weight.mul_add(input[offset], p);
        // Advance the odometer, innermost axis fastest.
        let mut a = axis_taps.len();
        loop {
            if a == 0 {
                return p;
            }
            a -= 1;
            counters[a] += 1;
            if counters[a] < axis_taps[a].len() {
                break;
            }
            counters[a] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflection_folds_back_and_forth() {
        // Borders [-0.5, 3.5] (length 4, align_corners off).
        assert_eq!(reflect(-1.0, -0.5, 3.5), 0.0);
        assert_eq!(reflect(4.0, -0.5, 3.5), 3.0);
        // 8 is past 3.5 by 4.5: one range (4) and 0.5, so 0.5 inside the low border.
        assert_eq!(reflect(8.0, -0.5, 3.5), 0.0);
        assert_eq!(reflect(1.25, -0.5, 3.5), 1.25);
        // Borders [0, 3] (align_corners on): 7 is past 3 by 4 = one range and 1.
        assert_eq!(reflect(7.0, 0.0, 3.0), 1.0);
    }

    #[test]
    fn a_point_between_four_pixels_weighs_them_bilinearly() {
        let op = GridSample {
            interpolation: Interpolation::Linear,
            padding: Padding::Zeros,
            align_corners: true,
        };
        let (h, w) = (op.axis(2), op.axis(2));
        let mut taps = vec![Vec::new(), Vec::new()];
        // The grid point (0, 0) is the middle of a 2 x 2 image with align_corners.
        op.taps(h, op.coordinate(h, 0.0), &mut taps[0]);
        op.taps(w, op.coordinate(w, 0.0), &mut taps[1]);
        let v = dot_taps(&taps, &[2, 1], &[1.0, 2.0, 3.0, 4.0], &mut [0, 0]);
        assert_eq!(v, 2.5);
    }
}
