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
