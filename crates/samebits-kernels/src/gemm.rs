//! Reproducible batched GEMM `C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]` on strided operands.
//!
//! Implements contract section `gemm` (docs/contract.md): every output is the canonical dot
//! product (`canonical-sum`) of row `i` of A and column `j` of B in index order of k, then the
//! epilogue. Structure (BLIS / Goto): the output is cut into `MC x NC` blocks, the parallel tasks
//! (rayon), each of which walks K in blocks of `KC` (a multiple of 64), packs its A and B blocks
//! and runs the ISA microkernel over `MR x NR` register tiles. Hardware picks only the tiling,
//! never the order, so every ISA, thread count and M gives the same bits. An operand that several
//! tasks would each pack again is packed once up front (`PackedA`, `PackedB`); [`PackedB`] is
//! also public, so that a constant weight is packed once and reused by [`gemm_packed_b`]. Row
//! vectors (M = 1) times a matrix with unit column stride, and up to 8 rows times a matrix
//! stored transposed (weights `[N, K]`), take paths without packing (`gemv.rs`), same order.
//! Inside the crate, `gemm_serial_tiled` reduces in tiles shorter than 64 (a divisor of 64),
//! for transposed convolutions that skip their zero terms (`conv.rs`).

mod gemv;
mod microkernel;
#[cfg(target_arch = "aarch64")]
mod microkernel_neon;
#[cfg(target_arch = "x86_64")]
mod microkernel_x86;
mod pack;

use std::cell::Cell;

use rayon::prelude::*;

use crate::canonical::REDUCTION_TILE;
use crate::isa::Isa;
use microkernel::{KernelFn, MAX_TILE, Microkernel};
pub use pack::GemmInput;

/// A strided, optionally batched matrix view: element `(b, i, j)` is
/// `data[offset + b * batch_stride + i * row_stride + j * col_stride]`.
///
/// Strides may be zero (broadcast), and swapping `row_stride` and `col_stride` transposes.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a, T> {
    pub data: &'a [T],
    pub offset: usize,
    pub batch_stride: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a, T> MatRef<'a, T> {
    /// Dense row-major `[batch, rows, cols]` starting at `data[0]`.
    pub fn row_major(data: &'a [T], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            offset: 0,
            batch_stride: rows * cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transposed view (rows and columns swapped, no copy).
    pub fn transposed(self) -> Self {
        MatRef {
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// The same view with another batch stride (0 shares one matrix across the batch).
    pub fn with_batch_stride(self, batch_stride: usize) -> Self {
        MatRef {
            batch_stride,
            ..self
        }
    }

    /// The same view starting `offset` elements into `data`.
    pub fn with_offset(self, offset: usize) -> Self {
        MatRef { offset, ..self }
    }

    /// Index into `data` of element `(b, i, j)`.
    pub fn index(&self, b: usize, i: usize, j: usize) -> usize {
        self.offset + b * self.batch_stride + i * self.row_stride + j * self.col_stride
    }

    /// Panics unless every element of a `[batch, rows, cols]` view lies inside `data`.
    fn check_bounds(&self, batch: usize, rows: usize, cols: usize, what: &str) {
        if batch == 0 || rows == 0 || cols == 0 {
            return;
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
        assert!(
            last.is_some_and(|last| last < self.data.len()),
            "{what}: a [{batch}, {rows}, {cols}] view with offset {} and strides ({}, {}, {}) \
             does not fit in {} elements",
            self.offset,
            self.batch_stride,
            self.row_stride,
            self.col_stride,
            self.data.len()
        );
    }
}

/// What is applied to each finished canonical sum `acc` before it is stored
/// (contract section `gemm-epilogue`). `c` views are indexed `(b, i, j)` like the output and
/// may broadcast through zero strides (a bias per column: `row_stride = 0, col_stride = 1`).
#[derive(Clone, Copy, Debug)]
pub enum Epilogue<'a> {
    /// `out = acc`.
    None,
    /// `out = acc + c[b, i, j]`.
    Add(MatRef<'a, f32>),
    /// `out = (alpha * acc) + (beta * c[b, i, j])`, two roundings of products and one of the
    /// sum, no fma; without `c`, `out = alpha * acc`.
    AlphaBeta {
        alpha: f32,
        beta: f32,
        c: Option<MatRef<'a, f32>>,
    },
}

impl Epilogue<'_> {
    fn apply(&self, acc: f32, b: usize, i: usize, j: usize) -> f32 {
        match self {
            Epilogue::None => acc,
            Epilogue::Add(c) => acc + c.data[c.index(b, i, j)],
            Epilogue::AlphaBeta { alpha, beta, c } => match c {
                Some(c) => (alpha * acc) + (beta * c.data[c.index(b, i, j)]),
                None => alpha * acc,
            },
        }
    }

    fn check_bounds(&self, batch: usize, m: usize, n: usize) {
        match self {
            Epilogue::None | Epilogue::AlphaBeta { c: None, .. } => {}
            Epilogue::Add(c) | Epilogue::AlphaBeta { c: Some(c), .. } => {
                c.check_bounds(batch, m, n, "gemm epilogue operand")
            }
        }
    }
}

/// Reduction columns per packed block: a whole number of reduction tiles.
const KC: usize = 4 * REDUCTION_TILE;
/// Output rows per task (a multiple of every ISA's `MR`).
const MC: usize = 96;
/// Most output columns per task (a multiple of every ISA's `NR`).
const NC_MAX: usize = 512;
/// Fewest output columns per task when narrowing blocks to feed every thread.
const NC_MIN: usize = 64;
/// Output columns per task of the row-vector path.
const GEMV_COLUMNS_PER_TASK: usize = 128;
/// Most floats of A (or B) packed once for all column (row) blocks; a larger operand is packed
/// per task.
const PREPACK_MAX: usize = 1 << 22;

/// `out[b, i, j] = sum_k a[b, i, k] * b[b, k, j]` in the canonical order, `out` dense row-major
/// `[batch, m, n]`.
pub fn gemm_f32(
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<'_, f32>,
    b: MatRef<'_, f32>,
    out: &mut [f32],
) {
    gemm(batch, m, n, k, a, b, Epilogue::None, out);
}

/// [`gemm_f32`] for f32, f16 or bf16 operands (converted to f32 exactly), followed by an
/// [`Epilogue`].
#[allow(clippy::too_many_arguments)]
pub fn gemm<T: GemmInput>(
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    epilogue: Epilogue<'_>,
    out: &mut [f32],
) {
    assert_eq!(
        out.len(),
        batch * m * n,
        "gemm: output length must be batch * m * n"
    );
    a.check_bounds(batch, m, k, "gemm operand A");
    b.check_bounds(batch, k, n, "gemm operand B");
    epilogue.check_bounds(batch, m, n);
    if out.is_empty() {
        return;
    }
    let isa = Isa::active();
    if m == 1 && gemv::try_row_times_matrix(isa, n, k, &a, &b, &epilogue, out) {
        return;
    }
    if m <= gemv::TRANSPOSED_MAX_ROWS
        && gemv::try_rows_times_transposed(isa, m, n, k, &a, &b, &epilogue, out)
    {
        return;
    }
    let kernel = Microkernel::for_isa(isa);
    let tiling = Tiling::new(batch, m, n);
    // Several row blocks would each pack the same B columns: pack them once when B is one
    // matrix for the whole batch.
    let packed_b =
        (tiling.row_blocks > 1 && (batch == 1 || b.batch_stride == 0) && k * n <= PREPACK_MAX)
            .then(|| PackedB::pack(kernel, isa, k, n, &b));
    let b_source = match &packed_b {
        Some(packed) => BSource::Packed(packed),
        None => BSource::Strided(&b),
    };
    run_tasks(&kernel, &tiling, k, &a, &b_source, &epilogue, out);
}

/// `out[b, i, j] = sum_k a[b, i, k] * packed[k, j]` (the same B for every batch entry) in the
/// canonical order, then the epilogue: [`gemm`] with B packed once by [`PackedB::new`] and
/// reused across calls. The same bits as [`gemm`]. When the active ISA is not the one `b` was
/// packed for, a copy is repacked for this call.
pub fn gemm_packed_b<T: GemmInput>(
    batch: usize,
    m: usize,
    a: MatRef<'_, T>,
    b: &PackedB,
    epilogue: Epilogue<'_>,
    out: &mut [f32],
) {
    let (n, k) = (b.n, b.k);
    assert_eq!(
        out.len(),
        batch * m * n,
        "gemm_packed_b: output length must be batch * m * n"
    );
    a.check_bounds(batch, m, k, "gemm operand A");
    epilogue.check_bounds(batch, m, n);
    if out.is_empty() {
        return;
    }
    let isa = Isa::active();
    let repacked;
    let b = if b.isa == isa {
        b
    } else {
        repacked = b.repacked_for(isa);
        &repacked
    };
    let tiling = Tiling::new(batch, m, n);
    run_tasks(
        &b.kernel,
        &tiling,
        k,
        &a,
        &BSource::Packed(b),
        &epilogue,
        out,
    );
}

/// How a product's output is cut into parallel tasks (tiling only, never order).
struct Tiling {
    batch: usize,
    m: usize,
    n: usize,
    row_blocks: usize,
    nc: usize,
    col_blocks: usize,
}

impl Tiling {
    fn new(batch: usize, m: usize, n: usize) -> Tiling {
        let row_blocks = m.div_ceil(MC);
        // Narrower column blocks until every thread has a few tasks.
        let mut nc = NC_MAX;
        while nc > NC_MIN && batch * row_blocks * n.div_ceil(nc) < 4 * rayon::current_num_threads()
        {
            nc /= 2;
        }
        Tiling {
            batch,
            m,
            n,
            row_blocks,
            nc,
            col_blocks: n.div_ceil(nc),
        }
    }
}

/// Runs the tasks of a bounds-checked product into the dense `[batch, m, n]` output. With
/// several column blocks, A is packed once instead of once per block.
fn run_tasks<T: GemmInput>(
    kernel: &Microkernel,
    tiling: &Tiling,
    k: usize,
    a: &MatRef<'_, T>,
    b: &BSource<'_, '_, T>,
    epilogue: &Epilogue<'_>,
    out: &mut [f32],
) {
    let Tiling {
        batch,
        m,
        n,
        row_blocks,
        nc,
        col_blocks,
    } = *tiling;
    let packed_a = (col_blocks > 1 && batch * m * k <= PREPACK_MAX)
        .then(|| PackedA::new(*kernel, batch, m, k, a));
    let a_source = match &packed_a {
        Some(packed) => ASource::Packed(packed),
        None => ASource::Strided(a),
    };
    let layout = OutLayout {
        ptr: out.as_mut_ptr(),
        batch_stride: m * n,
        row_stride: n,
    };
    (0..batch * row_blocks * col_blocks)
        .into_par_iter()
        .for_each(|task| {
            let bi = task / (row_blocks * col_blocks);
            let row0 = (task / col_blocks % row_blocks) * MC;
            let col0 = (task % col_blocks) * nc;
            let block = OutBlock {
                batch: bi,
                row0,
                rows: MC.min(m - row0),
                col0,
                cols: nc.min(n - col0),
            };
            // SAFETY: tasks own disjoint (batch, row range, column range) blocks of `out`, which
            // holds `batch * m * n` floats laid out as `layout` says and outlives the loop.
            unsafe {
                gemm_block(
                    kernel,
                    &block,
                    (k, REDUCTION_TILE),
                    &a_source,
                    b,
                    epilogue,
                    layout,
                )
            };
        });
}

/// Where a product is written: element `(b, i, j)` at `ptr + b * batch_stride + i * row_stride
/// + j`, shared by the tasks, each of which writes only its own block.
#[derive(Clone, Copy)]
pub(crate) struct OutLayout {
    pub ptr: *mut f32,
    pub batch_stride: usize,
    pub row_stride: usize,
}
impl OutLayout {
    /// The same layout with column 0 moved to column `col0`.
    pub(crate) fn shifted_to_column(self, col0: usize) -> OutLayout {
        OutLayout {
            ptr: self.ptr.wrapping_add(col0),
            ..self
        }
    }
}

// SAFETY: used only for disjoint per-task blocks (see `gemm` and `gemm_serial`).
unsafe impl Send for OutLayout {}
// SAFETY: as above.
unsafe impl Sync for OutLayout {}

/// One task's block of the output.
struct OutBlock {
    batch: usize,
    row0: usize,
    rows: usize,
    col0: usize,
    cols: usize,
}

/// A `[batch, m, k]` operand packed once into the microkernel panels of one ISA (packing only
/// copies and converts, contract section `gemm`). For batch `b` and the k-block starting at `k0`
/// (width `kc`), the panels of all rows (`[panel][kc][mr]`, zero rows past `m`) start at
/// `b * m_pad * k + k0 * m_pad`.
pub(crate) struct PackedA {
    kernel: Microkernel,
    data: Vec<f32>,
    batch: usize,
    m: usize,
    m_pad: usize,
    k: usize,
}

impl PackedA {
    /// Packs `a` for `kernel`, in parallel over (batch, k-block).
    fn new<T: GemmInput>(
        kernel: Microkernel,
        batch: usize,
        m: usize,
        k: usize,
        a: &MatRef<'_, T>,
    ) -> PackedA {
        let m_pad = m.div_ceil(kernel.mr) * kernel.mr;
        let mut data = vec![0.0f32; batch * m_pad * k];
        let mut pieces = Vec::new();
        let mut rest = &mut data[..];
        for bi in 0..batch {
            for k0 in (0..k).step_by(KC) {
                let kc = KC.min(k - k0);
                let (piece, tail) = rest.split_at_mut(m_pad * kc);
                pieces.push((bi, k0, kc, piece));
                rest = tail;
            }
        }
        pieces.into_par_iter().for_each(|(bi, k0, kc, piece)| {
            pack::pack_a(a, bi, 0, m, k0, kc, kernel.mr, piece);
        });
        PackedA {
            kernel,
            data,
            batch,
            m,
            m_pad,
            k,
        }
    }

    /// Packs a `[batch, m, k]` operand for the ISA active on this thread.
    pub(crate) fn for_active_isa<T: GemmInput>(
        batch: usize,
        m: usize,
        k: usize,
        a: &MatRef<'_, T>,
    ) -> PackedA {
        a.check_bounds(batch, m, k, "gemm operand A");
        PackedA::new(Microkernel::for_isa(Isa::active()), batch, m, k, a)
    }

    /// Rows per microkernel panel: a caller splitting the rows starts each part at a multiple.
    pub(crate) fn mr(&self) -> usize {
        self.kernel.mr
    }

    /// The panels of rows `row0 .. row0 + rows` (`row0` a multiple of `mr`) of one k-block.
    fn panels(&self, batch: usize, k0: usize, kc: usize, row0: usize, rows: usize) -> &[f32] {
        let mr = self.kernel.mr;
        let start = batch * self.m_pad * self.k + k0 * self.m_pad + row0 / mr * kc * mr;
        &self.data[start..start + rows.div_ceil(mr) * kc * mr]
    }
}

/// Where a task's A panels come from.
enum ASource<'s, 'a, T> {
    /// Packed by the task, block by block.
    Strided(&'s MatRef<'a, T>),
    /// Packed once for the whole product.
    Packed(&'s PackedA),
}

/// A `[k, n]` matrix packed once into the microkernel panels of one ISA, for [`gemm_packed_b`]
/// (a constant weight packed when a model is loaded). Packing only copies and converts to f32
/// exactly (contract section `gemm`). For the k-block starting at `k0` (width `kc`), panel `p`
/// (columns `p * nr ..`, zero columns past `n`) is `[kc][nr]` at `k0 * n_pad + p * kc * nr`.
pub struct PackedB {
    kernel: Microkernel,
    isa: Isa,
    data: Vec<f32>,
    k: usize,
    n: usize,
    n_pad: usize,
}

impl std::fmt::Debug for PackedB {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedB")
            .field("isa", &self.isa)
            .field("k", &self.k)
            .field("n", &self.n)
            .finish()
    }
}

impl PackedB {
    /// Packs batch entry 0 of `b` (a `[k, n]` view, any strides) for the ISA active on this
    /// thread.
    pub fn new<T: GemmInput>(k: usize, n: usize, b: MatRef<'_, T>) -> PackedB {
        b.check_bounds(1, k, n, "PackedB operand");
        let isa = Isa::active();
        PackedB::pack(Microkernel::for_isa(isa), isa, k, n, &b)
    }

    /// Reduction length (rows of B).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Output columns (columns of B).
    pub fn n(&self) -> usize {
        self.n
    }

    /// The ISA whose panels this holds.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Packs batch entry 0 of a bounds-checked `b`, in parallel over (k-block, column block).
    fn pack<T: GemmInput>(
        kernel: Microkernel,
        isa: Isa,
        k: usize,
        n: usize,
        b: &MatRef<'_, T>,
    ) -> PackedB {
        let nr = kernel.nr;
        let n_pad = n.div_ceil(nr) * nr;
        let mut data = vec![0.0f32; k * n_pad];
        let mut pieces = Vec::new();
        let mut rest = &mut data[..];
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            for col0 in (0..n).step_by(NC_MAX) {
                let cols = NC_MAX.min(n - col0);
                let (piece, tail) = rest.split_at_mut(cols.div_ceil(nr) * nr * kc);
                pieces.push((k0, kc, col0, cols, piece));
                rest = tail;
            }
        }
        pieces
            .into_par_iter()
            .for_each(|(k0, kc, col0, cols, piece)| {
                pack::pack_b(b, 0, k0, kc, col0, cols, nr, piece);
            });
        PackedB {
            kernel,
            isa,
            data,
            k,
            n,
            n_pad,
        }
    }

    /// The same matrix packed for `isa`.
    fn repacked_for(&self, isa: Isa) -> PackedB {
        let nr = self.kernel.nr;
        let mut dense = vec![0.0f32; self.k * self.n];
        for (kk, row) in dense.chunks_exact_mut(self.n.max(1)).enumerate() {
            let (k0, kc) = (kk / KC * KC, KC.min(self.k - kk / KC * KC));
            for (j, v) in row.iter_mut().enumerate() {
                *v = self.data[k0 * self.n_pad + j / nr * kc * nr + (kk - k0) * nr + j % nr];
            }
        }
        let view = MatRef::row_major(&dense[..], self.k, self.n);
        PackedB::pack(Microkernel::for_isa(isa), isa, self.k, self.n, &view)
    }

    /// The panels of columns `col0 .. col0 + cols` (`col0` a multiple of `nr`) of one k-block.
    fn panels(&self, k0: usize, kc: usize, col0: usize, cols: usize) -> &[f32] {
        let nr = self.kernel.nr;
        let start = k0 * self.n_pad + col0 / nr * kc * nr;
        &self.data[start..start + cols.div_ceil(nr) * kc * nr]
    }
}

/// Where a task's B panels come from.
enum BSource<'s, 'a, T> {
    /// Packed by the task, block by block.
    Strided(&'s MatRef<'a, T>),
    /// Packed once for the whole product (shared by every batch entry).
    Packed(&'s PackedB),
}

/// `out[b, i, j] = packed[b, i, :] . b[b, :, j]` then the epilogue, for `i` in `rows` and
/// `j < n`, on the calling thread: the building block of callers that run their own parallel
/// tasks (conv). The epilogue is indexed with the local column `j`. `rows.start` is a multiple
/// of [`PackedA::mr`].
///
/// # Safety
/// `out` is valid for writes of elements `(b, i, j)`, `b < packed.batch`, `i` in `rows`,
/// `j < n`, and nothing else accesses them during the call.
pub(crate) unsafe fn gemm_serial(
    packed: &PackedA,
    rows: std::ops::Range<usize>,
    n: usize,
    b: &MatRef<'_, f32>,
    epilogue: &Epilogue<'_>,
    out: OutLayout,
) {
    // SAFETY: forwarded from the caller.
    unsafe { gemm_serial_tiled(packed, rows, n, b, epilogue, out, REDUCTION_TILE) }
}

/// [`gemm_serial`] with reduction tiles of `tile` k-steps instead of 64 (`tile` divides 64):
/// each output is the chain of `canonical-sum` with that tile length (partials of `tile` fmas
/// from `+0.0`, folded left to right). Transposed convolution by output phase reduces over the
/// phase's `R` taps of each input channel, whose contract tiles hold `64 / kernel taps`
/// channels, so `64 / kernel taps * R` of those terms each.
///
/// # Safety
/// As [`gemm_serial`].
pub(crate) unsafe fn gemm_serial_tiled(
    packed: &PackedA,
    rows: std::ops::Range<usize>,
    n: usize,
    b: &MatRef<'_, f32>,
    epilogue: &Epilogue<'_>,
    out: OutLayout,
    tile: usize,
) {
    assert!(
        tile > 0 && REDUCTION_TILE.is_multiple_of(tile),
        "gemm_serial_tiled: tile {tile} does not divide {REDUCTION_TILE}"
    );
    b.check_bounds(packed.batch, packed.k, n, "gemm operand B");
    epilogue.check_bounds(packed.batch, packed.m, n);
    assert!(
        rows.start.is_multiple_of(packed.kernel.mr) && rows.end <= packed.m,
        "gemm_serial: rows {rows:?} of {} in panels of {}",
        packed.m,
        packed.kernel.mr
    );
    let source = ASource::<f32>::Packed(packed);
    let b = BSource::Strided(b);
    for bi in 0..packed.batch {
        for col0 in (0..n).step_by(NC_MAX) {
            let block = OutBlock {
                batch: bi,
                row0: rows.start,
                rows: rows.len(),
                col0,
                cols: NC_MAX.min(n - col0),
            };
            // SAFETY: the block lies inside the region the caller hands over.
            unsafe {
                gemm_block(
                    &packed.kernel,
                    &block,
                    (packed.k, tile),
                    &source,
                    &b,
                    epilogue,
                    out,
                )
            };
        }
    }
}

thread_local! {
    /// Per-thread packing buffer, reused across calls.
    static PACK_BUFFER: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Computes one output block over the whole reduction of `k` steps in reduction tiles of
/// `tile` steps (64, or a divisor of 64), then applies the epilogue.
///
/// # Safety
/// `out` is valid for writes of `block`'s elements and this call is their only accessor; the
/// operands were bounds-checked for `[batch, m, k]` and `[batch, k, n]`; `kernel` is the
/// microkernel of an available ISA (and the one packed operands were packed for).
unsafe fn gemm_block<T: GemmInput>(
    kernel: &Microkernel,
    block: &OutBlock,
    (k, tile): (usize, usize),
    a: &ASource<'_, '_, T>,
    b: &BSource<'_, '_, T>,
    epilogue: &Epilogue<'_>,
    out: OutLayout,
) {
    let (mr, nr) = (kernel.mr, kernel.nr);
    let c_base = block.batch * out.batch_stride + block.row0 * out.row_stride + block.col0;
    let ldc = out.row_stride;
    // SAFETY: the block's element (i, j) lies in the region the caller hands over.
    let c_at = |i: usize, j: usize| unsafe { out.ptr.add(c_base + i * ldc + j) };
    if k == 0 {
        for i in 0..block.rows {
            for j in 0..block.cols {
                // SAFETY: inside this task's block.
                unsafe { *c_at(i, j) = 0.0 };
            }
        }
    }

    let a_len = match a {
        ASource::Strided(_) => block.rows.div_ceil(mr) * mr * KC,
        ASource::Packed(_) => 0,
    };
    let b_len = match b {
        BSource::Strided(_) => block.cols.div_ceil(nr) * nr * KC,
        BSource::Packed(_) => 0,
    };
    let mut buffer = PACK_BUFFER.take();
    buffer.resize(a_len + b_len, 0.0);
    let (a_buffer, b_buffer) = buffer.split_at_mut(a_len);
    let mut edge = [0.0f32; MAX_TILE];

    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        let first = k0 == 0;
        let a_packed: &[f32] = match a {
            ASource::Strided(a) => {
                pack::pack_a(a, block.batch, block.row0, block.rows, k0, kc, mr, a_buffer);
                a_buffer
            }
            ASource::Packed(packed) => packed.panels(block.batch, k0, kc, block.row0, block.rows),
        };
        let b_packed: &[f32] = match b {
            BSource::Strided(b) => {
                pack::pack_b(b, block.batch, k0, kc, block.col0, block.cols, nr, b_buffer);
                b_buffer
            }
            BSource::Packed(packed) => packed.panels(k0, kc, block.col0, block.cols),
        };
        // The microkernel folds every 64 steps of the k-slice it is given, so a shorter tile is
        // one call per slice of `tile` steps (`[k][MR]` and `[k][NR]` panels: a k-slice is
        // contiguous). `KC` is a multiple of 64, so slices start at multiples of `tile` of k.
        let slice = if tile == REDUCTION_TILE { kc } else { tile };
        let run = |tile_fn: KernelFn, a_panel: &[f32], b_panel: &[f32], c: *mut f32, ldc| {
            for ks in (0..kc).step_by(slice) {
                // SAFETY: k-steps `ks .. min(ks + slice, kc)` lie inside the panels (`kc * mr`
                // and `kc * nr` floats); the caller of `run` vouches for the C tile.
                unsafe {
                    tile_fn(
                        slice.min(kc - ks),
                        a_panel.as_ptr().add(ks * mr),
                        b_panel.as_ptr().add(ks * nr),
                        c,
                        ldc,
                        first && ks == 0,
                    )
                };
            }
        };
        for (jp, b_panel) in b_packed
            .chunks_exact(kc * nr)
            .take(block.cols.div_ceil(nr))
            .enumerate()
        {
            let j = jp * nr;
            let width = nr.min(block.cols - j);
            for (ip, a_panel) in a_packed
                .chunks_exact(kc * mr)
                .take(block.rows.div_ceil(mr))
                .enumerate()
            {
                let i = ip * mr;
                let rows = mr.min(block.rows - i);
                let tile_fn = kernel.by_rows[rows - 1];
                if width == nr {
                    // The panels hold `kc * mr` and `kc * nr` floats, the C tile is `rows x nr`
                    // inside this task's block, and `kernel` is of an available ISA.
                    run(tile_fn, a_panel, b_panel, c_at(i, j), ldc);
                } else {
                    // Right edge: run the full-width kernel on a local copy of the valid columns.
                    for r in 0..rows {
                        for jj in 0..width {
                            // SAFETY: inside this task's block.
                            edge[r * nr + jj] = if first {
                                0.0
                            } else {
                                unsafe { *c_at(i + r, j + jj) }
                            };
                        }
                    }
                    // As above, with the `rows x nr` tile in the local `edge` buffer.
                    run(tile_fn, a_panel, b_panel, edge.as_mut_ptr(), nr);
                    for r in 0..rows {
                        for jj in 0..width {
                            // SAFETY: inside this task's block.
                            unsafe { *c_at(i + r, j + jj) = edge[r * nr + jj] };
                        }
                    }
                }
            }
        }
    }
    PACK_BUFFER.set(buffer);

    if !matches!(epilogue, Epilogue::None) {
        for i in 0..block.rows {
            for j in 0..block.cols {
                // SAFETY: inside this task's block.
                unsafe {
                    let c = c_at(i, j);
                    *c = epilogue.apply(*c, block.batch, block.row0 + i, block.col0 + j);
                }
            }
        }
    }
}
