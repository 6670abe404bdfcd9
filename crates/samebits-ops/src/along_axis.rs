//! Dtype-agnostic data movement: slicing, concatenating and stacking tensors along an axis.
//! Elements are copied as opaque byte runs (or cloned strings), so one code path serves every
//! dtype and no value is ever computed.

use crate::{Result, bail};
use samebits_ir::{DType, Tensor};

/// Elements gathered for a new tensor of one dtype.
enum Elements {
    Bytes { bytes: Vec<u8>, elem_size: usize },
    Strings(Vec<String>),
}

impl Elements {
    fn new(dtype: DType) -> Elements {
        match dtype {
            DType::String => Elements::Strings(Vec::new()),
            d => Elements::Bytes {
                bytes: Vec::new(),
                elem_size: d.size(),
            },
        }
    }

    /// Appends elements `start..start + len` (row-major) of `t`, which has this dtype.
    fn extend_from(&mut self, t: &Tensor, start: usize, len: usize) -> Result<()> {
        match self {
            Elements::Bytes { bytes, elem_size } => {
                let b = t.bytes()?;
                bytes.extend_from_slice(&b[start * *elem_size..(start + len) * *elem_size]);
            }
            Elements::Strings(s) => s.extend_from_slice(&t.as_strings()?[start..start + len]),
        }
        Ok(())
    }

    fn into_tensor(self, dtype: DType, shape: Vec<usize>) -> Result<Tensor> {
        Ok(match self {
            Elements::Bytes { bytes, .. } => Tensor::from_le_bytes(dtype, shape, &bytes)?,
            Elements::Strings(s) => Tensor::from_strings(shape, s)?,
        })
    }
}

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
    let mut out = Elements::new(t.dtype());
    for o in 0..outer {
        out.extend_from(t, (o * shape[axis] + start) * inner, len * inner)?;
    }
    let mut out_shape = shape.to_vec();
    out_shape[axis] = len;
    out.into_tensor(t.dtype(), out_shape)
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
    let mut out = Elements::new(first.dtype());
    for o in 0..outer {
        for p in parts {
            let run = p.shape()[axis] * inner;
            out.extend_from(p, o * run, run)?;
        }
    }
    let mut shape = first.shape().to_vec();
    shape[axis] = parts.iter().map(|p| p.shape()[axis]).sum();
    out.into_tensor(first.dtype(), shape)
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
