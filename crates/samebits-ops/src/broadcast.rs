//! Numpy-style multidirectional broadcasting and the elementwise loops built on it. Elementwise
//! results do not depend on iteration order, so these loops may run in parallel freely.

use crate::{OpError, Result};
use rayon::prelude::*;

/// The broadcast of several shapes, or an error naming the first incompatible pair of dims.
pub fn broadcast_shapes(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for shape in shapes {
        let pad = rank - shape.len();
        for (i, &d) in shape.iter().enumerate() {
            let o = &mut out[pad + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(OpError::Invalid(format!(
                    "shapes {:?} cannot be broadcast together",
                    shapes
                )));
            }
        }
    }
    Ok(out)
}

/// Element strides of a dense row-major `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Strides that read a tensor of `shape` broadcast to `out` (0 along broadcast dims).
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let pad = out.len() - shape.len();
    let own = strides(shape);
    (0..out.len())
        .map(|i| {
            if i < pad || shape[i - pad] == 1 {
                0
            } else {
                own[i - pad]
            }
        })
        .collect()
}

/// For each output element (row-major over `out`), the source offsets of each input.
/// Calls `f(out_index_range_start, offsets_per_input_for_the_row)` one innermost row at a time.
fn for_each_row(out: &[usize], ins: &[Vec<usize>], mut f: impl FnMut(usize, &[usize])) {
    let total: usize = out.iter().product();
    if total == 0 {
        return;
    }
    let rank = out.len();
    if rank == 0 {
        f(0, &vec![0; ins.len()]);
        return;
    }
    let inner = out[rank - 1];
    let mut idx = vec![0usize; rank];
    let mut base = vec![0usize; ins.len()];
    let mut start = 0;
    while start < total {
        f(start, &base);
        start += inner;
        // Advance the multi-index over all but the innermost dim.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for (b, s) in base.iter_mut().zip(ins) {
                *b += s[d];
            }
            if idx[d] < out[d] {
                break;
            }
            for (b, s) in base.iter_mut().zip(ins) {
                *b -= s[d] * out[d];
            }
            idx[d] = 0;
        }
    }
}

const PARALLEL_MIN: usize = 1 << 15;

/// `out[i] = f(a[i'], b[i''])` under broadcasting; returns the output shape and data.
pub fn map2<A: Copy + Sync, B: Copy + Sync, R: Copy + Send + Default>(
    a: &[A],
    ashape: &[usize],
    b: &[B],
    bshape: &[usize],
    f: impl Fn(A, B) -> R + Sync,
) -> Result<(Vec<usize>, Vec<R>)> {
    let out_shape = broadcast_shapes(&[ashape, bshape])?;
    let n: usize = out_shape.iter().product();
    if ashape == bshape {
        let out = if n >= PARALLEL_MIN {
            a.par_iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
        } else {
            a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
        };
        return Ok((out_shape, out));
    }
    let sa = broadcast_strides(ashape, &out_shape);
    let sb = broadcast_strides(bshape, &out_shape);
    let inner = (*out_shape.last().unwrap_or(&1)).max(1);
    let (inner_a, inner_b) = (*sa.last().unwrap_or(&0), *sb.last().unwrap_or(&0));
    let mut out = vec![R::default(); n];
    // One output row (the innermost dim) at a time; rows are independent, so they may run in
    // parallel. Each row's source offsets come from unravelling its index.
    let fill_row = |r: usize, row: &mut [R]| {
        let (oa, ob) = row_offsets(r, &out_shape, &sa, &sb);
        match (inner_a, inner_b) {
            (1, 1) => {
                for ((o, &x), &y) in row
                    .iter_mut()
                    .zip(&a[oa..oa + inner])
                    .zip(&b[ob..ob + inner])
                {
                    *o = f(x, y);
                }
            }
            (1, 0) => {
                let y = b[ob];
                for (o, &x) in row.iter_mut().zip(&a[oa..oa + inner]) {
                    *o = f(x, y);
                }
            }
            (0, 1) => {
                let x = a[oa];
                for (o, &y) in row.iter_mut().zip(&b[ob..ob + inner]) {
                    *o = f(x, y);
                }
            }
            _ => {
                for (j, o) in row.iter_mut().enumerate() {
                    *o = f(a[oa + j * inner_a], b[ob + j * inner_b]);
                }
            }
        }
    };
    if n >= PARALLEL_MIN {
        out.par_chunks_mut(inner)
            .with_min_len((4096 / inner).max(1))
            .enumerate()
            .for_each(|(r, row)| fill_row(r, row));
    } else {
        out.chunks_mut(inner)
            .enumerate()
            .for_each(|(r, row)| fill_row(r, row));
    }
    Ok((out_shape, out))
}

/// The source offsets of output row `row` (a row being the innermost dim of `out`).
fn row_offsets(mut row: usize, out: &[usize], sa: &[usize], sb: &[usize]) -> (usize, usize) {
    let (mut oa, mut ob) = (0, 0);
    for d in (0..out.len().saturating_sub(1)).rev() {
        let i = row % out[d];
        row /= out[d];
        oa += i * sa[d];
        ob += i * sb[d];
    }
    (oa, ob)
}

/// `out[i] = f(a[i'], b[i''], c[i'''])` under broadcasting (Where, Clip with tensors).
pub fn map3<A: Copy, B: Copy, C: Copy, R: Copy + Default>(
    (a, ashape): (&[A], &[usize]),
    (b, bshape): (&[B], &[usize]),
    (c, cshape): (&[C], &[usize]),
    f: impl Fn(A, B, C) -> R,
) -> Result<(Vec<usize>, Vec<R>)> {
    let out_shape = broadcast_shapes(&[ashape, bshape, cshape])?;
    let n: usize = out_shape.iter().product();
    let st = [
        broadcast_strides(ashape, &out_shape),
        broadcast_strides(bshape, &out_shape),
        broadcast_strides(cshape, &out_shape),
    ];
    let inner_s: Vec<usize> = st.iter().map(|s| *s.last().unwrap_or(&0)).collect();
    let inner = *out_shape.last().unwrap_or(&1);
    let mut out = vec![R::default(); n];
    for_each_row(&out_shape, &st, |start, base| {
        for j in 0..inner {
            out[start + j] = f(
                a[base[0] + j * inner_s[0]],
                b[base[1] + j * inner_s[1]],
                c[base[2] + j * inner_s[2]],
            );
        }
    });
    Ok((out_shape, out))
}

/// Materialises `data` of `shape` broadcast to `out` (Expand).
pub fn expand<T: Copy + Default>(data: &[T], shape: &[usize], out: &[usize]) -> Vec<T> {
    let n: usize = out.iter().product();
    let s = broadcast_strides(shape, out);
    let inner_s = *s.last().unwrap_or(&0);
    let inner = *out.last().unwrap_or(&1);
    let mut res = vec![T::default(); n];
    for_each_row(out, &[s], |start, base| {
        for j in 0..inner {
            res[start + j] = data[base[0] + j * inner_s];
        }
    });
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasts_like_numpy() {
        assert_eq!(
            broadcast_shapes(&[&[2, 1, 3], &[4, 1]]).unwrap(),
            vec![2, 4, 3]
        );
        assert!(broadcast_shapes(&[&[2, 3], &[4, 3]]).is_err());
        let (shape, out) = map2(&[1, 2, 3], &[3], &[10, 20], &[2, 1], |a, b| a + b).unwrap();
        assert_eq!(shape, vec![2, 3]);
        assert_eq!(out, vec![11, 12, 13, 21, 22, 23]);
        let (_, out) = map2(&[1, 2], &[2, 1], &[1, 2, 3], &[1, 3], |a, b| a * b).unwrap();
        assert_eq!(out, vec![1, 2, 3, 2, 4, 6]);
        assert_eq!(expand(&[7, 8], &[2, 1], &[2, 2]), vec![7, 7, 8, 8]);
        let (_, w) = map3(
            (&[true, false][..], &[2][..]),
            (&[1][..], &[1][..]),
            (&[5, 6][..], &[2][..]),
            |c, x, y| if c { x } else { y },
        )
        .unwrap();
        assert_eq!(w, vec![1, 6]);
    }
}

/// ONNX's broadcasting before opset 7, for the binary ops that had `broadcast` and `axis`
/// attributes (Add, Sub, Mul, Div, Pow, And, Or, Xor, Equal, Greater, Less, opsets 1–6): the
/// rule is written once here and every such op applies it through [`LegacyBroadcastOp`].
///
/// Without `broadcast = 1` the two shapes must be equal. With it, B's shape is matched to a
/// contiguous run of A's dims starting at `axis` (by default the run that ends at A's last
/// dim), each of B's dims equal to A's or 1; the output has A's shape. B read with trailing 1s
/// appended to its shape is then the same operand under numpy broadcasting, which is how
/// [`LegacyBroadcast::operand_shape`] hands it to the ops' ordinary loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LegacyBroadcast {
    /// `broadcast = 0` (the default): shapes must be equal.
    Equal,
    /// `broadcast = 1`, with the `axis` attribute if the node has one.
    Aligned { axis: Option<i64> },
    /// PRelu's slope before opset 7: A's shape, one element, or else one value per channel
    /// (dim 1 of A).
    Channel,
}

impl LegacyBroadcast {
    /// The rule `node` follows at default-domain `opset`: `None` from opset 7 on (numpy
    /// broadcasting, the ops' own), else from its `broadcast` and `axis` attributes.
    pub fn of(node: &samebits_ir::Node, opset: i64) -> Result<Option<LegacyBroadcast>> {
        if opset >= 7 {
            return Ok(None);
        }
        let args = crate::NodeArgs::new(node);
        Ok(Some(match args.int_or("broadcast", 0)? {
            0 => LegacyBroadcast::Equal,
            1 => LegacyBroadcast::Aligned {
                axis: args.int("axis")?,
            },
            other => {
                return Err(OpError::Invalid(format!(
                    "attribute \"broadcast\" must be 0 or 1, got {other}"
                )));
            }
        }))
    }

    /// The shape to read B with so that numpy broadcasting against A (of shape `a`) computes
    /// this rule's result, or an error naming both shapes (and the axis).
    pub fn operand_shape(self, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
        let axis = match self {
            LegacyBroadcast::Equal if a == b => return Ok(b.to_vec()),
            LegacyBroadcast::Equal => {
                return Err(OpError::Invalid(format!(
                    "shapes {a:?} and {b:?} differ and attribute \"broadcast\" is not 1 \
                     (before opset 7 the shapes must then be equal)"
                )));
            }
            LegacyBroadcast::Channel if a == b => return Ok(b.to_vec()),
            LegacyBroadcast::Channel => Some(1),
            LegacyBroadcast::Aligned { axis } => axis,
        };
        // A one-element B (a scalar included) applies to every element whatever its rank.
        if b.iter().product::<usize>() == 1 && b.len() <= a.len() {
            return Ok(vec![1; a.len()]);
        }
        let start = match axis {
            None => a.len().checked_sub(b.len()),
            Some(axis) if axis < 0 => None,
            Some(axis) => usize::try_from(axis).ok(),
        };
        let fits = |s: usize| {
            s + b.len() <= a.len() && b.iter().zip(&a[s..]).all(|(&bd, &ad)| bd == ad || bd == 1)
        };
        match start {
            Some(s) if fits(s) => {
                let mut shape = b.to_vec();
                shape.resize(a.len() - s, 1);
                Ok(shape)
            }
            _ => Err(OpError::Invalid(format!(
                "B of shape {b:?} does not match a run of A's shape {a:?} starting at axis {} \
                 (legacy broadcast, before opset 7)",
                axis.map_or_else(|| "(trailing)".to_string(), |x| x.to_string())
            ))),
        }
    }
}

/// A binary op of opsets 1–6 with its [`LegacyBroadcast`] rule: input 1 is read with
/// [`LegacyBroadcast::operand_shape`], then the op (which broadcasts numpy-style) runs as it
/// does from opset 7 on. No device kernel: the CPU runs it.
#[derive(Debug)]
pub struct LegacyBroadcastOp {
    rule: LegacyBroadcast,
    op: Box<dyn crate::Op>,
}

impl LegacyBroadcastOp {
    /// `op` for `ctx`'s node, under the legacy rule when its opset has one.
    pub fn wrap(ctx: &crate::BuildContext, op: Box<dyn crate::Op>) -> Result<Box<dyn crate::Op>> {
        Ok(match LegacyBroadcast::of(ctx.node, ctx.opset)? {
            Some(rule) => Box::new(LegacyBroadcastOp { rule, op }),
            None => op,
        })
    }

    /// `op` reading input 1 under `rule`.
    pub fn with_rule(rule: LegacyBroadcast, op: Box<dyn crate::Op>) -> Box<dyn crate::Op> {
        Box::new(LegacyBroadcastOp { rule, op })
    }
}

impl crate::Op for LegacyBroadcastOp {
    fn infer(
        &self,
        inputs: &[Option<samebits_ir::ValueType>],
    ) -> Result<Vec<Option<samebits_ir::ValueType>>> {
        let shape_of = |i: usize| inputs.get(i).and_then(|t| t.as_ref()?.shape()?.concrete());
        let mut inputs = inputs.to_vec();
        if let (Some(a), Some(b), Some(Some(ty))) = (shape_of(0), shape_of(1), inputs.get(1)) {
            let shape = self.rule.operand_shape(&a, &b)?;
            let dtype = ty.dtype();
            inputs[1] = dtype.map(|d| {
                samebits_ir::ValueType::tensor(d, Some(samebits_ir::Shape::known(&shape)))
            });
        }
        self.op.infer(&inputs)
    }

    fn eval(&self, inputs: &crate::Inputs) -> Result<Vec<samebits_ir::Value>> {
        use crate::InputsExt;
        let (a, b) = (inputs.tensor(0)?, inputs.tensor(1)?);
        let b: samebits_ir::Value = b
            .reshaped(self.rule.operand_shape(a.shape(), b.shape())?)?
            .into();
        let mut args: Vec<Option<&samebits_ir::Value>> = inputs.to_vec();
        args[1] = Some(&b);
        self.op.eval(&args)
    }
}
