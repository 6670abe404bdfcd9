//! Dot products of quantized weight rows with f32 activations, in the canonical order of
//! `docs/contract.md` (section `canonical-sum`), for the decode hot path.
//!
//! Each weight `w_k` is first dequantized by its canonical formula (`docs/gguf.md`) and rounded to
//! f32; then, per reduction tile of 64 terms, `p = fma(w_k, x_k, p)` from `+0.0` in index order,
//! and the tile partials are folded left to right. So [`dot_q_f32`] equals
//! `crate::canonical_dot(dequantized row, x)` bit for bit, whatever the CPU.
//!
//! [`matvec_q_f32`] computes many rows at once: SIMD lanes are independent output rows (each with
//! its own fma chain), never parts of one sum, so vector width cannot change the bits. The kernel
//! is one generic body compiled for AVX-512 or AVX2+FMA when the CPU has them (runtime detection)
//! and for the baseline target otherwise.

use samebits_ggml::{BlockFormat, FormatVisitor, GgmlType, QuantError, Result};

/// Terms per reduction tile (`docs/contract.md`, canonical-sum).
const TILE: usize = crate::REDUCTION_TILE;
/// Output rows computed together by the vectorised kernel.
const LANES: usize = 32;

/// The canonical dot product of one quantized row (`blocks`, `x.len()` elements of `ggml_type`)
/// with `x`: equal bit for bit to `canonical_dot` of the dequantized row with `x`.
pub fn dot_q_f32(ggml_type: GgmlType, blocks: &[u8], x: &[f32]) -> Result<f32> {
    let mut out = [0f32];
    matvec_q_f32(ggml_type, blocks, x, &mut out)?;
    Ok(out[0])
}

/// `out[r] = dot_q_f32(row r, x)` for the `out.len()` consecutive rows of `x.len()` elements held
/// in `rows`.
pub fn matvec_q_f32(ggml_type: GgmlType, rows: &[u8], x: &[f32], out: &mut [f32]) -> Result<()> {
    let row_bytes = ggml_type.row_bytes(x.len()).ok_or_else(|| {
        QuantError(format!(
            "{ggml_type}: a row of {} elements is not a whole number of {}-element blocks",
            x.len(),
            ggml_type.block_elems()
        ))
    })?;
    let expected = row_bytes.checked_mul(out.len());
    if expected != Some(rows.len()) {
        return Err(QuantError(format!(
            "{ggml_type}: {} bytes do not hold {} rows of {} elements",
            rows.len(),
            out.len(),
            x.len()
        )));
    }
    if !ggml_type.can_dequantize() {
        return Err(QuantError(format!(
            "dot products over {ggml_type} are not supported"
        )));
    }
    ggml_type.dispatch(MatVec {
        rows,
        row_bytes,
        x,
        out,
    });
    Ok(())
}

struct MatVec<'a> {
    rows: &'a [u8],
    row_bytes: usize,
    x: &'a [f32],
    out: &'a mut [f32],
}

impl FormatVisitor for MatVec<'_> {
    type Output = ();
    fn visit<B: BlockFormat>(self) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU supports AVX-512F, checked just above.
                return unsafe { matvec_avx512::<B>(self) };
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                // SAFETY: the CPU supports AVX2 and FMA, checked just above.
                return unsafe { matvec_avx2::<B>(self) };
            }
        }
        matvec_kernel::<B>(self)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
fn matvec_avx512<B: BlockFormat>(job: MatVec<'_>) {
    matvec_kernel::<B>(job)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn matvec_avx2<B: BlockFormat>(job: MatVec<'_>) {
    matvec_kernel::<B>(job)
}

/// Elements dequantized per row at a time: a whole number of blocks and of tiles.
const fn chunk_elems<B: BlockFormat>() -> usize {
    if B::ELEMS > TILE { B::ELEMS } else { TILE }
}

#[inline(always)]
fn matvec_kernel<B: BlockFormat>(job: MatVec<'_>) {
    let MatVec {
        rows,
        row_bytes,
        x,
        out,
    } = job;
    let chunk = chunk_elems::<B>();
    let mut row_values = vec![0f32; chunk];
    let mut lanes_by_k = vec![0f32; chunk * LANES];
    let mut groups = out.chunks_exact_mut(LANES);
    for (g, out) in groups.by_ref().enumerate() {
        let rows = &rows[g * LANES * row_bytes..(g + 1) * LANES * row_bytes];
        rows_canonical_dot::<B, LANES>(rows, row_bytes, x, &mut row_values, &mut lanes_by_k, out);
    }
    let rest = groups.into_remainder();
    let done = rows.len() - rest.len() * row_bytes;
    for (r, out) in rest.chunks_exact_mut(1).enumerate() {
        let row = &rows[done + r * row_bytes..done + (r + 1) * row_bytes];
        rows_canonical_dot::<B, 1>(row, row_bytes, x, &mut row_values, &mut lanes_by_k, out);
    }
}

/// The canonical dot products of `N` rows with `x`, each lane one row's own fma chain.
/// `lanes_by_k` holds a chunk of the rows' weights transposed (`[k][lane]`) so that each step of
/// the chains reads one contiguous vector.
#[inline(always)]
fn rows_canonical_dot<B: BlockFormat, const N: usize>(
    rows: &[u8],
    row_bytes: usize,
    x: &[f32],
    row_values: &mut [f32],
    lanes_by_k: &mut [f32],
    out: &mut [f32],
) {
    let chunk = chunk_elems::<B>();
    let mut total = [0f32; N];
    let mut first_tile = true;
    for (c, x_chunk) in x.chunks(chunk).enumerate() {
        let block_range = c * chunk / B::ELEMS * B::BYTES..;
        let chunk_bytes = x_chunk.len() / B::ELEMS * B::BYTES;
        for lane in 0..N {
            let row = &rows[lane * row_bytes..(lane + 1) * row_bytes][block_range.clone()];
            for (block, values) in row[..chunk_bytes]
                .chunks_exact(B::BYTES)
                .zip(row_values.chunks_exact_mut(B::ELEMS))
            {
                B::dequantize_block(block, values);
            }
            for (k, &w) in row_values[..x_chunk.len()].iter().enumerate() {
                lanes_by_k[k * N + lane] = w;
            }
        }
        for (t, x_tile) in x_chunk.chunks(TILE).enumerate() {
            let mut partial = [0f32; N];
            for (k, &xk) in x_tile.iter().enumerate() {
                let w: &[f32; N] = lanes_by_k[(t * TILE + k) * N..][..N]
                    .try_into()
                    .expect("N lanes");
                for lane in 0..N {
                    partial[lane] = w[lane].mul_add(xk, partial[lane]);
                }
            }
            if first_tile {
                total = partial;
                first_tile = false;
            } else {
                for lane in 0..N {
                    total[lane] += partial[lane];
                }
            }
        }
    }
    out.copy_from_slice(&total);
}
