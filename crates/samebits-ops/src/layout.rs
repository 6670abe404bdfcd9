//! Moving elements without looking at them: the one generic element mover behind every
//! copy-type op (Transpose, Slice, Gather, Concat, Tile, Pad, ...).
//!
//! A [`MoveKernel`] is written once, generic over [`Movable`] element types; [`move_elements`]
//! runs it on tensors of any dtype by viewing fixed-width elements as `u8`/`u16`/`u32`/`u64`
//! (a bit-for-bit move never needs to know that a `u32` is really an `f32`) and strings as
//! `String`. Moves are exact, so the order in which elements are copied never matters.

use crate::{CopyPart, Result, bail};
use samebits_ir::limits::{check_tensor_size, max_tensor_bytes};
use samebits_ir::{DType, Tensor, checked_numel};
use std::sync::Arc;

/// An element that can be moved around: a fixed-width bit pattern or a string.
pub trait Movable: Clone + Default + Send + Sync + 'static {}
impl Movable for u8 {}
impl Movable for u16 {}
impl Movable for u32 {}
impl Movable for u64 {}
impl Movable for String {}

/// An element-moving computation, written once for every element type. `inputs` are the
/// elements of the tensors handed to [`move_elements`], in order; the result must hold the
/// elements of the output shape, row-major.
pub trait MoveKernel {
    fn run<E: Movable>(&self, inputs: &[&[E]]) -> Result<Vec<E>>;
}

/// Runs `kernel` on the elements of `inputs` (all of one dtype) and returns its result as a
/// tensor of that dtype and `out_shape`.
pub fn move_elements(
    inputs: &[&Tensor],
    out_shape: Vec<usize>,
    kernel: &impl MoveKernel,
) -> Result<Tensor> {
    let Some(first) = inputs.first() else {
        bail!("no input tensor to move elements from")
    };
    let dtype = first.dtype();
    if let Some(other) = inputs.iter().find(|t| t.dtype() != dtype) {
        bail!(
            "inputs that must share a dtype have {dtype} and {}",
            other.dtype()
        );
    }
    check_tensor_size("output", &out_shape, dtype)?;
    match dtype {
        DType::String => {
            let slices = inputs
                .iter()
                .map(|t| t.as_strings())
                .collect::<samebits_ir::Result<Vec<_>>>()?;
            let out = kernel.run(&slices)?;
            Ok(Tensor::from_strings(out_shape, out)?)
        }
        _ => match dtype.size() {
            1 => move_fixed::<u8>(inputs, dtype, out_shape, kernel),
            2 => move_fixed::<u16>(inputs, dtype, out_shape, kernel),
            4 => move_fixed::<u32>(inputs, dtype, out_shape, kernel),
            _ => move_fixed::<u64>(inputs, dtype, out_shape, kernel),
        },
    }
}

fn move_fixed<W: Movable + bytemuck::Pod>(
    inputs: &[&Tensor],
    dtype: DType,
    out_shape: Vec<usize>,
    kernel: &impl MoveKernel,
) -> Result<Tensor> {
    let mut slices = Vec::with_capacity(inputs.len());
    for t in inputs {
        match bytemuck::try_cast_slice::<u8, W>(t.bytes()?) {
            Ok(s) => slices.push(s),
            Err(e) => bail!("{dtype} tensor bytes cannot be moved as words: {e}"),
        }
    }
    let out: Vec<W> = kernel.run(&slices)?;
    let len = std::mem::size_of_val(out.as_slice());
    Ok(Tensor::from_source(
        dtype,
        out_shape,
        Arc::new(out),
        0,
        len,
    )?)
}

/// A strided view of the first input: element `idx` of the view (row-major over `shape`) is
/// `src[offset + Σ idx[d] * strides[d]]`. Transpose, Slice (negative steps included), Expand
/// (zero strides), Tile, DepthToSpace and SpaceToDepth are views of this kind.
#[derive(Clone, Debug)]
pub struct StridedView {
    pub offset: usize,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
}

/// Side of the square tiles in which a transposing copy reads and writes, so that both the
/// source rows and the destination rows stay in cache.
const TRANSPOSE_TILE: usize = 32;

impl StridedView {
    /// The dense row-major view of `shape`.
    pub fn dense(shape: &[usize]) -> StridedView {
        let strides = crate::broadcast::strides(shape)
            .into_iter()
            .map(|s| s as isize)
            .collect();
        StridedView {
            offset: 0,
            shape: shape.to_vec(),
            strides,
        }
    }

    /// The view with its dims reordered: dim `i` of the result is dim `perm[i]` of `self`.
    pub fn permuted(&self, perm: &[usize]) -> StridedView {
        StridedView {
            offset: self.offset,
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
        }
    }

    /// The device copy of this view of input `input` into the dense output `output`.
    pub fn copy_part(&self, input: usize, output: usize) -> CopyPart {
        CopyPart {
            input,
            output,
            shape: self.shape.clone(),
            src_offset: self.offset,
            src_strides: self.strides.clone(),
            dst_offset: 0,
            dst_strides: StridedView::dense(&self.shape).strides,
        }
    }

    /// Copies the view out of `src`; errors (never panics) when the view reaches outside it.
    pub fn copy<E: Movable>(&self, src: &[E]) -> Result<Vec<E>> {
        let n = checked_numel(&self.shape)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let (mut lo, mut hi) = (self.offset as i128, self.offset as i128);
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let reach = (d as i128 - 1) * s as i128;
            if reach < 0 { lo += reach } else { hi += reach }
        }
        if lo < 0 || hi >= src.len() as i128 {
            bail!(
                "a view of shape {:?} reaches elements {lo}..={hi} of a {}-element tensor",
                self.shape,
                src.len()
            );
        }
        // Drop unit dims and merge dims that are contiguous in the source, so that the inner
        // loops run as long as possible.
        let mut dims: Vec<(usize, isize)> = Vec::new();
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            if d == 1 {
                continue;
            }
            match dims.last_mut() {
                Some(last) if last.1 == s * d as isize => *last = (last.0 * d, s),
                _ => dims.push((d, s)),
            }
        }
        let Some(&(inner_len, inner_stride)) = dims.last() else {
            return Ok(vec![src[self.offset].clone()]);
        };
        let rank = dims.len();
        let mut out_strides = vec![1usize; rank];
        for i in (0..rank - 1).rev() {
            out_strides[i] = out_strides[i + 1] * dims[i + 1].0;
        }
        let mut out = allocate(n)?;
        let at = |base: isize, k: usize, stride: isize| (base + k as isize * stride) as usize;
        if inner_stride == 1 {
            for_each_index(&dims[..rank - 1], &out_strides, self.offset, |s, o| {
                let s = s as usize;
                out[o..o + inner_len].clone_from_slice(&src[s..s + inner_len]);
            });
        } else if let Some(p) = dims[..rank - 1].iter().position(|&(_, s)| s == 1) {
            // A transpose: source rows run along dim `p`, destination rows along the last dim.
            let rows = dims[p].0;
            let outer: Vec<(usize, isize)> =
                (0..rank - 1).filter(|&d| d != p).map(|d| dims[d]).collect();
            let outer_out: Vec<usize> = (0..rank - 1)
                .filter(|&d| d != p)
                .map(|d| out_strides[d])
                .collect();
            let row_out = out_strides[p];
            for_each_index(&outer, &outer_out, self.offset, |s, o| {
                for i0 in (0..rows).step_by(TRANSPOSE_TILE) {
                    for j0 in (0..inner_len).step_by(TRANSPOSE_TILE) {
                        for i in i0..rows.min(i0 + TRANSPOSE_TILE) {
                            let row = o + i * row_out;
                            for j in j0..inner_len.min(j0 + TRANSPOSE_TILE) {
                                out[row + j] = src[at(s + i as isize, j, inner_stride)].clone();
                            }
                        }
                    }
                }
            });
        } else {
            for_each_index(&dims[..rank - 1], &out_strides, self.offset, |s, o| {
                for (j, slot) in out[o..o + inner_len].iter_mut().enumerate() {
                    *slot = src[at(s, j, inner_stride)].clone();
                }
            });
        }
        Ok(out)
    }
}

impl MoveKernel for StridedView {
    fn run<E: Movable>(&self, inputs: &[&[E]]) -> Result<Vec<E>> {
        self.copy(inputs[0])
    }
}

/// A vector of `n` default elements, or an error when it would pass the tensor size limit
/// (`samebits_ir::limits`) or memory for it cannot be had.
pub fn allocate<E: Movable>(n: usize) -> Result<Vec<E>> {
    let bytes = (n as u64).saturating_mul(std::mem::size_of::<E>() as u64);
    if bytes > max_tensor_bytes() {
        bail!(
            "{n} elements of {} bytes would exceed {} bytes (the limit SAMEBITS_MAX_TENSOR_BYTES \
             sets)",
            std::mem::size_of::<E>(),
            max_tensor_bytes()
        );
    }
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        bail!("cannot allocate {n} elements");
    }
    v.resize(n, E::default());
    Ok(v)
}

/// Calls `f(source_offset, output_offset)` for every multi-index over `dims` (size, source
/// stride), row-major, with `out_strides` giving each dim's output stride.
fn for_each_index(
    dims: &[(usize, isize)],
    out_strides: &[usize],
    offset: usize,
    mut f: impl FnMut(isize, usize),
) {
    let mut idx = vec![0usize; dims.len()];
    let (mut src, mut out) = (offset as isize, 0usize);
    loop {
        f(src, out);
        let mut d = dims.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            src += dims[d].1;
            out += out_strides[d];
            if idx[d] < dims[d].0 {
                break;
            }
            src -= dims[d].1 * dims[d].0 as isize;
            out -= out_strides[d] * dims[d].0;
            idx[d] = 0;
        }
    }
}

/// Concatenates blocks of the first input: the output is `src[s..s + block]` for each `s` in
/// `starts`, in order (Gather, GatherND, Compress, OneHot, ReverseSequence, ...). Starts are
/// bounds-checked.
#[derive(Debug)]
pub struct BlockGather {
    pub block: usize,
    pub starts: Vec<usize>,
}

impl MoveKernel for BlockGather {
    fn run<E: Movable>(&self, inputs: &[&[E]]) -> Result<Vec<E>> {
        let src = inputs[0];
        let mut out = Vec::with_capacity(self.block * self.starts.len());
        for &s in &self.starts {
            match s.checked_add(self.block).and_then(|end| src.get(s..end)) {
                Some(block) => out.extend_from_slice(block),
                None => bail!(
                    "block {s}..{s}+{} lies outside a {}-element tensor",
                    self.block,
                    src.len()
                ),
            }
        }
        Ok(out)
    }
}

/// Interleaves the inputs along one axis: for each of `outer` rows, input `i` contributes
/// `row_lens[i]` consecutive elements (Concat).
#[derive(Debug)]
pub struct Interleave {
    pub outer: usize,
    pub row_lens: Vec<usize>,
}

impl MoveKernel for Interleave {
    fn run<E: Movable>(&self, inputs: &[&[E]]) -> Result<Vec<E>> {
        let total: usize = self.row_lens.iter().sum::<usize>() * self.outer;
        for (i, (src, &len)) in inputs.iter().zip(&self.row_lens).enumerate() {
            if src.len() != len * self.outer {
                bail!(
                    "input {i} holds {} elements, expected {}",
                    src.len(),
                    len * self.outer
                );
            }
        }
        let mut out = Vec::with_capacity(total);
        for o in 0..self.outer {
            for (src, &len) in inputs.iter().zip(&self.row_lens) {
                out.extend_from_slice(&src[o * len..(o + 1) * len]);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_views_transpose_reverse_and_broadcast() {
        let src: Vec<u32> = (0..6).collect();
        let t = StridedView::dense(&[2, 3]).permuted(&[1, 0]);
        assert_eq!(t.copy(&src).unwrap(), vec![0, 3, 1, 4, 2, 5]);
        let rev = StridedView {
            offset: 5,
            shape: vec![6],
            strides: vec![-1],
        };
        assert_eq!(rev.copy(&src).unwrap(), vec![5, 4, 3, 2, 1, 0]);
        let bcast = StridedView {
            offset: 0,
            shape: vec![2, 3],
            strides: vec![0, 1],
        };
        assert_eq!(bcast.copy(&src[..3]).unwrap(), vec![0, 1, 2, 0, 1, 2]);
        let outside = StridedView {
            offset: 4,
            shape: vec![3],
            strides: vec![1],
        };
        assert!(outside.copy(&src).is_err());
    }

    #[test]
    fn tiled_transpose_matches_index_math() {
        let (r, c) = (70, 45);
        let src: Vec<u64> = (0..(r * c) as u64).collect();
        let out = StridedView::dense(&[r, c])
            .permuted(&[1, 0])
            .copy(&src)
            .unwrap();
        for j in 0..c {
            for i in 0..r {
                assert_eq!(out[j * r + i], (i * c + j) as u64);
            }
        }
    }
}
