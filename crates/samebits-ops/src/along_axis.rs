//! Slicing, concatenating and stacking tensors along one axis, for the sequence and
//! control-flow ops. The element moves are [`crate::layout`]'s kernels, so every dtype shares
//! one code path and no value is ever computed.

use crate::layout::{BlockGather, Interleave, move_elements};
use crate::{Result, bail};
use samebits_ir::Tensor;

/// `(outer, inner)`: the element counts before and after `axis` of `shape`.
fn outer_inner(shape: &[usize], axis: usize) -> (usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis + 1..].iter().product(),
    )
}

/// Elements `start..start + len` of `t` along `axis` (the axis is kept).
pub fn narrow(t: &Tensor, axis: usize, start: usize, len: usize) -> Result<Tensor> {
    let shape = t.shape();
    if axis >= shape.len() || start + len > shape[axis] {
        bail!(
            "cannot take {start}..{} along axis {axis} of shape {shape:?}",
            start + len
        );
    }
    let (outer, inner) = outer_inner(shape, axis);
    let kernel = BlockGather {
        block: len * inner,
        starts: (0..outer)
            .map(|o| (o * shape[axis] + start) * inner)
            .collect(),
    };
    let mut out_shape = shape.to_vec();
    out_shape[axis] = len;
    move_elements(&[t], out_shape, &kernel)
}

/// Index `index` of `t` along `axis`, with that axis removed.
pub fn index_axis(t: &Tensor, axis: usize, index: usize) -> Result<Tensor> {
    let slice = narrow(t, axis, index, 1)?;
    let mut shape = slice.shape().to_vec();
    shape.remove(axis);
    Ok(slice.reshaped(shape)?)
}

/// Concatenates `parts` along `axis`; they must share dtype, rank and every other dim.
pub fn concat(parts: &[&Tensor], axis: usize) -> Result<Tensor> {
    let Some(first) = parts.first() else {
        bail!("nothing to concatenate");
    };
    let rank = first.rank();
    if axis >= rank {
        bail!("axis {axis} is out of range for rank {rank}");
    }
    for (i, p) in parts.iter().enumerate() {
        let same_dims =
            p.rank() == rank && (0..rank).all(|d| d == axis || p.shape()[d] == first.shape()[d]);
        if p.dtype() != first.dtype() || !same_dims {
            bail!(
                "tensor {i} ({} {:?}) does not match tensor 0 ({} {:?}) outside axis {axis}",
                p.dtype(),
                p.shape(),
                first.dtype(),
                first.shape()
            );
        }
    }
    let (outer, inner) = outer_inner(first.shape(), axis);
    let kernel = Interleave {
        outer,
        row_lens: parts.iter().map(|p| p.shape()[axis] * inner).collect(),
    };
    let mut shape = first.shape().to_vec();
    shape[axis] = parts.iter().map(|p| p.shape()[axis]).sum();
    move_elements(parts, shape, &kernel)
}

/// Stacks `parts` (same dtype and shape) along a new axis `axis` (`0..=rank`).
pub fn stack(parts: &[&Tensor], axis: usize) -> Result<Tensor> {
    let expanded = parts
        .iter()
        .map(|p| {
            if axis > p.rank() {
                bail!("axis {axis} is out of range for stacking rank {}", p.rank());
            }
            let mut shape = p.shape().to_vec();
            shape.insert(axis, 1);
            Ok(p.reshaped(shape)?)
        })
        .collect::<Result<Vec<_>>>()?;
    concat(&expanded.iter().collect::<Vec<_>>(), axis)
}
