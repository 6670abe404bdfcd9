//! Reproducible batched GEMM on device buffers (contract sections `gemm`, `gemm-epilogue`).
//!
//! `C[b, i, j] = epilogue(sum_k A[b, i, k] * B[b, k, j])`, C dense row-major `[batch, m, n]`.
//! Every [`GemmLaunch`] computes each output in the canonical order (kernels/gemm.cu), so they
//! all give the bits of `samebits_kernels::gemm` on the CPU; the choice is only about speed.

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use crate::backend::{BLOCK, CudaBackend, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::error::{CudaError, Result};

/// A strided batched matrix view of a device buffer: element `(b, r, c)` is
/// `buffer[offset + b * batch_stride + r * row_stride + c * col_stride]` (strides may be 0;
/// swapping the row and column strides transposes).
#[derive(Clone, Copy)]
pub struct DeviceMat<'a> {
    pub buffer: &'a DeviceBuffer,
    pub offset: usize,
    pub batch_stride: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> DeviceMat<'a> {
    /// Dense row-major `[batch, rows, cols]`.
    pub fn row_major(buffer: &'a DeviceBuffer, rows: usize, cols: usize) -> Self {
        DeviceMat {
            buffer,
            offset: 0,
            batch_stride: rows * cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transposed view (no copy).
    pub fn transposed(self) -> Self {
        DeviceMat {
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// The same view with another batch stride (0 shares one matrix across the batch).
    pub fn with_batch_stride(self, batch_stride: usize) -> Self {
        DeviceMat {
            batch_stride,
            ..self
        }
    }

    fn raw(&self) -> SbMat {
        SbMat {
            offset: self.offset as i64,
            batch_stride: self.batch_stride as i64,
            row_stride: self.row_stride as i64,
            col_stride: self.col_stride as i64,
        }
    }

    /// Errors unless every element of a `[batch, rows, cols]` view lies inside the buffer.
    fn check(&self, batch: usize, rows: usize, cols: usize, what: &str) -> Result<()> {
        if batch == 0 || rows == 0 || cols == 0 {
            return Ok(());
        }
        let last = [
            (batch - 1, self.batch_stride),
            (rows - 1, self.row_stride),
            (cols - 1, self.col_stride),
        ]
        .iter()
        .try_fold(self.offset, |acc, &(n, s)| {
            n.checked_mul(s)?.checked_add(acc)
        });
        match last {
            Some(last) if last < self.buffer.len() && last <= i32::MAX as usize * 64 => Ok(()),
            _ => Err(CudaError::Invalid(format!(
                "{what}: a [{batch}, {rows}, {cols}] view does not fit in {} elements",
                self.buffer.len()
            ))),
        }
    }
}

/// What is applied to each finished canonical sum (contract section `gemm-epilogue`).
#[derive(Clone, Copy)]
pub enum GemmEpilogue<'a> {
    /// `out = acc`.
    None,
    /// `out = acc + c[b, i, j]`.
    Add(DeviceMat<'a>),
    /// `out = (alpha * acc) + (beta * c[b, i, j])`; without `c`, `out = alpha * acc`.
    AlphaBeta {
        alpha: f32,
        beta: f32,
        c: Option<DeviceMat<'a>>,
    },
}

/// How the GEMM is launched. Every choice gives the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmLaunch {
    /// [`GemmLaunch::SplitK`] for M <= 8, else a tiled kernel sized to the problem.
    Auto,
    /// 128 x 128 output blocks, 8 x 8 outputs per thread, K steps of 8.
    Tiled128x128,
    /// 128 x 64 output blocks, 8 x 4 outputs per thread, K steps of 16.
    Tiled128x64,
    /// 64 x 64 output blocks, 4 x 4 outputs per thread, K steps of 16.
    Tiled64x64,
    /// Each 64-term tile of each output on its own thread, folded in a second pass (M <= 8).
    SplitK,
}

impl GemmLaunch {
    /// The tiled configurations: kernel name, block rows, block columns, dynamic shared bytes
    /// (the running sums of `SUMS_IN_SHARED` configurations: 256 threads x 64 floats).
    const TILED: [(GemmLaunch, &'static str, usize, usize, u32); 3] = [
        (
            GemmLaunch::Tiled128x128,
            "sb_gemm_tiled_128x128",
            128,
            128,
            256 * 64 * 4,
        ),
        (GemmLaunch::Tiled128x64, "sb_gemm_tiled_128x64", 128, 64, 0),
        (GemmLaunch::Tiled64x64, "sb_gemm_tiled_64x64", 64, 64, 0),
    ];

    /// Every explicit launch shape.
    pub const FORCED: [GemmLaunch; 4] = [
        GemmLaunch::Tiled128x128,
        GemmLaunch::Tiled128x64,
        GemmLaunch::Tiled64x64,
        GemmLaunch::SplitK,
    ];
}

/// The split-K partial kernels (`sb_gemv_tile_partials_<layout>_m<MT>` in kernels/gemm.cu) by
/// B layout, then by row count MT = 1, 2, 4, 8.
const SPLIT_K_KERNELS: [[&str; 4]; 3] = [
    [
        "sb_gemv_tile_partials_n_vec4_m1",
        "sb_gemv_tile_partials_n_vec4_m2",
        "sb_gemv_tile_partials_n_vec4_m4",
        "sb_gemv_tile_partials_n_vec4_m8",
    ],
    [
        "sb_gemv_tile_partials_k_vec4_m1",
        "sb_gemv_tile_partials_k_vec4_m2",
        "sb_gemv_tile_partials_k_vec4_m4",
        "sb_gemv_tile_partials_k_vec4_m8",
    ],
    [
        "sb_gemv_tile_partials_strided_m1",
        "sb_gemv_tile_partials_strided_m2",
        "sb_gemv_tile_partials_strided_m4",
        "sb_gemv_tile_partials_strided_m8",
    ],
];

/// The split-K partial kernel for `m` rows and B's layout, and its columns per thread.
fn split_k_kernel(
    b: &DeviceMat<'_>,
    m: usize,
    n: usize,
    k: usize,
    tiles: usize,
) -> (&'static str, usize) {
    let aligned = |x: usize| x.is_multiple_of(4);
    let base_aligned = aligned(b.offset) && aligned(b.batch_stride);
    // Four columns per thread only when that still leaves many threads.
    let (layout, columns) = if b.col_stride == 1
        && aligned(n)
        && aligned(b.row_stride)
        && base_aligned
        && tiles * n / 4 >= 65_536
    {
        (0, 4)
    } else if b.row_stride == 1
        && b.col_stride != 1
        && aligned(k)
        && aligned(b.col_stride)
        && base_aligned
    {
        (1, 1)
    } else {
        (2, 1)
    };
    let rows = match m {
        1 => 0,
        2 => 1,
        3 | 4 => 2,
        _ => 3,
    };
    (SPLIT_K_KERNELS[layout][rows], columns)
}

/// `SbMat` of kernels/gemm.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SbMat {
    offset: i64,
    batch_stride: i64,
    row_stride: i64,
    col_stride: i64,
}

/// `SbEpilogue` of kernels/gemm.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SbEpilogue {
    view: SbMat,
    alpha: f32,
    beta: f32,
    kind: i32,
}

// SAFETY: #[repr(C)] structs of plain numbers with the layouts of their CUDA counterparts.
unsafe impl DeviceRepr for SbMat {}
// SAFETY: as above.
unsafe impl DeviceRepr for SbEpilogue {}

/// Most rows of the split-K path (`SB_GEMV_MAX_M` in kernels/gemm.cu).
pub const SPLIT_K_MAX_M: usize = 8;

/// The shape of a batched product: `[batch, m, k] x [batch, k, n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl CudaBackend {
    /// The reproducible GEMM; returns C, dense row-major `[batch, m, n]`.
    pub fn gemm(
        &self,
        shape: GemmShape,
        a: DeviceMat<'_>,
        b: DeviceMat<'_>,
        epilogue: GemmEpilogue<'_>,
        how: GemmLaunch,
    ) -> Result<DeviceBuffer> {
        let GemmShape { batch, m, n, k } = shape;
        a.check(batch, m, k, "gemm operand A")?;
        b.check(batch, k, n, "gemm operand B")?;
        if m > i32::MAX as usize || n > i32::MAX as usize || k > i32::MAX as usize || batch > 65_535
        {
            return Err(CudaError::Invalid(format!("gemm: {shape:?} too large")));
        }
        let (raw_epilogue, c_view) = match epilogue {
            GemmEpilogue::None => (SbEpilogue::default(), None),
            GemmEpilogue::Add(c) => (
                SbEpilogue {
                    view: c.raw(),
                    kind: 1,
                    ..Default::default()
                },
                Some(c),
            ),
            GemmEpilogue::AlphaBeta { alpha, beta, c } => (
                SbEpilogue {
                    view: c.map(|c| c.raw()).unwrap_or_default(),
                    alpha,
                    beta,
                    kind: if c.is_some() { 3 } else { 2 },
                },
                c,
            ),
        };
        if let Some(c) = c_view {
            c.check(batch, m, n, "gemm epilogue operand")?;
        }
        let mut out = self.alloc(batch * m * n)?;
        if out.is_empty() {
            return Ok(out);
        }
        let how = match how {
            GemmLaunch::Auto if m <= SPLIT_K_MAX_M => GemmLaunch::SplitK,
            GemmLaunch::Auto if m.div_ceil(128) * n.div_ceil(128) * batch < 132 => {
                GemmLaunch::Tiled64x64
            }
            GemmLaunch::Auto => GemmLaunch::Tiled128x128,
            other => other,
        };
        // The epilogue's c, or any live buffer when there is none (never read).
        let c_buffer = c_view.map_or(a.buffer, |c| c.buffer);
        let (mi, ni, ki, bi) = (m as i32, n as i32, k as i32, batch as i32);
        let (ra, rb) = (a.raw(), b.raw());
        if let Some(&(_, name, rows, cols, shared)) = GemmLaunch::TILED.iter().find(|t| t.0 == how)
        {
            let f = self.function(name)?;
            if shared > 0 {
                f.set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared as i32,
                )?;
            }
            let config = LaunchConfig {
                grid_dim: (
                    n.div_ceil(cols) as u32,
                    m.div_ceil(rows) as u32,
                    batch as u32,
                ),
                block_dim: (256, 1, 1),
                shared_mem_bytes: shared,
            };
            let mut launch = self.stream().launch_builder(&f);
            launch
                .arg(&mi)
                .arg(&ni)
                .arg(&ki)
                .arg(a.buffer.slice())
                .arg(&ra)
                .arg(b.buffer.slice())
                .arg(&rb)
                .arg(out.slice_mut())
                .arg(&raw_epilogue)
                .arg(c_buffer.slice());
            // SAFETY: the views were bounds-checked for the shape; out holds batch*m*n.
            unsafe { launch.launch(config)? };
            return Ok(out);
        }
        if m > SPLIT_K_MAX_M {
            return Err(CudaError::Invalid(format!(
                "split-K GEMM takes at most {SPLIT_K_MAX_M} rows, got {m}"
            )));
        }
        let tiles = k.div_ceil(samebits_kernels::REDUCTION_TILE);
        let mut partials = self.alloc((tiles * batch * m * n).max(1))?;
        if tiles > 0 {
            let (name, columns) = split_k_kernel(&b, m, n, k, tiles);
            let groups = n.div_ceil(columns);
            let config = LaunchConfig {
                grid_dim: (
                    (tiles * groups).div_ceil(BLOCK as usize) as u32,
                    batch as u32,
                    1,
                ),
                block_dim: (BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            let f = self.function(name)?;
            let mut launch = self.stream().launch_builder(&f);
            launch
                .arg(&mi)
                .arg(&ni)
                .arg(&ki)
                .arg(&bi)
                .arg(a.buffer.slice())
                .arg(&ra)
                .arg(b.buffer.slice())
                .arg(&rb)
                .arg(partials.slice_mut());
            // SAFETY: views bounds-checked; partials holds tiles*batch*m*n.
            unsafe { launch.launch(config)? };
        }
        let f = self.function("sb_gemv_fold")?;
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(&mi)
            .arg(&ni)
            .arg(&ki)
            .arg(&bi)
            .arg(partials.slice())
            .arg(out.slice_mut())
            .arg(&raw_epilogue)
            .arg(c_buffer.slice());
        let blocks = (batch * m * n).div_ceil(BLOCK as usize) as u32;
        // SAFETY: reads the partials written above, writes batch*m*n outputs.
        unsafe { launch.launch(launch_1d(blocks, 0))? };
        Ok(out)
    }
}
