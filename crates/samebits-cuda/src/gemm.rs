//! Reproducible batched GEMM on device buffers (contract sections `gemm`, `gemm-epilogue`).
//!
//! `C[b, i, j] = epilogue(sum_k A[b, i, k] * B[b, k, j])`, C dense row-major `[batch, m, n]`.
//! Every [`GemmLaunch`] computes each output in the canonical order (kernels/gemm.cu), so they
//! all give the bits of `samebits_kernels::gemm` on the CPU; the choice is only about speed.

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{LaunchConfig, PushKernelArg};

use samebits_kernels::REDUCTION_TILE;

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::{DeviceBuffer, DeviceBytes};
use crate::device_abi::device_struct;
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
    pub(crate) fn check(&self, batch: usize, rows: usize, cols: usize, what: &str) -> Result<()> {
        check_view(self.raw(), self.buffer.len(), batch, rows, cols, what)
    }
}

/// Errors unless every element of a `[batch, rows, cols]` view lies inside `len` elements.
fn check_view(
    view: SbMat,
    len: usize,
    batch: usize,
    rows: usize,
    cols: usize,
    what: &str,
) -> Result<()> {
    if batch == 0 || rows == 0 || cols == 0 {
        return Ok(());
    }
    let last = [
        (batch - 1, view.batch_stride as usize),
        (rows - 1, view.row_stride as usize),
        (cols - 1, view.col_stride as usize),
    ]
    .iter()
    .try_fold(view.offset as usize, |acc, &(n, s)| {
        n.checked_mul(s)?.checked_add(acc)
    });
    match last {
        Some(last) if last < len && last <= i32::MAX as usize * 64 => Ok(()),
        _ => Err(CudaError::Invalid(format!(
            "{what}: a [{batch}, {rows}, {cols}] view does not fit in {len} elements"
        ))),
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
    /// [`GemmLaunch::SplitK`] for M <= 8; else 128 x 256 blocks when they give at least 7/8 of
    /// the multiprocessors a block (and fit its shared memory), else 64 x 128 blocks when they
    /// give every multiprocessor one, else 64 x 64 (the fastest at the shapes NOTES.md lists),
    /// as [`GemmLaunch::SplitTiles`] when even those leave multiprocessors idle and K > 64.
    Auto,
    /// 128 x 256 output blocks (256 threads, one block per SM), 16 x 8 outputs per thread, K
    /// steps of 16 in a 3-deep ring.
    Warp128x256,
    /// 64 x 128 output blocks (128 threads, three blocks per SM), 8 x 8 outputs per thread, K
    /// steps of 8 in a 4-deep ring.
    Warp64x128,
    /// 64 x 64 output blocks (128 threads), 8 x 4 outputs per thread, K steps of 8 in a 4-deep
    /// ring.
    Warp64x64,
    /// Each 64-term tile of each output on its own thread, folded in the same kernel (M <= 8).
    SplitK,
    /// 64 x 64 output blocks, one block per 64-term tile of them, the tiles' partials folded
    /// by a second launch (outputs of too few blocks to fill the GPU; K > 64).
    SplitTiles,
}

/// A warp-tiled configuration (kernels/gemm.cu `sb_gemm_warp`): kernel name stem, block rows,
/// block columns, threads, K step, ring stages.
struct Tiled {
    launch: GemmLaunch,
    stem: &'static str,
    rows: usize,
    cols: usize,
    threads: u32,
    k_step: usize,
    stages: usize,
}

impl Tiled {
    /// Dynamic shared memory of a block: the operand ring, then one running sum per output
    /// (kernels/gemm.cu).
    fn shared_bytes(&self) -> usize {
        4 * (self.stages * self.k_step * (self.rows + 4 + self.cols + 4) + self.rows * self.cols)
    }

    /// Thread blocks of a `[batch, m, n]` output.
    fn blocks(&self, shape: GemmShape) -> usize {
        shape.m.div_ceil(self.rows) * shape.n.div_ceil(self.cols) * shape.batch
    }
}

impl GemmLaunch {
    const TILED: [Tiled; 3] = [
        Tiled {
            launch: GemmLaunch::Warp128x256,
            stem: "sb_gemm_warp_128x256",
            rows: 128,
            cols: 256,
            threads: 256,
            k_step: 16,
            stages: 3,
        },
        Tiled {
            launch: GemmLaunch::Warp64x128,
            stem: "sb_gemm_warp_64x128",
            rows: 64,
            cols: 128,
            threads: 128,
            k_step: 8,
            stages: 4,
        },
        Tiled {
            launch: GemmLaunch::Warp64x64,
            stem: "sb_gemm_warp_64x64",
            rows: 64,
            cols: 64,
            threads: 128,
            k_step: 8,
            stages: 4,
        },
    ];

    /// Every explicit launch shape.
    pub const FORCED: [GemmLaunch; 5] = [
        GemmLaunch::Warp128x256,
        GemmLaunch::Warp64x128,
        GemmLaunch::Warp64x64,
        GemmLaunch::SplitK,
        GemmLaunch::SplitTiles,
    ];

    fn tiled(self) -> &'static Tiled {
        let launch = match self {
            GemmLaunch::SplitTiles => GemmLaunch::Warp64x64,
            other => other,
        };
        GemmLaunch::TILED
            .iter()
            .find(|t| t.launch == launch)
            .expect("every launch but Auto and SplitK is tiled")
    }

    /// The kernel names of every tiled configuration (element-copied and 16-byte-copied B).
    pub fn kernel_names() -> Vec<String> {
        GemmLaunch::TILED
            .iter()
            .flat_map(|t| [format!("{}_e", t.stem), format!("{}_v", t.stem)])
            .collect()
    }
}

/// Weights of the split-K GEMV: f32 or bf16 elements.
#[derive(Clone, Copy)]
enum GemvWeights<'a> {
    F32(&'a DeviceBuffer),
    Bf16(&'a DeviceBytes),
}

/// A bf16 matrix view of raw device bytes (2 bytes per element, little-endian bf16): element
/// `(b, r, c)` is element `offset + b * batch_stride + r * row_stride + c * col_stride`.
#[derive(Clone, Copy)]
pub struct DeviceMatBf16<'a> {
    pub bytes: &'a DeviceBytes,
    pub offset: usize,
    pub batch_stride: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

/// Most threads (column or 4-column group x tile) per GEMV block (`__launch_bounds__` in
/// kernels/gemm.cu).
const GEMV_MAX_CHAINS: usize = 128;

/// From this many columns, `[k, n]` GEMV weights are read directly, 4 columns per thread.
const GEMV_WIDE_N: usize = 8192;

device_struct! {
    /// A strided batched matrix view: element (b, r, c) at offset + b*batch + r*row + c*col.
    pub(crate) struct SbMat {
        offset: i64,
        batch_stride: i64,
        row_stride: i64,
        col_stride: i64,
    }
}

device_struct! {
    /// contract: gemm-epilogue. kind 0: acc; 1: acc + c; 2: alpha * acc;
    /// 3: (alpha * acc) + (beta * c). `c` is indexed (b, i, j) through `view`.
    pub(crate) struct SbEpilogue {
        view: SbMat,
        alpha: f32,
        beta: f32,
        kind: i32,
    }
}

/// Most rows of the split-K path (`SB_GEMV_MAX_M` of the device ABI).
pub const SPLIT_K_MAX_M: usize = 8;

/// Most workspace bytes (the tiles' partials) an automatic [`GemmLaunch::SplitTiles`] takes.
const SPLIT_TILES_MAX_BYTES: usize = 64 << 20;

/// The shape of a batched product: `[batch, m, k] x [batch, k, n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// Checks and converts an epilogue: its kernel struct and its `c` view, if any.
fn raw_epilogue<'a>(
    epilogue: GemmEpilogue<'a>,
    batch: usize,
    m: usize,
    n: usize,
) -> Result<(SbEpilogue, Option<DeviceMat<'a>>)> {
    let (raw, c_view) = match epilogue {
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
    Ok((raw, c_view))
}

fn check_dims(shape: GemmShape) -> Result<()> {
    let GemmShape { batch, m, n, k } = shape;
    if m > i32::MAX as usize || n > i32::MAX as usize || k > i32::MAX as usize || batch > 65_535 {
        return Err(CudaError::Invalid(format!("gemm: {shape:?} too large")));
    }
    Ok(())
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
        check_dims(shape)?;
        let (raw_epilogue, c_view) = raw_epilogue(epilogue, batch, m, n)?;
        let how = match how {
            GemmLaunch::Auto if m <= SPLIT_K_MAX_M => GemmLaunch::SplitK,
            GemmLaunch::Auto => {
                // Measured on an H100 (NOTES.md): 128 x 256 blocks win down to one partial
                // wave (1024 x 4096 x 4096: 128 blocks on 132 SMs); below that, the smaller
                // blocks keep the SMs busy.
                let sms = self.sm_count();
                let big = GemmLaunch::Warp128x256.tiled();
                if 8 * big.blocks(shape) >= 7 * sms
                    && big.shared_bytes() <= self.max_shared_per_block()
                {
                    GemmLaunch::Warp128x256
                } else if GemmLaunch::Warp64x128.tiled().blocks(shape) >= sms {
                    GemmLaunch::Warp64x128
                } else if GemmLaunch::Warp64x64.tiled().blocks(shape) < sms
                    && k > REDUCTION_TILE
                    && 4 * k.div_ceil(REDUCTION_TILE) * batch * m * n <= SPLIT_TILES_MAX_BYTES
                {
                    GemmLaunch::SplitTiles
                } else {
                    GemmLaunch::Warp64x64
                }
            }
            other => other,
        };
        if how == GemmLaunch::SplitK {
            return self.gemv(
                shape,
                a,
                GemvWeights::F32(b.buffer),
                b.raw(),
                raw_epilogue,
                c_view,
            );
        }
        let mut out = self.alloc(batch * m * n)?;
        if out.is_empty() {
            return Ok(out);
        }
        let tiles = k.div_ceil(REDUCTION_TILE);
        let split = how == GemmLaunch::SplitTiles && tiles > 1;
        if split && batch * tiles > 65_535 {
            return Err(CudaError::Invalid(format!(
                "gemm {how:?}: {batch} x {tiles} tiles exceed a grid's z extent"
            )));
        }
        // The tiles' partials (tile-major), or the output itself when there is no split.
        let mut partials = match split {
            true => Some(self.alloc(tiles * batch * m * n)?),
            false => None,
        };
        let tiled = how.tiled();
        // 16-byte copies of B: unit stride along n, every row start 16-byte aligned.
        let aligned = |x: usize| x.is_multiple_of(4);
        let b_vec = b.col_stride == 1
            && aligned(n)
            && aligned(b.row_stride)
            && aligned(b.offset)
            && aligned(b.batch_stride);
        let name = format!("{}_{}", tiled.stem, if b_vec { "v" } else { "e" });
        let f = self.function(&name)?;
        let shared = tiled.shared_bytes();
        if shared > self.max_shared_per_block() {
            return Err(CudaError::Invalid(format!(
                "gemm {how:?}: {shared} bytes of shared memory per block, the device has {}",
                self.max_shared_per_block()
            )));
        }
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            shared as i32,
        )?;
        // Shared memory before L1 (a hint), so that three blocks of Warp64x128 fit an SM.
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            100,
        )?;
        let config = LaunchConfig {
            grid_dim: (
                n.div_ceil(tiled.cols) as u32,
                m.div_ceil(tiled.rows) as u32,
                (if split { batch * tiles } else { batch }) as u32,
            ),
            block_dim: (tiled.threads, 1, 1),
            shared_mem_bytes: shared as u32,
        };
        // The epilogue's c, or any live buffer when there is none (never read).
        let c_buffer = c_view.map_or(a.buffer, |c| c.buffer);
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);
        let (batches, split_tiles) = (batch as i32, i32::from(split));
        let (ra, rb) = (a.raw(), b.raw());
        // A split launch stores raw partials: its epilogue is applied by the fold.
        let tile_epilogue = match split {
            true => SbEpilogue::default(),
            false => raw_epilogue,
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
            .arg(partials.as_mut().unwrap_or(&mut out).slice_mut())
            .arg(&tile_epilogue)
            .arg(c_buffer.slice())
            .arg(&batches)
            .arg(&split_tiles);
        // SAFETY: the views were bounds-checked for the shape; the destination holds batch*m*n
        // floats, or tiles times that for a split launch (grid z = batch * tiles).
        unsafe { launch.launch(config)? };
        if let Some(partials) = &partials {
            let total = (batch * m * n) as i64;
            let tiles_i = tiles as i32;
            let fold = self.function("sb_gemm_fold_tiles")?;
            let mut launch = self.stream().launch_builder(&fold);
            launch
                .arg(partials.slice())
                .arg(&tiles_i)
                .arg(&total)
                .arg(&mi)
                .arg(&ni)
                .arg(out.slice_mut())
                .arg(&raw_epilogue)
                .arg(c_buffer.slice());
            // SAFETY: partials holds tiles * total floats, out holds total, the epilogue's c
            // view was bounds-checked for [batch, m, n].
            unsafe { launch.launch(launch_1d(blocks_for(batch * m * n), 0))? };
        }
        Ok(out)
    }

    /// The reproducible product of f32 rows `a` (`m <= 8`) with bf16 weights `b`, each weight
    /// widened exactly to f32: the bits of [`CudaBackend::gemm`] on the widened weights.
    pub fn gemv_bf16(
        &self,
        shape: GemmShape,
        a: DeviceMat<'_>,
        b: DeviceMatBf16<'_>,
        epilogue: GemmEpilogue<'_>,
    ) -> Result<DeviceBuffer> {
        let GemmShape { batch, m, n, k } = shape;
        a.check(batch, m, k, "gemv operand A")?;
        let raw = SbMat {
            offset: b.offset as i64,
            batch_stride: b.batch_stride as i64,
            row_stride: b.row_stride as i64,
            col_stride: b.col_stride as i64,
        };
        check_view(raw, b.bytes.len() / 2, batch, k, n, "gemv bf16 weights")?;
        check_dims(shape)?;
        let (raw_epilogue, c_view) = raw_epilogue(epilogue, batch, m, n)?;
        self.gemv(
            shape,
            a,
            GemvWeights::Bf16(b.bytes),
            raw,
            raw_epilogue,
            c_view,
        )
    }

    /// The split-K GEMV (kernels/gemm.cu `sb_gemv_*`): one launch. Launch shape (columns per
    /// block, tiles per block) from the device's multiprocessor count; never changes bits.
    fn gemv(
        &self,
        shape: GemmShape,
        a: DeviceMat<'_>,
        b: GemvWeights<'_>,
        rb: SbMat,
        raw_epilogue: SbEpilogue,
        c_view: Option<DeviceMat<'_>>,
    ) -> Result<DeviceBuffer> {
        let GemmShape { batch, m, n, k } = shape;
        if m > SPLIT_K_MAX_M {
            return Err(CudaError::Invalid(format!(
                "split-K GEMM takes at most {SPLIT_K_MAX_M} rows, got {m}"
            )));
        }
        let mut out = self.alloc(batch * m * n)?;
        if out.is_empty() {
            return Ok(out);
        }
        let (elem, stem) = match b {
            GemvWeights::F32(_) => (4usize, "f32"),
            GemvWeights::Bf16(_) => (2, "bf16"),
        };
        let per16 = 16 / elem;
        let fits16 = |x: i64| x % per16 as i64 == 0;
        let base16 = fits16(rb.offset) && fits16(rb.batch_stride);
        let sms = self.sm_count();
        let tiles = k.div_ceil(REDUCTION_TILE);
        let cb = if n.div_ceil(16) >= 2 * sms { 16 } else { 8 };
        // How the weights travel (kernels/gemm.cu SB_GEMV_*): staged through shared memory in
        // 16-byte copies along the unit-stride axis when aligned, else read directly.
        let layout = if rb.row_stride == 1
            && rb.col_stride != 1
            && fits16(rb.col_stride)
            && base16
            && k.is_multiple_of(per16)
        {
            "nk"
        } else if rb.col_stride == 1 && fits16(rb.row_stride) && base16 && n.is_multiple_of(per16) {
            "kn"
        } else {
            "direct"
        };
        // Wide `[k, n]` weights are read directly, 4 columns per thread (kernels/gemm.cu
        // SB_GEMV_KN4): staging them capped the blocks per SM (NOTES.md).
        let (layout, cb) = if layout == "kn" && n >= GEMV_WIDE_N {
            ("kn4", 128)
        } else {
            (layout, cb)
        };
        let lanes = if layout == "kn4" { cb / 4 } else { cb };
        let groups = n.div_ceil(cb) * batch;
        let fill = if groups >= sms {
            1
        } else {
            (2 * sms).div_ceil(groups)
        };
        let splits = tiles
            .div_ceil(GEMV_MAX_CHAINS / lanes)
            .max(fill.min(tiles))
            .max(1);
        let tps = tiles.div_ceil(splits).max(1);
        let splits = tiles.div_ceil(tps).max(1);
        let rows = m.next_power_of_two();
        let name = format!("sb_gemv_{layout}_{stem}_m{rows}");
        let tile = samebits_kernels::REDUCTION_TILE;
        let staged_bytes = match layout {
            "nk" => tps * cb * (tile * elem + 16),
            "kn" => tps * (tile + 1) * cb * elem,
            _ => 0,
        };
        let shared = staged_bytes + 4 * rows * tps * cb + 4 * rows * tps * (tile + 1);
        let f = self.function(&name)?;
        if shared > 48 * 1024 {
            f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared as i32,
            )?;
        }
        let threads = (lanes * tps).div_ceil(32) * 32;
        let config = LaunchConfig {
            grid_dim: (n.div_ceil(cb) as u32, splits as u32, batch as u32),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: shared as u32,
        };
        let mut workspace = self.alloc(if splits > 1 { tiles * batch * m * n } else { 1 })?;
        let c_buffer = c_view.map_or(a.buffer, |c| c.buffer);
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);
        let (cbi, tpsi) = (cb as i32, tps as i32);
        let ra = a.raw();
        self.with_tickets(groups, |tickets| {
            let mut launch = self.stream().launch_builder(&f);
            launch
                .arg(&mi)
                .arg(&ni)
                .arg(&ki)
                .arg(&cbi)
                .arg(&tpsi)
                .arg(a.buffer.slice())
                .arg(&ra);
            match b {
                GemvWeights::F32(buffer) => launch.arg(buffer.slice()),
                GemvWeights::Bf16(bytes) => launch.arg(bytes.slice()),
            };
            launch
                .arg(&rb)
                .arg(out.slice_mut())
                .arg(&raw_epilogue)
                .arg(c_buffer.slice())
                .arg(workspace.slice_mut())
                .arg(tickets);
            // SAFETY: views bounds-checked; the workspace holds tiles*batch*m*n when split;
            // `groups` ticket counters exist and are zero.
            unsafe { launch.launch(config)? };
            Ok(())
        })?;
        Ok(out)
    }
}
