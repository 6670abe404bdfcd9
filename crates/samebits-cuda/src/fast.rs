//! The default operation set's kernels (contract section `devices`): cuBLAS SGEMM with TF32
//! tensor cores, loaded at run time (cudarc's dynamic loading: a machine without cuBLAS runs
//! the reproducible GEMM instead, never a panic). No promise about bits: TF32 rounds the
//! operands to 10 mantissa bits and cuBLAS picks its own reduction order.

use cudarc::cublas::{CudaBlas, result as blas, sys};
use cudarc::driver::DevicePtr;

use crate::backend::CudaBackend;
use crate::buffer::DeviceBuffer;
use crate::error::{CudaError, Result};
use crate::gemm::{DeviceMat, GemmEpilogue, GemmLaunch, GemmShape};

/// Which kernels a device operation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernels {
    /// The reproducible kernels (contract): the reproducible and deterministic sets.
    Reproducible,
    /// The fastest available (cuBLAS with TF32 for products): the default set.
    Fast,
    /// The reproducible kernels, except that products of GGUF weights of samebits-kernels'
    /// `INT8_TYPES` are contract section `int8-products`' exact-integer products: the
    /// `reproducible-int8` set.
    ReproducibleInt8,
}

impl Kernels {
    /// Whether a product with GGUF weights of `ggml_type` is an exact-integer product.
    pub fn int8_products(self, ggml_type: samebits_ggml::GgmlType) -> bool {
        self == Kernels::ReproducibleInt8 && samebits_kernels::has_int8_products(ggml_type)
    }
}

/// A cuBLAS handle on the backend's stream with TF32 tensor-op math, or `None` when the
/// library is missing or fails to start.
pub(crate) fn open_blas(backend: &CudaBackend) -> Option<CudaBlas> {
    // SAFETY: only tries to load the shared library.
    if !unsafe { sys::is_culib_present() } {
        return None;
    }
    let blas = CudaBlas::new(backend.stream().clone()).ok()?;
    // SAFETY: a live handle.
    unsafe {
        sys::cublasSetMathMode(
            *blas.handle(),
            sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH,
        )
        .result()
        .ok()?;
    }
    Some(blas)
}

/// The cuBLAS operand for the transpose of a row-major `rows x cols` view: its operation and
/// leading dimension (`None` when neither stride is 1 or the leading dimension is too small).
fn transposed_operand(
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
) -> Option<(sys::cublasOperation_t, i32)> {
    // Unit column stride: the view's transpose is column-major cols x rows, leading dim
    // row_stride. Unit row stride: the view is column-major rows x cols (cuBLAS transposes).
    // cuBLAS needs a leading dimension of at least the stored matrix's rows.
    let (op, ld) = if col_stride == 1 && row_stride >= cols.max(1) {
        (sys::cublasOperation_t::CUBLAS_OP_N, row_stride)
    } else if row_stride == 1 && col_stride >= rows.max(1) {
        (sys::cublasOperation_t::CUBLAS_OP_T, col_stride)
    } else {
        return None;
    };
    Some((op, i32::try_from(ld).ok()?))
}

impl CudaBackend {
    /// Whether the default set's products run on cuBLAS here (else on the reproducible GEMM).
    pub fn has_cublas(&self) -> bool {
        self.blas().is_some()
    }

    /// A GEMM with the operation set's kernels: [`CudaBackend::gemm`] (`Auto` launch) for
    /// [`Kernels::Reproducible`], cuBLAS TF32 for [`Kernels::Fast`] where it loads and takes
    /// the operands' layout.
    pub fn gemm_with(
        &self,
        shape: GemmShape,
        a: DeviceMat<'_>,
        b: DeviceMat<'_>,
        epilogue: GemmEpilogue<'_>,
        kernels: Kernels,
    ) -> Result<DeviceBuffer> {
        if kernels == Kernels::Fast
            && let Some(blas) = self.blas()
            && let Some(out) = self.gemm_cublas(blas, shape, a, b, epilogue)?
        {
            return Ok(out);
        }
        self.gemm(shape, a, b, epilogue, GemmLaunch::Auto)
    }

    /// `C = epilogue(A B)` on cuBLAS (row-major C as the column-major `C^T = B^T A^T`); `None`
    /// when a view has no unit stride or a size exceeds cuBLAS's 32-bit arguments.
    fn gemm_cublas(
        &self,
        blas: &CudaBlas,
        shape: GemmShape,
        a: DeviceMat<'_>,
        b: DeviceMat<'_>,
        epilogue: GemmEpilogue<'_>,
    ) -> Result<Option<DeviceBuffer>> {
        let GemmShape { batch, m, n, k } = shape;
        a.check(batch, m, k, "gemm operand A")?;
        b.check(batch, k, n, "gemm operand B")?;
        let dims = (
            i32::try_from(m),
            i32::try_from(n),
            i32::try_from(k),
            i32::try_from(batch),
        );
        let (Ok(mi), Ok(ni), Ok(ki), Ok(bi)) = dims else {
            return Ok(None);
        };
        // B^T is the first cuBLAS operand (n x k), A^T the second (k x m). cuBLAS leaves C
        // unscaled for k = 0: the reproducible kernels take that corner.
        let (Some((op_b, ldb)), Some((op_a, lda)), true) = (
            transposed_operand(k, n, b.row_stride, b.col_stride),
            transposed_operand(m, k, a.row_stride, a.col_stride),
            k > 0,
        ) else {
            return Ok(None);
        };
        let (alpha, beta, c) = match epilogue {
            GemmEpilogue::None => (1.0f32, 0.0f32, None),
            GemmEpilogue::Add(c) => (1.0, 1.0, Some(c)),
            GemmEpilogue::AlphaBeta { alpha, beta, c } => {
                (alpha, if c.is_some() { beta } else { 0.0 }, c)
            }
        };
        // C starts as the epilogue's operand (broadcast), which cuBLAS scales by beta.
        let out = match c {
            Some(c) => {
                c.check(batch, m, n, "gemm epilogue operand")?;
                self.materialize(c, batch, m, n)?
            }
            None => self.alloc(batch * m * n)?,
        };
        if out.is_empty() {
            return Ok(Some(out));
        }
        let stream = self.stream();
        {
            let (pa, _a_sync) = a.buffer.slice().device_ptr(stream);
            let (pb, _b_sync) = b.buffer.slice().device_ptr(stream);
            let (pc, _c_sync) = out.slice().device_ptr(stream);
            let pa = (pa + 4 * a.offset as u64) as *const f32;
            let pb = (pb + 4 * b.offset as u64) as *const f32;
            // SAFETY: the views lie in their buffers (checked by the caller's shapes, as for the
            // reproducible GEMM); C holds batch * m * n; alpha and beta are host values.
            unsafe {
                blas::sgemm_strided_batched(
                    *blas.handle(),
                    op_b,
                    op_a,
                    ni,
                    mi,
                    ki,
                    &alpha,
                    pb,
                    ldb,
                    b.batch_stride as i64,
                    pa,
                    lda,
                    a.batch_stride as i64,
                    &beta,
                    pc as *mut f32,
                    ni,
                    (m * n) as i64,
                    bi,
                )
                .map_err(|e| CudaError::Invalid(format!("cuBLAS SGEMM: {e}")))?;
            }
        }
        Ok(Some(out))
    }
}
