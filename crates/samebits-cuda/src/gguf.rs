//! Products with GGUF block-quantized weights on the device (`samebits::MatMulGguf`):
//! [`CudaBackend::gguf_products`] runs `kernels/gguf.cu`, which dequantizes by the one device
//! definition per format of `kernels/ggml.cu` (type codes and block geometry generated here from
//! samebits-ggml, [`ggml_type_source`]; tested against samebits-ggml on the host, without a GPU)
//! and computes each output in the canonical order, the bits of
//! `samebits_kernels::dot_q_f32` on the CPU; one launch may also RMS-normalize its activation row
//! first and take up to three matrices, a residual add, a rotary embedding or a SiLU gate
//! (the executor's fusions). For the operation set `reproducible-int8` the same launch computes
//! contract section `int8-products`' exact-integer products instead (`kernels/gguf_int8.cu`,
//! the bits of `samebits_kernels::int8_dot`). [`CudaBackend::gguf_matmul`] is one plain product;
//! [`CudaBackend::gguf_gather`] dequantizes picked rows (`samebits::GatherGguf`, the embedding
//! lookup); many activation rows take the GEMM over dequantized weights.

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use samebits_ggml::GgmlType;

use crate::backend::{BLOCK, CudaBackend};
use crate::buffer::{DeviceBuffer, DeviceBytes};
use crate::device_abi::device_struct;
use crate::error::{CudaError, Result};
use crate::gemm::{DeviceMat, GemmEpilogue, GemmLaunch, GemmShape};

/// The weight types the device dequantizes: `kernels/ggml.cu` defines one `SbGgmlBlock` per
/// type, and every GGUF kernel is instantiated for each (`SB_GGML_DEVICE_TYPES`).
const DEVICE_TYPES: [GgmlType; 15] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
    GgmlType::Iq4Nl,
    GgmlType::Iq4Xs,
];

/// The kernel name suffix of a weight type (ggml's name in lower case), if the device
/// dequantizes it.
fn suffix(ggml_type: GgmlType) -> Option<String> {
    DEVICE_TYPES
        .contains(&ggml_type)
        .then(|| ggml_type.name().to_lowercase())
}

/// The part of the device ABI (`device_abi::source`) that `kernels/ggml.cu` and
/// `kernels/gguf.cu` build on, generated from samebits-ggml's type table: `SB_GGML_<NAME>` (the ggml type id), `SB_GGML_<NAME>_ELEMS` and
/// `SB_GGML_<NAME>_BYTES` (the block geometry) for each device type, the X-macro
/// `SB_GGML_DEVICE_TYPES(X)` = `X(suffix, SB_GGML_<NAME>)` per device type, its subset
/// `SB_GGML_INT8_TYPES(X)` (samebits-kernels' `INT8_TYPES`, the types of the exact-integer
/// products), and the IQ4 code table `sb_iq4nl_values`.
pub(crate) fn ggml_type_source() -> String {
    let mut src = String::from("// Generated from samebits-ggml's type table (src/gguf.rs).\n");
    let mut list = String::from("#define SB_GGML_DEVICE_TYPES(X)");
    for t in DEVICE_TYPES {
        let name = t.name();
        src.push_str(&format!(
            "#define SB_GGML_{name} {}\n#define SB_GGML_{name}_ELEMS {}\n#define SB_GGML_{name}_BYTES {}\n",
            t.id(),
            t.block_elems(),
            t.block_bytes()
        ));
        list.push_str(&format!(" X({}, SB_GGML_{name})", name.to_lowercase()));
    }
    src.push_str(&list);
    src.push('\n');
    let mut int8 = String::from("#define SB_GGML_INT8_TYPES(X)");
    for t in samebits_kernels::INT8_TYPES {
        let name = t.name();
        int8.push_str(&format!(" X({}, SB_GGML_{name})", name.to_lowercase()));
    }
    src.push_str(&int8);
    src.push('\n');
    let values: Vec<String> = samebits_ggml::iquant::IQ4_NL_VALUES
        .iter()
        .map(i8::to_string)
        .collect();
    src.push_str(&format!(
        "// The values of IQ4_NL / IQ4_XS codes (samebits-ggml's IQ4_NL_VALUES).\n\
         __device__ const signed char sb_iq4nl_values[16] = {{{}}};\n",
        values.join(", ")
    ));
    src
}

/// The kernel `sb_gguf_<what>_<type>`, or an error for a type the device does not dequantize.
fn kernel(what: &str, ggml_type: GgmlType) -> Result<String> {
    suffix(ggml_type)
        .map(|s| format!("sb_gguf_{what}_{s}"))
        .ok_or_else(|| CudaError::Invalid(format!("no GGUF kernel for {ggml_type} weights")))
}

/// Activation rows from which a product runs as a GEMM over the dequantized weights
/// ([`CudaBackend::gguf_dequantize_t`]) rather than as matrix-vector products.
pub const GGUF_GEMM_MIN_ROWS: usize = 16;

/// Whether [`CudaBackend::gguf_matmul`] and [`CudaBackend::gguf_gather`] take weights of this
/// type.
pub fn gguf_supported(ggml_type: GgmlType) -> bool {
    suffix(ggml_type).is_some()
}

/// Threads of a products block ([`CudaBackend::gguf_products`]).
const PRODUCTS_BLOCK: usize = BLOCK as usize;
/// Static shared memory of a products block (a scalar), beside its dynamic shared memory.
const PRODUCTS_STATIC_SHARED: usize = 1024;
/// Floats one 64-term tile of the activation row takes in shared memory (`SB_GGUF_PITCH`): 68,
/// so the chains of neighbouring tiles start in different banks.
pub(crate) const ROW_PITCH: usize = 68;

/// Block rows (weight rows, or gate / up pairs) of one products block over rows of `cols`:
/// even, at least 2, about one work item (a 64-term tile, or with `int8` a 32-element block)
/// per thread.
fn rows_per_block(cols: usize, int8: bool) -> usize {
    let items = match int8 {
        true => cols / 32,
        false => cols.div_ceil(samebits_kernels::REDUCTION_TILE),
    };
    ((PRODUCTS_BLOCK / items.max(1)) & !1).max(2)
}

/// Dynamic shared bytes of a products block over rows of `cols` (the layouts of
/// `kernels/gguf.cu` and, with `int8`, `kernels/gguf_int8.cu`).
fn products_shared_bytes(cols: usize, int8: bool) -> usize {
    let tiles = cols.div_ceil(samebits_kernels::REDUCTION_TILE);
    let rpb = rows_per_block(cols, int8);
    match int8 {
        true => {
            let blocks = cols / 32;
            4 * (tiles * ROW_PITCH + 2 * blocks + 3 * rpb * blocks + rpb) + cols
        }
        false => 4 * (tiles * ROW_PITCH + rpb * tiles + rpb),
    }
}

/// The interleaved rotary embedding (contract: attention, RotaryEmbedding with
/// `interleaved = 1`) of a matrix's outputs, taken as heads of `head_size` whose first `rot`
/// features are rotated by row `m` of the `[.., width]` cos / sin tables for activation row `m`.
#[derive(Clone, Copy)]
pub struct GgufRotary<'a> {
    pub cos: &'a DeviceBuffer,
    pub sin: &'a DeviceBuffer,
    pub width: usize,
    pub head_size: usize,
    pub rot: usize,
}

/// One weight matrix of a [`GgufProducts`] launch: `[rows, cols]` GGUF blocks, and what its
/// finished dots take: a residual term `add` (`[m, rows]`) or a rotary embedding.
#[derive(Clone, Copy)]
pub struct GgufMatrix<'a> {
    pub w: &'a DeviceBytes,
    pub rows: usize,
    pub add: Option<&'a DeviceBuffer>,
    pub rotary: Option<GgufRotary<'a>>,
}

/// Products of up to three `[rows_i, cols]` matrices of one GGUF type with the same activation
/// rows `x` (`[m, cols]`), in one launch: `y_i = x · W_iᵀ`, the canonical dots of docs/gguf.md.
/// With `norm = (scale, eps)` the rows of `x` are first RMS-normalized (contract:
/// normalization), exactly as RMSNormalization over the last axis; with `gate`, two matrices of
/// equal rows give one output `(g * sigmoid(g)) * u` (the SiLU gate of a llama MLP). With
/// `int8` (a type of samebits-kernels' `INT8_TYPES`) the products are contract section
/// `int8-products`' exact-integer products instead (`kernels/gguf_int8.cu`), for any number
/// of activation rows.
pub struct GgufProducts<'a> {
    pub ggml_type: GgmlType,
    pub cols: usize,
    pub x: &'a DeviceBuffer,
    pub norm: Option<(&'a DeviceBuffer, f32)>,
    pub matrices: &'a [GgufMatrix<'a>],
    pub gate: bool,
    pub int8: bool,
}

device_struct! {
    /// One matrix of a products launch (kernels/gguf.cu): weights [rows, cols], output y
    /// [M, rows]; `add` ([M, rows] or null) is added to each finished dot; with rot > 0 the
    /// first rot features of each head of head_size outputs are rotated as interleaved pairs by
    /// the cos / sin rows (one row of `width` values per activation row).
    pub(crate) struct SbGgufMatrix {
        w: u64 as "const unsigned char*",
        y: u64 as "float*",
        add: u64 as "const float*",
        rows: i32,
        head_size: i32,
        rot: i32,
        pad: i32,
    }
}

device_struct! {
    /// The matrices of one products launch.
    pub(crate) struct SbGgufMatrices {
        m: [SbGgufMatrix; 3],
    }
}

impl CudaBackend {
    /// Whether [`CudaBackend::gguf_products`] takes activation rows of `cols` (with `int8`, for
    /// the exact-integer products): its row and partials fit one block's shared memory on this
    /// device (opt-in maximum). Longer rows take the GEMM over dequantized weights, the same
    /// canonical dot products; the exact-integer products have no other kernel.
    pub fn gguf_products_fit(&self, cols: usize, int8: bool) -> bool {
        cols > 0
            && cols <= i32::MAX as usize
            && products_shared_bytes(cols, int8) + PRODUCTS_STATIC_SHARED
                <= self.max_shared_per_block()
    }

    /// `y [m, rows] = x [m, cols] · Wᵀ` for the `[rows, cols]` GGUF matrix `w` of `ggml_type`;
    /// with `add` (`[m, rows]`), `y = (x · Wᵀ) + add`, one more rounding per output (a residual
    /// Add fused into the product). Rows of `cols` must fit [`CudaBackend::gguf_products_fit`].
    /// (The exact-integer products: [`CudaBackend::gguf_products`] with `int8`.)
    pub fn gguf_matmul(
        &self,
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        w: &DeviceBytes,
        x: &DeviceBuffer,
        add: Option<&DeviceBuffer>,
    ) -> Result<DeviceBuffer> {
        let matrix = GgufMatrix {
            w,
            rows,
            add,
            rotary: None,
        };
        let mut y = self.gguf_products(&GgufProducts {
            ggml_type,
            cols,
            x,
            norm: None,
            matrices: &[matrix],
            gate: false,
            int8: false,
        })?;
        Ok(y.remove(0))
    }

    /// The products of `p` ([`GgufProducts`]) in one launch: one output per matrix, or the one
    /// gated output.
    pub fn gguf_products(&self, p: &GgufProducts) -> Result<Vec<DeviceBuffer>> {
        let GgufProducts {
            ggml_type,
            cols,
            x,
            norm,
            matrices,
            gate,
            int8,
        } = *p;
        if int8 && !samebits_kernels::has_int8_products(ggml_type) {
            return Err(CudaError::Invalid(format!(
                "{ggml_type} weights have no exact-integer products (contract: int8-products)"
            )));
        }
        let name = kernel(if int8 { "int8_products" } else { "products" }, ggml_type)?;
        let row_bytes = ggml_type.row_bytes(cols).ok_or_else(|| {
            CudaError::Invalid(format!("{cols} columns are not whole {ggml_type} blocks"))
        })?;
        if !self.gguf_products_fit(cols, int8) || !x.len().is_multiple_of(cols) {
            return Err(CudaError::Invalid(format!(
                "activations of {} values are not rows of {cols} that a products block takes",
                x.len()
            )));
        }
        let m = x.len() / cols;
        let invalid = |what: String| Err(CudaError::Invalid(format!("GGUF products: {what}")));
        if matrices.is_empty() || matrices.len() > 3 || m > 65_535 {
            return invalid(format!("{} matrices, {m} rows", matrices.len()));
        }
        if norm.is_some_and(|(scale, _)| scale.len() != cols) {
            return invalid(format!("a norm scale is not {cols} values"));
        }
        let rotary = matrices.iter().find_map(|mat| mat.rotary);
        let any_rotary = rotary.is_some();
        for mat in matrices {
            if mat.w.len() != mat.rows * row_bytes || mat.rows > i32::MAX as usize {
                return invalid(format!(
                    "a [{}, {cols}] {ggml_type} matrix of {} bytes",
                    mat.rows,
                    mat.w.len()
                ));
            }
            if mat.add.is_some_and(|a| a.len() != m * mat.rows)
                || (mat.add.is_some() && (mat.rotary.is_some() || gate))
            {
                return invalid("an added term of another length, or with a rotary or gate".into());
            }
            if (any_rotary || gate) && !mat.rows.is_multiple_of(2) {
                return invalid(format!("{} rows (a rotary or gate needs pairs)", mat.rows));
            }
            if let (Some(r), Some(first)) = (mat.rotary, rotary) {
                let fits = r.head_size > 0
                    && r.head_size.is_multiple_of(2)
                    && r.rot.is_multiple_of(2)
                    && r.rot <= r.head_size
                    && mat.rows.is_multiple_of(r.head_size)
                    && r.width >= r.rot / 2
                    && r.cos.len() >= m * r.width
                    && r.sin.len() >= m * r.width
                    && std::ptr::eq(r.cos, first.cos)
                    && std::ptr::eq(r.sin, first.sin)
                    && r.width == first.width;
                if !fits {
                    return invalid("a rotary the fused kernel does not take".into());
                }
            }
        }
        if gate && (matrices.len() != 2 || matrices[0].rows != matrices[1].rows || any_rotary) {
            return invalid("a gate needs two matrices of equal rows".into());
        }
        let outputs = if gate { 1 } else { matrices.len() };
        let mut ys = (0..outputs)
            .map(|i| self.alloc(m * matrices[i].rows))
            .collect::<Result<Vec<_>>>()?;
        let total: usize = matrices.iter().map(|mat| mat.rows).sum();
        if total == 0 || m == 0 {
            return Ok(ys);
        }
        let stream = self.stream();
        let mut raw = SbGgufMatrices::default();
        for (i, mat) in matrices.iter().enumerate() {
            let r = mat.rotary;
            raw.m[i] = SbGgufMatrix {
                w: mat.w.slice().device_ptr(stream).0,
                y: match ys.get_mut(i) {
                    Some(y) => y.slice_mut().device_ptr_mut(stream).0,
                    None => 0,
                },
                add: mat.add.map_or(0, |a| a.slice().device_ptr(stream).0),
                rows: mat.rows as i32,
                head_size: r.map_or(0, |r| r.head_size as i32),
                rot: r.map_or(0, |r| r.rot as i32),
                pad: 0,
            };
        }
        let rpb = rows_per_block(cols, int8);
        let shared = products_shared_bytes(cols, int8);
        let config = LaunchConfig {
            grid_dim: (total.div_ceil(rpb) as u32, m as u32, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: shared as u32,
        };
        let f = self.function(&name)?;
        // Rows longer than 48 KiB of shared memory take the device's opt-in maximum.
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            shared as i32,
        )?;
        let ints = [matrices.len(), usize::from(gate), cols].map(|v| v as i32);
        let row_bytes = row_bytes as i64;
        let (width, rpb) = (rotary.map_or(0, |r| r.width) as i32, rpb as i32);
        let eps = norm.map_or(0.0, |(_, eps)| eps);
        let null: u64 = 0;
        let mut launch = stream.launch_builder(&f);
        launch
            .arg(&raw)
            .arg(&ints[0])
            .arg(&ints[1])
            .arg(&row_bytes)
            .arg(&ints[2])
            .arg(x.slice());
        match norm {
            Some((scale, _)) => launch.arg(scale.slice()),
            None => launch.arg(&null),
        };
        launch.arg(&eps);
        match rotary {
            Some(r) => launch.arg(r.cos.slice()).arg(r.sin.slice()),
            None => launch.arg(&null).arg(&null),
        };
        launch.arg(&width).arg(&rpb);
        // SAFETY: each matrix holds rows * row_bytes bytes and its output (and added term)
        // m * rows values, x holds m * cols values, the norm scale cols and the rotary tables
        // m * width (all checked above); the grid covers every block row of every activation row.
        unsafe { launch.launch(config)? };
        Ok(ys)
    }

    /// `y [count, cols]`: rows `ids[i]` (i64 on the device; negative ids count from the end,
    /// every id must lie in `-rows .. rows`) of the `[rows, cols]` GGUF matrix `w`,
    /// dequantized.
    pub fn gguf_gather(
        &self,
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        w: &DeviceBytes,
        ids: &DeviceBytes,
        count: usize,
    ) -> Result<DeviceBuffer> {
        let name = kernel("gather", ggml_type)?;
        let row_bytes = ggml_type.row_bytes(cols).ok_or_else(|| {
            CudaError::Invalid(format!("{cols} columns are not whole {ggml_type} blocks"))
        })?;
        if w.len() != rows * row_bytes || ids.len() != 8 * count || rows > i32::MAX as usize {
            return Err(CudaError::Invalid(format!(
                "gather of {count} rows from a [{rows}, {cols}] {ggml_type} matrix of {} bytes \
                 with {} index bytes",
                w.len(),
                ids.len()
            )));
        }
        let mut y = self.alloc(count * cols)?;
        if y.is_empty() {
            return Ok(y);
        }
        let f = self.function(&name)?;
        let (row_bytes, rows_i, cols_i, n) = (
            row_bytes as i64,
            rows as i32,
            cols as i32,
            (count * cols) as i64,
        );
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(w.slice())
            .arg(&row_bytes)
            .arg(&rows_i)
            .arg(&cols_i)
            .arg(ids.slice())
            .arg(&n)
            .arg(y.slice_mut());
        // SAFETY: thread per output element; the ids (in range, checked by the caller) pick
        // whole rows of w.
        unsafe {
            launch.launch(crate::backend::launch_1d(
                crate::backend::blocks_for(count * cols),
                0,
            ))?
        };
        Ok(y)
    }

    /// The `[cols, rows]` f32 transpose of the dequantized `[rows, cols]` GGUF matrix `w` (the
    /// formulas of docs/gguf.md, exact), the B operand of [`CudaBackend::gguf_matmul_dequantized`].
    pub fn gguf_dequantize_t(
        &self,
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        w: &DeviceBytes,
    ) -> Result<DeviceBuffer> {
        let name = kernel("dequantize_t", ggml_type)?;
        let row_bytes = ggml_type.row_bytes(cols).ok_or_else(|| {
            CudaError::Invalid(format!("{cols} columns are not whole {ggml_type} blocks"))
        })?;
        if w.len() != rows * row_bytes || rows > i32::MAX as usize || cols > i32::MAX as usize {
            return Err(CudaError::Invalid(format!(
                "a [{rows}, {cols}] {ggml_type} matrix needs {} bytes, got {}",
                rows * row_bytes,
                w.len()
            )));
        }
        let mut wt = self.alloc(rows * cols)?;
        if wt.is_empty() {
            return Ok(wt);
        }
        let f = self.function(&name)?;
        let (row_bytes, rows_i, cols_i) = (row_bytes as i64, rows as i32, cols as i32);
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(w.slice())
            .arg(&row_bytes)
            .arg(&rows_i)
            .arg(&cols_i)
            .arg(wt.slice_mut());
        // SAFETY: grid-stride over the rows * cols matrix, w checked above.
        unsafe {
            launch.launch(crate::backend::launch_1d(
                crate::backend::blocks_for(rows * cols),
                0,
            ))?
        };
        Ok(wt)
    }

    /// `y [m, rows] = x [m, cols] · W^T` (`+ add`) by the canonical GEMM (contract: gemm, the
    /// `Add` epilogue) over `wt`, the dequantized weights from
    /// [`CudaBackend::gguf_dequantize_t`]: the same canonical dot products as
    /// [`CudaBackend::gguf_matmul`], so the same bits (docs/gguf.md).
    pub fn gguf_matmul_dequantized(
        &self,
        rows: usize,
        cols: usize,
        wt: &DeviceBuffer,
        x: &DeviceBuffer,
        add: Option<&DeviceBuffer>,
    ) -> Result<DeviceBuffer> {
        if cols == 0 || !x.len().is_multiple_of(cols) || wt.len() != rows * cols {
            return Err(CudaError::Invalid(format!(
                "activations of {} values and {} weights are not [m, {cols}] and [{cols}, {rows}]",
                x.len(),
                wt.len()
            )));
        }
        let m = x.len() / cols;
        self.gemm(
            GemmShape {
                batch: 1,
                m,
                n: rows,
                k: cols,
            },
            DeviceMat::row_major(x, m, cols),
            DeviceMat::row_major(wt, cols, rows),
            match add {
                Some(a) => GemmEpilogue::Add(DeviceMat::row_major(a, m, rows)),
                None => GemmEpilogue::None,
            },
            GemmLaunch::Auto,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{DEVICE_TYPES, ggml_type_source};
    use samebits_ggml::{GgmlType, dequantize_row};
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// `blocks` random blocks of `t` whose f16 scales (and F32 / F16 values) are finite.
    fn random_blocks(t: GgmlType, blocks: usize, seed: u64) -> Vec<u8> {
        let mut rng = samebits_testdata::Rng(seed);
        let mut next = move || rng.next_u64() as u8;
        let f16_fields: &[usize] = match t {
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => &[0, 2],
            GgmlType::F16 | GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
            GgmlType::Q6K => &[208],
            GgmlType::Iq4Nl | GgmlType::Iq4Xs => &[0],
            GgmlType::Q2K => &[80, 82],
            GgmlType::Q3K => &[108],
            _ => &[],
        };
        let mut out = Vec::new();
        for _ in 0..blocks {
            let mut block: Vec<u8> = (0..t.block_bytes()).map(|_| next()).collect();
            for &at in f16_fields {
                block[at + 1] &= 0xBF; // exponent below all-ones
            }
            if t == GgmlType::F32 {
                block[3] &= 0xBF;
            }
            out.extend(block);
        }
        out
    }

    /// The device dequantization (`kernels/ggml.cu` after the generated type source), compiled
    /// on the host with g++ (`emulate/ggml_dequantize.cpp`), equals samebits-ggml's
    /// `dequantize_row` bit for bit on random blocks of every device type, and its integer
    /// codes (`code_word`) equal samebits-kernels' `int8_block_codes` for the exact-integer
    /// types. Skips loudly without g++.
    #[test]
    fn device_dequantization_equals_samebits_ggml() {
        if Command::new("g++").arg("--version").output().is_err() {
            let line =
                b"SKIPPED (no g++): gguf::tests::device_dequantization_equals_samebits_ggml\n";
            let _ = std::io::stderr().write_all(line);
            return;
        }
        let dir = std::env::temp_dir().join(format!("samebits-ggml-host-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let device = include_str!("../kernels/ggml.cu").replace(
            r#"asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));"#,
            "f = sb_host_f16_to_f32(h);",
        );
        assert!(!device.contains("asm("), "inline PTX left for the host");
        std::fs::write(
            dir.join("ggml_host.inc"),
            format!("{}\n{device}", ggml_type_source()),
        )
        .unwrap();
        let harness = dir.join("ggml_dequantize.cpp");
        std::fs::write(&harness, include_str!("../emulate/ggml_dequantize.cpp")).unwrap();
        let binary = dir.join("ggml_dequantize");
        let status = Command::new("g++")
            .args([
                "-std=c++17",
                "-O2",
                "-ffp-contract=off",
                "-fno-strict-aliasing",
                "-o",
            ])
            .arg(&binary)
            .arg(&harness)
            .status()
            .unwrap();
        assert!(status.success(), "g++ failed on the device dequantization");
        // The host program's stdout for `args`, fed `bytes` on stdin.
        let host_run = |args: &[String], bytes: &[u8]| {
            let mut child = Command::new(&binary)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(bytes).unwrap();
            let output = child.wait_with_output().unwrap();
            assert!(output.status.success(), "the host run {args:?} failed");
            output.stdout
        };
        for (seed, t) in DEVICE_TYPES.into_iter().enumerate() {
            let blocks = 64 * 256 / t.block_elems();
            let bytes = random_blocks(t, blocks, seed as u64 + 1);
            let device: Vec<u32> = host_run(&[t.id().to_string()], &bytes)
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            let mut expected = vec![0f32; blocks * t.block_elems()];
            dequantize_row(t, &bytes, &mut expected).unwrap();
            let expected: Vec<u32> = expected.iter().map(|v| v.to_bits()).collect();
            assert_eq!(device.len(), expected.len(), "{t}");
            for (i, (d, e)) in device.iter().zip(&expected).enumerate() {
                assert_eq!(
                    d, e,
                    "{t} element {i}: device {d:#010x}, samebits-ggml {e:#010x}"
                );
            }
            if !samebits_kernels::has_int8_products(t) {
                continue;
            }
            // The integer codes of the exact-integer products, four per code_word.
            let device: Vec<i8> = host_run(&[t.id().to_string(), "codes".into()], &bytes)
                .iter()
                .map(|&b| b as i8)
                .collect();
            let expected: Vec<i8> = bytes
                .chunks_exact(t.block_bytes())
                .flat_map(|block| samebits_kernels::int8_block_codes(t, block).0)
                .map(|c| i8::try_from(c).expect("a code fits a byte"))
                .collect();
            assert_eq!(
                device, expected,
                "{t}: device codes differ from int8_block_codes"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
