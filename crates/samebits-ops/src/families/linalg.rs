//! Linear algebra: MatMul, Gemm, MatMulInteger, Einsum and Det.
//!
//! f32, f16 and bf16 products run on the canonical GEMM of `samebits-kernels` (contract sections
//! `gemm` and `gemm-epilogue`); f16 / bf16 results are rounded once at the store. f64 and integer
//! products run `samebits_kernels::canonical_fold` in their own arithmetic: the same order (tiles of 64 terms,
//! `fma` chains from zero, partials folded left to right), integer arithmetic wrapping.
//! Einsum follows contract section `einsum`: two-operand forms without diagonals or one-sided
//! sums run on the GEMM, every other form in the general loop, which computes the same thing.
//! Det is Gaussian elimination with partial pivoting in the fixed order of contract section `det`.

use super::numeric::{Real, with_real_type};
use crate::broadcast::{broadcast_shapes, broadcast_strides, strides};
use crate::registry::Registry;
use crate::staging::{f32_values, is_f32_staged, known_dtype, known_shape, store_f32, tensor_type};
use crate::{
    BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported,
};
use half::{bf16, f16};
use rayon::prelude::*;
use samebits_ir::{DType, Element, Tensor, Value, ValueType};
use samebits_kernels::{Epilogue, GemmInput, MatRef, PackedB, canonical_fold, gemm, gemm_packed_b};
use std::sync::OnceLock;

pub fn register(r: &mut Registry) {
    r.register("", "MatMul", |ctx| {
        let constant_b = ctx.constant_inputs.get(1).copied().unwrap_or(false);
        Ok(Box::new(MatMul {
            packed_b: constant_b.then(OnceLock::new),
        }))
    });
    r.register("", "Gemm", gemm_op);
    r.register("", "MatMulInteger", |_| Ok(Box::new(MatMulInteger)));
    r.register("", "Einsum", einsum_op);
    r.register("", "Det", |_| Ok(Box::new(Det)));
}

/// Element types whose products run outside the GEMM, in the canonical order in their own
/// arithmetic.
trait PlainArith: Element + Default + Copy + Send + Sync {
    /// `fma(a, b, p)` for floats (one rounding), wrapping `a * b + p` for integers.
    fn mul_add(a: Self, b: Self, p: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn add(a: Self, b: Self) -> Self;
}

macro_rules! float_plain {
    ($($t:ty),*) => {$(
        impl PlainArith for $t {
            fn mul_add(a: Self, b: Self, p: Self) -> Self { a.mul_add(b, p) }
            fn mul(a: Self, b: Self) -> Self { a * b }
            fn add(a: Self, b: Self) -> Self { a + b }
        }
    )*};
}
float_plain!(f32, f64);

macro_rules! int_plain {
    ($($t:ty),*) => {$(
        impl PlainArith for $t {
            fn mul_add(a: Self, b: Self, p: Self) -> Self { a.wrapping_mul(b).wrapping_add(p) }
            fn mul(a: Self, b: Self) -> Self { a.wrapping_mul(b) }
            fn add(a: Self, b: Self) -> Self { a.wrapping_add(b) }
        }
    )*};
}
int_plain!(i32, i64, u32, u64);

/// Runs `$body` with `$T` bound to the element type of a dtype whose products run outside the
/// GEMM (f64 and the 32/64-bit integers); evaluates `$other` for any other dtype.
macro_rules! with_plain_type {
    ($dtype:expr, $T:ident => $body:expr, else $other:expr) => {
        match $dtype {
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            DType::U32 => {
                type $T = u32;
                $body
            }
            DType::U64 => {
                type $T = u64;
                $body
            }
            _ => $other,
        }
    };
}

/// A batch of matrix products over strided operands, resolved from the operand shapes by
/// [`matmul_products`] or [`gemm_products`]: product `p` multiplies the `[m, k]` matrix at
/// `a_offsets[p]` by the `[k, n]` matrix at `b_offsets[p]`; results are dense
/// `[products, m, n]`. The CPU ops and samebits-cuda's executor both run this description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixProducts {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a_offsets: Vec<usize>,
    pub b_offsets: Vec<usize>,
    /// (row, column) strides of A.
    pub a_strides: (usize, usize),
    /// (row, column) strides of B.
    pub b_strides: (usize, usize),
}

/// The stride `s` with `offsets[p] = offsets[0] + p * s`, if there is one.
fn uniform_stride(offsets: &[usize]) -> Option<usize> {
    let stride = match offsets {
        [first, second, ..] => second.checked_sub(*first)?,
        _ => 0,
    };
    offsets
        .iter()
        .enumerate()
        .all(|(p, &o)| o == offsets[0] + p * stride)
        .then_some(stride)
}

/// Offsets (in units of `unit` elements) into a tensor of batch shape `shape` of every index of
/// its broadcast `out`, row-major.
fn broadcast_offsets(shape: &[usize], out: &[usize], unit: usize) -> Vec<usize> {
    let steps = broadcast_strides(shape, out);
    let count: usize = out.iter().product();
    let out_strides = strides(out);
    (0..count)
        .map(|index| {
            let element: usize = (0..out.len())
                .map(|d| index / out_strides[d] % out[d] * steps[d])
                .sum();
            element * unit
        })
        .collect()
}

impl MatrixProducts {
    /// The number of products.
    pub fn count(&self) -> usize {
        self.a_offsets.len()
    }

    /// The batch strides of A and B when every product's matrices lie a fixed stride after the
    /// previous one's (0: one matrix shared by every product); `None` when a broadcast batch
    /// needs per-product offsets.
    pub fn batch_strides(&self) -> Option<(usize, usize)> {
        Some((
            uniform_stride(&self.a_offsets)?,
            uniform_stride(&self.b_offsets)?,
        ))
    }

    fn output_len(&self) -> usize {
        self.count() * self.m * self.n
    }

    fn view<T>(
        data: &[T],
        offset: usize,
        (row_stride, col_stride): (usize, usize),
    ) -> MatRef<'_, T> {
        MatRef {
            data,
            offset,
            batch_stride: 0,
            row_stride,
            col_stride,
        }
    }

    /// Runs the products on the canonical GEMM into `out` (`[products, m, n]`), then `epilogue`.
    fn run_gemm<T: GemmInput>(&self, a: &[T], b: &[T], epilogue: Epilogue<'_>, out: &mut [f32]) {
        let (m, k, n) = (self.m, self.k, self.n);
        if out.is_empty() {
            return;
        }
        let a_view = |p: usize| Self::view(a, self.a_offsets[p], self.a_strides);
        let b_view = |p: usize| Self::view(b, self.b_offsets[p], self.b_strides);
        match self.batch_strides() {
            // A shared B under row-major A matrices that follow each other: one tall product
            // (a row's bits do not depend on M).
            Some((sa, 0))
                if sa == m * k
                    && self.a_strides == (k, 1)
                    && matches!(epilogue, Epilogue::None) =>
            {
                gemm(
                    1,
                    self.count() * m,
                    n,
                    k,
                    a_view(0),
                    b_view(0),
                    epilogue,
                    out,
                )
            }
            Some((sa, sb)) => gemm(
                self.count(),
                m,
                n,
                k,
                a_view(0).with_batch_stride(sa),
                b_view(0).with_batch_stride(sb),
                epilogue,
                out,
            ),
            _ => {
                for (p, out) in out.chunks_exact_mut(m * n).enumerate() {
                    gemm(1, m, n, k, a_view(p), b_view(p), epilogue, out);
                }
            }
        }
    }

    /// The products in the element type's own arithmetic, each output a canonical fold.
    fn run_plain<T: PlainArith>(&self, a: &[T], b: &[T]) -> Vec<T> {
        let mut out = vec![T::default(); self.output_len()];
        if out.is_empty() {
            return out;
        }
        let ((ar, ac), (br, bc)) = (self.a_strides, self.b_strides);
        out.par_chunks_mut(self.n)
            .enumerate()
            .for_each(|(row, dst)| {
                let (p, i) = (row / self.m, row % self.m);
                let a_row = self.a_offsets[p] + i * ar;
                for (j, slot) in dst.iter_mut().enumerate() {
                    let b_col = self.b_offsets[p] + j * bc;
                    *slot = canonical_fold(
                        self.k,
                        T::default(),
                        |acc, kk| T::mul_add(a[a_row + kk * ac], b[b_col + kk * br], acc),
                        T::add,
                    );
                }
            });
        out
    }

    /// The products of two f32 / f16 / bf16 tensors of the same dtype, as f32 results.
    fn gemm_f32_staged(&self, a: &Tensor, b: &Tensor, epilogue: Epilogue<'_>) -> Result<Vec<f32>> {
        fn typed<T: GemmInput + Element>(
            p: &MatrixProducts,
            a: &Tensor,
            b: &Tensor,
            epilogue: Epilogue<'_>,
        ) -> Result<Vec<f32>> {
            let mut out = vec![0.0f32; p.output_len()];
            p.run_gemm(a.as_slice::<T>()?, b.as_slice::<T>()?, epilogue, &mut out);
            Ok(out)
        }
        match a.dtype() {
            DType::F32 => typed::<f32>(self, a, b, epilogue),
            DType::F16 => typed::<f16>(self, a, b, epilogue),
            DType::BF16 => typed::<bf16>(self, a, b, epilogue),
            other => unsupported!("GEMM on {other}"),
        }
    }
}

/// Errors unless `a` and `b` have the same dtype.
fn same_dtype(op: &str, a: &Tensor, b: &Tensor) -> Result<DType> {
    if a.dtype() != b.dtype() {
        bail!(
            "{op}: inputs A and B have different dtypes ({} and {})",
            a.dtype(),
            b.dtype()
        );
    }
    Ok(a.dtype())
}

/// MatMul's products and output shape: numpy `matmul` semantics, 1-D operands promoted to a row
/// (A) or a column (B) and that axis removed from the result, batch axes broadcast.
pub fn matmul_products(a: &[usize], b: &[usize]) -> Result<(MatrixProducts, Vec<usize>)> {
    if a.is_empty() || b.is_empty() {
        bail!("MatMul: inputs must have rank >= 1, got shapes {a:?} and {b:?}");
    }
    let a2 = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let b2 = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != kb {
        bail!("MatMul: A of shape {a:?} has {k} columns but B of shape {b:?} has {kb} rows");
    }
    let (a_batch, b_batch) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let batch = broadcast_shapes(&[a_batch, b_batch]).map_err(|_| {
        crate::OpError::Invalid(format!(
            "MatMul: batch axes of A {a:?} and B {b:?} cannot be broadcast together"
        ))
    })?;
    let mut out_shape = batch.clone();
    if a.len() > 1 {
        out_shape.push(m);
    }
    if b.len() > 1 {
        out_shape.push(n);
    }
    let products = MatrixProducts {
        m,
        k,
        n,
        a_offsets: broadcast_offsets(a_batch, &batch, m * k),
        b_offsets: broadcast_offsets(b_batch, &batch, k * n),
        a_strides: (k, 1),
        b_strides: (n, 1),
    };
    Ok((products, out_shape))
}

/// ONNX MatMul; a constant f32 B of rank 2 (a layer's weight) is packed into the GEMM's panels
/// at the first run and reused (packing only copies, contract section `gemm`).
#[derive(Debug)]
struct MatMul {
    packed_b: Option<OnceLock<PackedB>>,
}

impl MatMul {
    /// `a @ b` through B's packing, when B is a constant f32 matrix shared by every product
    /// and the A matrices follow each other row-major (one tall product, as `run_gemm` makes).
    fn with_packed_b(
        &self,
        a: &Tensor,
        b: &Tensor,
        p: &MatrixProducts,
    ) -> Option<Result<Vec<f32>>> {
        let packed_b = self.packed_b.as_ref()?;
        let shared_b = b.shape().len() == 2 && b.dtype() == DType::F32 && a.dtype() == DType::F32;
        let tall = p.a_strides == (p.k, 1)
            && (p.count() == 1 || matches!(p.batch_strides(), Some((sa, 0)) if sa == p.m * p.k));
        if !shared_b || !tall || p.output_len() == 0 {
            return None;
        }
        let run = || -> Result<Vec<f32>> {
            let b_values = b.as_slice::<f32>()?;
            let packed = packed_b.get_or_init(|| {
                PackedB::new(p.k, p.n, MatrixProducts::view(b_values, 0, p.b_strides))
            });
            let mut out = vec![0.0f32; p.output_len()];
            let a_view = MatrixProducts::view(a.as_slice::<f32>()?, p.a_offsets[0], p.a_strides);
            gemm_packed_b(1, p.count() * p.m, a_view, packed, Epilogue::None, &mut out);
            Ok(out)
        };
        Some(run())
    }
}

impl Op for MatMul {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let (Some(dtype), Some(a), Some(b)) = (
            known_dtype(inputs, 0),
            known_shape(inputs, 0),
            known_shape(inputs, 1),
        ) else {
            return Ok(Vec::new());
        };
        let (_, shape) = matmul_products(&a, &b)?;
        Ok(vec![Some(tensor_type(dtype, &shape))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (a, b) = (inputs.tensor(0)?, inputs.tensor(1)?);
        let dtype = same_dtype("MatMul", a, b)?;
        let (products, shape) = matmul_products(a.shape(), b.shape())?;
        let out = if let Some(values) = self.with_packed_b(a, b, &products) {
            store_f32(dtype, shape, values?)?
        } else if is_f32_staged(dtype) {
            store_f32(
                dtype,
                shape,
                products.gemm_f32_staged(a, b, Epilogue::None)?,
            )?
        } else {
            with_plain_type!(dtype, T => {
                Tensor::from_vec(shape, products.run_plain(a.as_slice::<T>()?, b.as_slice::<T>()?))?
            }, else unsupported!("MatMul on {dtype}"))
        };
        Ok(vec![out.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::MatMul)
    }
}

/// ONNX Gemm: `alpha * op(A) @ op(B) + beta * C`, through the GEMM epilogue `AlphaBeta`
/// (contract section `gemm-epilogue`).
#[derive(Debug)]
struct Gemm {
    trans_a: bool,
    trans_b: bool,
    alpha: f32,
    beta: f32,
    /// Before opset 7 without `broadcast = 1`: C must be `[M, N]` exactly.
    c_unbroadcast: bool,
}

fn gemm_op(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let c_unbroadcast = ctx.opset < 7
        && match args.int_or("broadcast", 0)? {
            0 => true,
            1 => false,
            other => bail!("attribute \"broadcast\" must be 0 or 1, got {other}"),
        };
    Ok(Box::new(Gemm {
        trans_a: args.int_or("transA", 0)? != 0,
        trans_b: args.int_or("transB", 0)? != 0,
        alpha: args.float_or("alpha", 1.0)?,
        beta: args.float_or("beta", 1.0)?,
        c_unbroadcast,
    }))
}

/// Rows and columns of a Gemm C operand broadcast to `[m, n]`, as (row stride, column stride).
pub fn gemm_c_strides(c: &[usize], m: usize, n: usize) -> Result<(usize, usize)> {
    let (rows, cols) = match *c {
        [] => (1, 1),
        [cols] => (1, cols),
        [rows, cols] => (rows, cols),
        _ => bail!("Gemm: input C must have rank <= 2, got shape {c:?}"),
    };
    if (rows != 1 && rows != m) || (cols != 1 && cols != n) {
        bail!("Gemm: input C of shape {c:?} cannot be broadcast to the output [{m}, {n}]");
    }
    Ok((if rows == 1 { 0 } else { cols }, usize::from(cols != 1)))
}

/// Gemm's one product `op(A) op(B)` of the matrices A and B, each transposed when its flag says
/// so (read through strides, nothing copied).
pub fn gemm_products(
    a: &[usize],
    b: &[usize],
    trans_a: bool,
    trans_b: bool,
) -> Result<MatrixProducts> {
    let (&[a0, a1], &[b0, b1]) = (a, b) else {
        bail!("Gemm: A and B must be matrices, got shapes {a:?} and {b:?}");
    };
    let (m, k, a_strides) = if trans_a {
        (a1, a0, (1, a1))
    } else {
        (a0, a1, (a1, 1))
    };
    let (kb, n, b_strides) = if trans_b {
        (b1, b0, (1, b1))
    } else {
        (b0, b1, (b1, 1))
    };
    if k != kb {
        bail!(
            "Gemm: op(A) has {k} columns but op(B) has {kb} rows (A {a:?}, B {b:?}, \
             transA {}, transB {})",
            trans_a as i32,
            trans_b as i32
        );
    }
    Ok(MatrixProducts {
        m,
        k,
        n,
        a_offsets: vec![0],
        b_offsets: vec![0],
        a_strides,
        b_strides,
    })
}

impl Op for Gemm {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let (Some(dtype), Some(a), Some(b)) = (
            known_dtype(inputs, 0),
            known_shape(inputs, 0),
            known_shape(inputs, 1),
        ) else {
            return Ok(Vec::new());
        };
        let p = gemm_products(&a, &b, self.trans_a, self.trans_b)?;
        Ok(vec![Some(tensor_type(dtype, &[p.m, p.n]))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (a, b, c) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.opt_tensor(2)?);
        let dtype = same_dtype("Gemm", a, b)?;
        let p = gemm_products(a.shape(), b.shape(), self.trans_a, self.trans_b)?;
        let c_strides = c.map(|c| gemm_c_strides(c.shape(), p.m, p.n)).transpose()?;
        if let Some(c) = c
            && self.c_unbroadcast
            && c.shape() != [p.m, p.n]
        {
            bail!(
                "Gemm: input C has shape {:?}, not [{}, {}], and attribute \"broadcast\" is not \
                 1 (before opset 7 C must then be [M, N])",
                c.shape(),
                p.m,
                p.n
            );
        }
        if let Some(c) = c
            && c.dtype() != dtype
        {
            bail!("Gemm: input C has dtype {}, A and B {dtype}", c.dtype());
        }
        let shape = vec![p.m, p.n];
        let out = match dtype {
            DType::F64 => {
                let acc = p.run_plain(a.as_slice::<f64>()?, b.as_slice::<f64>()?);
                let (alpha, beta) = (self.alpha as f64, self.beta as f64);
                let c = c.map(|c| c.as_slice::<f64>()).transpose()?;
                let out = acc
                    .iter()
                    .enumerate()
                    .map(|(e, &acc)| match (c, c_strides) {
                        (Some(c), Some((rs, cs))) => {
                            (alpha * acc) + (beta * c[e / p.n * rs + e % p.n * cs])
                        }
                        _ => alpha * acc,
                    })
                    .collect();
                Tensor::from_vec(shape, out)?
            }
            _ if is_f32_staged(dtype) => {
                let c_values = c.map(|c| f32_values(c, "Gemm input C")).transpose()?;
                let c_view = c_values
                    .as_deref()
                    .zip(c_strides)
                    .map(|(data, strides)| MatrixProducts::view(data, 0, strides));
                let epilogue = Epilogue::AlphaBeta {
                    alpha: self.alpha,
                    beta: self.beta,
                    c: c_view,
                };
                store_f32(dtype, shape, p.gemm_f32_staged(a, b, epilogue)?)?
            }
            other => unsupported!("Gemm on {other}"),
        };
        Ok(vec![out.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Gemm {
            trans_a: self.trans_a,
            trans_b: self.trans_b,
            alpha: self.alpha,
            beta: self.beta,
        })
    }
}

/// ONNX MatMulInteger: u8 / i8 operands minus their zero points (per tensor, per row of A, per
/// column of B), products accumulated in wrapping i32.
#[derive(Debug)]
struct MatMulInteger;

/// The elements of an 8-bit integer tensor minus its zero point, as i32. `zero_index(e)` is
/// the zero-point element that applies to element `e` when the zero point has `zero_len`
/// elements (1 means per tensor). `op` names the op in errors.
fn shifted_i32(
    op: &str,
    t: &Tensor,
    zero_point: Option<&Tensor>,
    what: &str,
    zero_len: usize,
    zero_index: impl Fn(usize) -> usize,
) -> Result<Vec<i32>> {
    if !matches!(t.dtype(), DType::U8 | DType::I8) {
        unsupported!("{op} input {what} of dtype {} (u8 and i8)", t.dtype());
    }
    let values = t.to_i64_vec()?;
    let Some(zp) = zero_point else {
        return Ok(values.into_iter().map(|v| v as i32).collect());
    };
    if zp.dtype() != t.dtype() {
        bail!(
            "{op}: zero point of {what} has dtype {}, {what} {}",
            zp.dtype(),
            t.dtype()
        );
    }
    let zp = zp.to_i64_vec()?;
    let index: Box<dyn Fn(usize) -> usize> = match zp.len() {
        1 => Box::new(|_| 0),
        len if len == zero_len => Box::new(zero_index),
        len => bail!("{op}: zero point of {what} has {len} elements; expected 1 or {zero_len}"),
    };
    Ok(values
        .iter()
        .enumerate()
        .map(|(e, &v)| (v - zp[index(e)]) as i32)
        .collect())
}

/// The result of [`integer_matmul`]: the products, the output shape, and the rows `m` and
/// columns `n` of each matrix product.
pub(super) struct IntegerProducts {
    pub values: Vec<i32>,
    pub shape: Vec<usize>,
    pub m: usize,
    pub n: usize,
}

/// The integer products of MatMulInteger and QLinearMatMul: `(A - a_zp) x (B - b_zp)` with
/// u8 / i8 operands, zero points per tensor, per row of A or per column of B, products and sums
/// in wrapping i32 (exact and order independent).
pub(super) fn integer_matmul(
    op: &str,
    a: &Tensor,
    a_zero_point: Option<&Tensor>,
    b: &Tensor,
    b_zero_point: Option<&Tensor>,
) -> Result<IntegerProducts> {
    let (p, shape) = matmul_products(a.shape(), b.shape())?;
    samebits_ir::limits::check_tensor_size(&format!("{op} output"), &shape, DType::I32)?;
    let (m, k, n) = (p.m, p.k, p.n);
    let a = shifted_i32(op, a, a_zero_point, "A", m, |e| e / k % m)?;
    let b = shifted_i32(op, b, b_zero_point, "B", n, |e| e % n)?;
    Ok(IntegerProducts {
        values: p.run_plain(&a, &b),
        shape,
        m,
        n,
    })
}

impl Op for MatMulInteger {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let (Some(a), Some(b)) = (known_shape(inputs, 0), known_shape(inputs, 1)) else {
            return Ok(Vec::new());
        };
        let (_, shape) = matmul_products(&a, &b)?;
        Ok(vec![Some(tensor_type(DType::I32, &shape))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (a, b) = (inputs.tensor(0)?, inputs.tensor(1)?);
        let products = integer_matmul(
            "MatMulInteger",
            a,
            inputs.opt_tensor(2)?,
            b,
            inputs.opt_tensor(3)?,
        )?;
        Ok(vec![
            Tensor::from_vec(products.shape, products.values)?.into(),
        ])
    }
}

/// A label of an Einsum subscript: a letter's code point, or [`ELLIPSIS_LABEL`] + j for the
/// j-th axis (right-aligned) covered by `...`.
type Label = u32;
const ELLIPSIS_LABEL: Label = 0x1_0000;

/// One side of an Einsum equation as written: labels before and after an optional `...`.
#[derive(Debug, Clone)]
struct Subscript {
    before: Vec<Label>,
    after: Option<Vec<Label>>,
}

impl Subscript {
    fn parse(text: &str, equation: &str) -> Result<Subscript> {
        let labels = |s: &str| -> Result<Vec<Label>> {
            s.chars()
                .filter(|c| !c.is_whitespace())
                .map(|c| {
                    if c.is_ascii_alphabetic() {
                        Ok(c as Label)
                    } else {
                        bail!("Einsum: equation {equation:?} has the invalid subscript {c:?}")
                    }
                })
                .collect()
        };
        Ok(match text.split_once("...") {
            None => Subscript {
                before: labels(text)?,
                after: None,
            },
            Some((before, after)) => Subscript {
                before: labels(before)?,
                after: Some(labels(after)?),
            },
        })
    }

    fn explicit_len(&self) -> usize {
        self.before.len() + self.after.as_ref().map_or(0, Vec::len)
    }

    /// The labels of all axes, the ellipsis expanded to `ellipsis_rank` right-aligned labels
    /// out of `max_ellipsis` in all.
    fn expand(&self, ellipsis_rank: usize, max_ellipsis: usize) -> Vec<Label> {
        let mut out = self.before.clone();
        if let Some(after) = &self.after {
            out.extend(
                (max_ellipsis - ellipsis_rank..max_ellipsis).map(|j| ELLIPSIS_LABEL + j as Label),
            );
            out.extend(after);
        }
        out
    }
}

/// ONNX Einsum (contract section `einsum`).
#[derive(Debug)]
struct Einsum {
    equation: String,
    inputs: Vec<Subscript>,
    output: Option<Subscript>,
}

fn einsum_op(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let equation = NodeArgs::new(ctx.node)
        .string("equation")?
        .ok_or_else(|| crate::OpError::Invalid("Einsum: missing attribute \"equation\"".into()))?;
    let (lhs, rhs) = match equation.split_once("->") {
        Some((lhs, rhs)) => (lhs, Some(rhs)),
        None => (equation.as_str(), None),
    };
    let inputs = lhs
        .split(',')
        .map(|s| Subscript::parse(s, &equation))
        .collect::<Result<Vec<_>>>()?;
    let output = rhs.map(|s| Subscript::parse(s, &equation)).transpose()?;
    Ok(Box::new(Einsum {
        equation,
        inputs,
        output,
    }))
}

/// An Einsum equation bound to operand shapes.
struct EinsumPlan {
    /// Labels of each operand's axes.
    operands: Vec<Vec<Label>>,
    output: Vec<Label>,
    /// Labels summed over, in order of first appearance in the operands.
    summed: Vec<Label>,
    /// The size of every label.
    sizes: std::collections::BTreeMap<Label, usize>,
}

impl Einsum {
    fn plan(&self, shapes: &[&[usize]]) -> Result<EinsumPlan> {
        let eq = &self.equation;
        if shapes.len() != self.inputs.len() {
            bail!(
                "Einsum: equation {eq:?} has {} operands, got {} inputs",
                self.inputs.len(),
                shapes.len()
            );
        }
        let mut ellipsis_ranks = Vec::new();
        for (i, (sub, shape)) in self.inputs.iter().zip(shapes).enumerate() {
            let explicit = sub.explicit_len();
            let fits = if sub.after.is_some() {
                shape.len() >= explicit
            } else {
                shape.len() == explicit
            };
            if !fits {
                bail!(
                    "Einsum: operand {i} of equation {eq:?} has shape {shape:?}, which does not match its subscripts"
                );
            }
            ellipsis_ranks.push(shape.len() - explicit);
        }
        let max_ellipsis = ellipsis_ranks.iter().copied().max().unwrap_or(0);
        let operands: Vec<Vec<Label>> = self
            .inputs
            .iter()
            .zip(&ellipsis_ranks)
            .map(|(sub, &rank)| sub.expand(rank, max_ellipsis))
            .collect();
        let mut sizes = std::collections::BTreeMap::new();
        for (labels, shape) in operands.iter().zip(shapes) {
            for (&label, &dim) in labels.iter().zip(shape.iter()) {
                let size = sizes.entry(label).or_insert(dim);
                if *size != dim {
                    let broadcast = label >= ELLIPSIS_LABEL && (*size == 1 || dim == 1);
                    if !broadcast {
                        bail!(
                            "Einsum: equation {eq:?} gives one subscript the sizes {size} and {dim}"
                        );
                    }
                    *size = (*size).max(dim);
                }
            }
        }
        let output = match &self.output {
            Some(sub) => sub.expand(max_ellipsis, max_ellipsis),
            None => {
                let all: Vec<Label> = operands.iter().flatten().copied().collect();
                let mut letters: Vec<Label> = all
                    .iter()
                    .copied()
                    .filter(|&l| l < ELLIPSIS_LABEL && all.iter().filter(|&&x| x == l).count() == 1)
                    .collect();
                letters.sort_unstable();
                (0..max_ellipsis as Label)
                    .map(|j| ELLIPSIS_LABEL + j)
                    .chain(letters)
                    .collect()
            }
        };
        for (i, &label) in output.iter().enumerate() {
            if !sizes.contains_key(&label) || output[..i].contains(&label) {
                bail!(
                    "Einsum: output subscripts of {eq:?} must be distinct and appear in the inputs"
                );
            }
        }
        let mut summed = Vec::new();
        for &label in operands.iter().flatten() {
            if !output.contains(&label) && !summed.contains(&label) {
                summed.push(label);
            }
        }
        Ok(EinsumPlan {
            operands,
            output,
            summed,
            sizes,
        })
    }
}

impl EinsumPlan {
    fn dims(&self, labels: &[Label]) -> Vec<usize> {
        labels.iter().map(|l| self.sizes[l]).collect()
    }

    /// Element strides of operand `o` along each of `labels` (a label repeated in the operand
    /// adds up its strides: a diagonal; an axis broadcast from size 1 has stride 0).
    fn strides_of(&self, o: usize, shape: &[usize], labels: &[Label]) -> Vec<usize> {
        let own = strides(shape);
        labels
            .iter()
            .map(|label| {
                self.operands[o]
                    .iter()
                    .zip(shape)
                    .zip(&own)
                    .filter(|&((l, &dim), _)| l == label && (dim != 1 || self.sizes[label] == 1))
                    .map(|(_, &s)| s)
                    .sum()
            })
            .collect()
    }

    /// Element offsets of operand `o` at every index (row-major) of the axes `labels`.
    fn offsets(&self, o: usize, shape: &[usize], labels: &[Label]) -> Vec<usize> {
        let dims = self.dims(labels);
        let steps = self.strides_of(o, shape, labels);
        let index_strides = strides(&dims);
        (0..dims.iter().product::<usize>())
            .map(|index| {
                (0..dims.len())
                    .map(|d| index / index_strides[d] % dims[d] * steps[d])
                    .sum()
            })
            .collect()
    }

    /// The general loop: each output is the canonical fold over the summed index (row-major
    /// over `summed`) of the product of the operands' elements.
    fn general<T: PlainArith>(&self, operands: &[(&[T], &[usize])]) -> Vec<T> {
        let out_offsets: Vec<Vec<usize>> = (0..operands.len())
            .map(|o| self.offsets(o, operands[o].1, &self.output))
            .collect();
        let sum_offsets: Vec<Vec<usize>> = (0..operands.len())
            .map(|o| self.offsets(o, operands[o].1, &self.summed))
            .collect();
        let terms = self.dims(&self.summed).iter().product::<usize>();
        let last = operands.len() - 1;
        (0..self.dims(&self.output).iter().product::<usize>())
            .into_par_iter()
            .map(|e| {
                let at = |o: usize, t: usize| operands[o].0[out_offsets[o][e] + sum_offsets[o][t]];
                let step = |p, t| {
                    if last == 0 {
                        T::add(p, at(0, t))
                    } else {
                        let product = (1..last).fold(at(0, t), |x, o| T::mul(x, at(o, t)));
                        T::mul_add(product, at(last, t), p)
                    }
                };
                canonical_fold(terms, T::default(), step, T::add)
            })
            .collect()
    }

    /// The GEMM form of a two-operand equation without diagonals, broadcasting or one-sided
    /// sums: `[batch, free A, summed] x [batch, summed, free B]`, the result permuted to the
    /// output's axis order. `None` when the equation has another form.
    fn as_gemm(&self, a_shape: &[usize], b_shape: &[usize]) -> Option<EinsumGemm> {
        let [a, b] = &self.operands[..] else {
            return None;
        };
        let distinct = |ls: &[Label]| ls.iter().enumerate().all(|(i, l)| !ls[..i].contains(l));
        let full =
            |ls: &[Label], shape: &[usize]| ls.iter().zip(shape).all(|(l, &d)| self.sizes[l] == d);
        if !distinct(a) || !distinct(b) || !full(a, a_shape) || !full(b, b_shape) {
            return None;
        }
        if self.summed.iter().any(|l| !a.contains(l) || !b.contains(l)) {
            return None;
        }
        let batch: Vec<Label> = self
            .output
            .iter()
            .copied()
            .filter(|l| a.contains(l) && b.contains(l))
            .collect();
        let free_a: Vec<Label> = a.iter().copied().filter(|l| !b.contains(l)).collect();
        let free_b: Vec<Label> = b.iter().copied().filter(|l| !a.contains(l)).collect();
        let position =
            |ls: &[Label], l: &Label| ls.iter().position(|x| x == l).expect("label present");
        let a_perm: Vec<usize> = batch
            .iter()
            .chain(&free_a)
            .chain(&self.summed)
            .map(|l| position(a, l))
            .collect();
        let b_perm: Vec<usize> = batch
            .iter()
            .chain(&self.summed)
            .chain(&free_b)
            .map(|l| position(b, l))
            .collect();
        let result: Vec<Label> = batch
            .iter()
            .chain(&free_a)
            .chain(&free_b)
            .copied()
            .collect();
        let out_perm: Vec<usize> = self.output.iter().map(|l| position(&result, l)).collect();
        let size = |ls: &[Label]| self.dims(ls).iter().product::<usize>();
        let (count, m, k, n) = (
            size(&batch),
            size(&free_a),
            size(&self.summed),
            size(&free_b),
        );
        let products = MatrixProducts {
            m,
            k,
            n,
            a_offsets: (0..count).map(|p| p * m * k).collect(),
            b_offsets: (0..count).map(|p| p * k * n).collect(),
            a_strides: (k, 1),
            b_strides: (n, 1),
        };
        Some(EinsumGemm {
            products,
            a_perm,
            b_perm,
            result_dims: self.dims(&result),
            out_perm,
        })
    }
}

/// A two-operand Einsum as one batched matrix product.
struct EinsumGemm {
    products: MatrixProducts,
    /// Operand permutations to `[batch, free A, summed]` and `[batch, summed, free B]`.
    a_perm: Vec<usize>,
    b_perm: Vec<usize>,
    /// Dims of the product `[batch, free A, free B]`, and its permutation to the output.
    result_dims: Vec<usize>,
    out_perm: Vec<usize>,
}

/// `data` of `shape` with its axes permuted: axis `i` of the result is axis `perm[i]`.
fn permuted<T: Copy + Default>(
    data: &[T],
    shape: &[usize],
    perm: &[usize],
) -> (Vec<T>, Vec<usize>) {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return (data.to_vec(), out_shape);
    }
    let src = strides(shape);
    let steps: Vec<usize> = perm.iter().map(|&p| src[p]).collect();
    let index_strides = strides(&out_shape);
    let out = (0..data.len())
        .map(|e| {
            let at: usize = (0..perm.len())
                .map(|d| e / index_strides[d] % out_shape[d] * steps[d])
                .sum();
            data[at]
        })
        .collect();
    (out, out_shape)
}

impl Op for Einsum {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let tensors = (0..self.inputs.len())
            .map(|i| inputs.tensor(i))
            .collect::<Result<Vec<_>>>()?;
        let dtype = tensors[0].dtype();
        if let Some(t) = tensors.iter().find(|t| t.dtype() != dtype) {
            bail!(
                "Einsum: operands have different dtypes ({dtype} and {})",
                t.dtype()
            );
        }
        let shapes: Vec<&[usize]> = tensors.iter().map(|t| t.shape()).collect();
        let plan = self.plan(&shapes)?;
        let out_shape = plan.dims(&plan.output);
        let out = if is_f32_staged(dtype) {
            let values = tensors
                .iter()
                .map(|t| f32_values(t, "Einsum operand"))
                .collect::<Result<Vec<_>>>()?;
            let result = match plan.as_gemm(shapes[0], shapes.get(1).copied().unwrap_or(&[])) {
                Some(gemm_form) => {
                    let (a, _) = permuted(&values[0], shapes[0], &gemm_form.a_perm);
                    let (b, _) = permuted(&values[1], shapes[1], &gemm_form.b_perm);
                    let products = &gemm_form.products;
                    let mut flat = vec![0.0f32; products.output_len()];
                    products.run_gemm(&a[..], &b[..], Epilogue::None, &mut flat);
                    permuted(&flat, &gemm_form.result_dims, &gemm_form.out_perm).0
                }
                None => {
                    let operands: Vec<(&[f32], &[usize])> = values
                        .iter()
                        .map(|v| &v[..])
                        .zip(shapes.iter().copied())
                        .collect();
                    plan.general(&operands)
                }
            };
            store_f32(dtype, out_shape, result)?
        } else {
            with_plain_type!(dtype, T => {
                let operands = tensors
                    .iter()
                    .map(|t| Ok((t.as_slice::<T>()?, t.shape())))
                    .collect::<Result<Vec<_>>>()?;
                Tensor::from_vec(out_shape, plan.general(&operands))?
            }, else unsupported!("Einsum on {dtype}"))
        };
        Ok(vec![out.into()])
    }
}

/// Det of the trailing `[M, M]` matrices (contract: det).
#[derive(Debug)]
struct Det;

/// The determinant of the row-major `m x m` matrix `a` (overwritten): for each column `k`, the
/// pivot is the first row `r >= k` with the largest `|a[r][k]|`; a zero pivot gives `0`; rows
/// are swapped (negating the sign) and each row `i > k` becomes
/// `a[i][j] - (a[i][k] / a[k][k]) * a[k][j]` for `j > k`, every operation rounded, no `fma`.
/// The result is the diagonal multiplied left to right from the sign (`+1` or `-1`).
fn determinant<R: Real>(a: &mut [R], m: usize) -> R {
    let mut det = R::ONE;
    for k in 0..m {
        let pivot = (k..m).fold(k, |best, r| {
            if a[r * m + k].abs() > a[best * m + k].abs() {
                r
            } else {
                best
            }
        });
        if a[pivot * m + k] == R::ZERO {
            return R::ZERO;
        }
        if pivot != k {
            for j in 0..m {
                a.swap(k * m + j, pivot * m + j);
            }
            det = -det;
        }
        for i in k + 1..m {
            let factor = a[i * m + k] / a[k * m + k];
            for j in k + 1..m {
                a[i * m + j] = a[i * m + j] - factor * a[k * m + j];
            }
        }
    }
    (0..m).fold(det, |d, k| d * a[k * m + k])
}

impl Det {
    fn eval_as<R: Real>(&self, x: &Tensor) -> Result<Tensor> {
        let shape = x.shape();
        let m = shape[shape.len() - 1];
        let mut data = R::read(x, "input 0")?.into_owned();
        let dets: Vec<R> = if m == 0 {
            vec![R::ONE; shape[..shape.len() - 2].iter().product()]
        } else {
            data.chunks_mut(m * m).map(|a| determinant(a, m)).collect()
        };
        R::store(x.dtype(), shape[..shape.len() - 2].to_vec(), dets)
    }
}

impl Op for Det {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let shape = x.shape();
        if shape.len() < 2 || shape[shape.len() - 1] != shape[shape.len() - 2] {
            bail!("input 0 must be [..., M, M] square matrices, got shape {shape:?}");
        }
        let y = with_real_type!(x.dtype(), R => self.eval_as::<R>(x)?,
            else unsupported!("Det of {} tensors", x.dtype()));
        Ok(vec![y.into()])
    }
}
