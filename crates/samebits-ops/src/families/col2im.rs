//! Col2Im (opset 18): folds the columns of `input [N, C * prod(block_shape), L]` back into
//! `[N, C, image_shape...]`, adding where blocks overlap.
//!
//! Implements contract section `col2im`: an output pixel is the `canonical-sum` of the column
//! values that land on it, in increasing order of their block position `l` (the column index),
//! from `+0.0`. f16 / bf16 compute in f32 and round once at the store. There is no GPU kernel:
//! on a GPU the step runs this CPU op.

use crate::registry::Registry;
use crate::staging::{f32_values, store_f32};
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail};
use rayon::prelude::*;
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Value, ValueType};
use samebits_kernels::canonical_fold;

pub fn register(r: &mut Registry) {
    r.register("", "Col2Im", Col2Im::build);
}

#[derive(Debug)]
struct Col2Im {
    dilations: Option<Vec<i64>>,
    pads: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
}

impl Col2Im {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(Col2Im {
            dilations: args.ints("dilations")?,
            pads: args.ints("pads")?,
            strides: args.ints("strides")?,
        }))
    }
}

/// One spatial axis: image length, block length, dilation, stride, leading pad, and the number
/// of block positions along it.
#[derive(Clone, Copy, Debug)]
struct Axis {
    image: usize,
    block: usize,
    dilation: usize,
    stride: usize,
    pad: usize,
    positions: usize,
}

impl Axis {
    /// The block position `l` whose block offset `b` covers pixel `p`, if any:
    /// `l * stride - pad + b * dilation = p`.
    fn position(&self, p: usize, b: usize) -> Option<usize> {
        let shifted = (p + self.pad).checked_sub(b * self.dilation)?;
        (shifted % self.stride == 0 && shifted / self.stride < self.positions)
            .then_some(shifted / self.stride)
    }
}

/// A list attribute of `rank` non-negative (or positive) values, or `default` everywhere.
fn per_axis(
    values: &Option<Vec<i64>>,
    name: &str,
    len: usize,
    default: i64,
    min: i64,
) -> Result<Vec<usize>> {
    match values {
        None => Ok(vec![default as usize; len]),
        Some(v) if v.len() == len && v.iter().all(|&x| x >= min) => {
            Ok(v.iter().map(|&x| x as usize).collect())
        }
        Some(v) => bail!("Col2Im: attribute \"{name}\" must be {len} values >= {min}, got {v:?}"),
    }
}

impl Op for Col2Im {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(super::output_of(super::input_dtype(inputs, 0)))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let image = inputs.ints(1, "image_shape")?;
        let block = inputs.ints(2, "block_shape")?;
        let rank = image.len();
        if rank == 0 || block.len() != rank {
            bail!(
                "Col2Im: input 1 (image_shape) {image:?} and input 2 (block_shape) {block:?} must \
                 have the same, non-zero length"
            );
        }
        if image.iter().chain(&block).any(|&v| v < 1) {
            bail!("Col2Im: image_shape {image:?} and block_shape {block:?} must be positive");
        }
        let dilations = per_axis(&self.dilations, "dilations", rank, 1, 1)?;
        let strides = per_axis(&self.strides, "strides", rank, 1, 1)?;
        let pads = per_axis(&self.pads, "pads", 2 * rank, 0, 0)?;
        let mut axes = Vec::with_capacity(rank);
        for a in 0..rank {
            let (img, blk) = (image[a] as usize, block[a] as usize);
            let span = dilations[a]
                .checked_mul(blk - 1)
                .and_then(|s| s.checked_add(1))
                .filter(|&s| s <= img.saturating_add(pads[a]).saturating_add(pads[rank + a]));
            let Some(span) = span else {
                bail!(
                    "Col2Im: block {blk} with dilation {} does not fit image axis {a} of length \
                     {img} with pads {} and {}",
                    dilations[a],
                    pads[a],
                    pads[rank + a]
                );
            };
            let positions = (img + pads[a] + pads[rank + a] - span) / strides[a] + 1;
            axes.push(Axis {
                image: img,
                block: blk,
                dilation: dilations[a],
                stride: strides[a],
                pad: pads[a],
                positions,
            });
        }
        let block_len: usize = axes.iter().map(|a| a.block).product();
        let positions: usize = axes.iter().map(|a| a.positions).product();
        let xs = x.shape();
        if xs.len() != 3 || xs[1] % block_len != 0 || xs[2] != positions {
            bail!(
                "Col2Im: input 0 of shape {xs:?} must be [N, C * {block_len}, {positions}] for \
                 image_shape {image:?}, block_shape {block:?} (the block product and the number \
                 of block positions)"
            );
        }
        let (batch, channels) = (xs[0], xs[1] / block_len);
        let mut shape = vec![batch, channels];
        shape.extend(axes.iter().map(|a| a.image));
        check_tensor_size("Col2Im output", &shape, DType::F32)?;
        let values = f32_values(x, "Col2Im input 0")?;
        let plane: usize = axes.iter().map(|a| a.image).product();
        let mut out = vec![0.0f32; shape.iter().product()];
        if out.is_empty() {
            return Ok(vec![store_f32(x.dtype(), shape, out)?.into()]);
        }
        // One (n, c) plane per task.
        out.par_chunks_mut(plane).enumerate().for_each(|(nc, dst)| {
            let columns = &values[nc * block_len * positions..][..block_len * positions];
            let mut terms: Vec<(usize, usize)> = Vec::with_capacity(block_len);
            for (p, v) in dst.iter_mut().enumerate() {
                pixel_terms(&axes, p, &mut terms);
                *v = canonical_fold(
                    terms.len(),
                    0.0f32,
                    |s, t| {
                        let (b, l) = terms[t];
                        s + columns[b * positions + l]
                    },
                    |a, b| a + b,
                );
            }
        });
        Ok(vec![store_f32(x.dtype(), shape, out)?.into()])
    }
}

/// The (block offset, block position) pairs, both row-major linear indices, whose column value
/// lands on pixel `p` (row-major over the image), in increasing block position.
fn pixel_terms(axes: &[Axis], p: usize, terms: &mut Vec<(usize, usize)>) {
    terms.clear();
    let rank = axes.len();
    let mut pixel = vec![0usize; rank];
    let mut rest = p;
    for a in (0..rank).rev() {
        pixel[a] = rest % axes[a].image;
        rest /= axes[a].image;
    }
    // Block offsets in row-major order; their positions decrease as offsets grow on each
    // axis, so walking the offsets backwards gives increasing positions.
    let block_len: usize = axes.iter().map(|a| a.block).product();
    'offsets: for b in (0..block_len).rev() {
        let (mut rest, mut l, mut l_scale) = (b, 0, 1);
        for a in (0..rank).rev() {
            let offset = rest % axes[a].block;
            rest /= axes[a].block;
            let Some(position) = axes[a].position(pixel[a], offset) else {
                continue 'offsets;
            };
            l += position * l_scale;
            l_scale *= axes[a].positions;
        }
        terms.push((b, l));
    }
    debug_assert!(terms.windows(2).all(|w| w[0].1 < w[1].1));
}
