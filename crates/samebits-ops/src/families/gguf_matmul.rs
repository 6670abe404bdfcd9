//! Ops over GGUF block-quantized weights, domain `"samebits"`: the weights stay in their raw
//! ggml blocks (usually a view of the memory-mapped file) and are dequantized on the fly by the
//! canonical formulas of `docs/gguf.md`.
//!
//! - `MatMulGguf(x [.., K] f32, w [bytes] u8)`, attributes `ggml_type` (the ggml type id),
//!   `rows` (N) and `cols` (K): `y [.., N]`, `y[m, n]` = the canonical dot product of row `n` of
//!   the dequantized weight with row `m` of `x` (`x · Wᵀ`), exactly
//!   `samebits_kernels::dot_q_f32`. One activation row runs `matvec_q_f32` over tasks of whole
//!   weight rows; several rows dequantize a tile of weight rows once and multiply it by the
//!   canonical GEMM (contract section `gemm`), which computes the same canonical dot products,
//!   so a token's bits do not depend on how many tokens are processed together.
//! - `GatherGguf(w [bytes] u8, indices)`, same attributes: `y [indices.., K]`, the dequantized
//!   rows picked by `indices` (an embedding lookup that dequantizes only those rows).
//!
//! Both take an optional attribute `layout`: `"rows"` (default, the ggml rows as stored in the
//! file) or `"panels"` (the row panels of `samebits_kernels::pack_panels` for the types of
//! `samebits_kernels::has_panel_layout`; docs/gguf.md, "Row panels"). Over panels, both the
//! one-row and the several-row products run `PanelMatrix::matmul` on tasks of whole panels:
//! SIMD lanes are rows, each its own canonical chain, so the bits equal the rows layout's for any
//! token count, ISA and thread count. A graph keeps its weights in ggml rows whatever device runs
//! it (the GPU kernels read rows); the CPU evaluation of `MatMulGguf` packs a rows weight of
//! those types into panels on first use and keeps the packing for the next calls with the same
//! weight (a plan's constant: packed once per process, shared by every op that reads that weight
//! tensor), so the CPU runs its panel kernels on the device-independent graph.
//!
//! Built for the operation set `reproducible-int8`, `MatMulGguf` over a weight of a type of
//! `samebits_kernels::INT8_TYPES` computes the exact-integer products instead (contract section
//! `int8-products`): each row of `x` quantized once to 8-bit blocks, then
//! `PanelMatrix::matmul_int8` on the same tasks of whole panels (same bits for any token count,
//! ISA and thread count). The device kernel is the same `DeviceKernel::MatMulGguf`: a device
//! executor built for the set computes the same exact-integer products (samebits-cuda's
//! `kernels/gguf_int8.cu`).

use crate::registry::Registry;
use crate::{BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, Result, bail};
use rayon::prelude::*;
use samebits_ggml::{GgmlType, QuantError, dequantize_row};
use samebits_ir::{DType, Tensor, Value, ValueType};
use samebits_kernels::{
    Int8Activations, Isa, MatRef, PANEL_ROWS, PanelMatrix, gemm_f32, has_int8_products,
    has_panel_layout, matvec_q_f32, pack_panels, panel_bytes,
};
use std::sync::{Arc, Mutex, Weak};

pub fn register(r: &mut Registry) {
    r.register("samebits", "MatMulGguf", |ctx| {
        let w = QuantizedMatrix::build(ctx)?;
        let products = match ctx.operation_set.int8_products() && has_int8_products(w.ggml_type) {
            true => Products::Int8,
            false => Products::F32,
        };
        Ok(Box::new(MatMulGguf(w, PackedPanels::default(), products)))
    });
    r.register("samebits", "GatherGguf", |ctx| {
        Ok(Box::new(GatherGguf(QuantizedMatrix::build(ctx)?)))
    });
}

/// Weight rows per parallel task of the one-row (decode) path.
const ROWS_PER_TASK: usize = 64;
/// Weight rows dequantized together by the several-rows (prefill) path.
const ROWS_PER_TILE: usize = 256;
/// Bytes of a weight's rows packed into panels between two releases of their pages.
const RELEASE_BYTES: usize = 4 << 20;
/// Panels per parallel task over a panel matrix.
const PANELS_PER_TASK: usize = 4;

/// How the weight's bytes are laid out (attribute `layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// ggml rows, one after the other, as in the file.
    Rows,
    /// Row panels (`samebits_kernels::pack_panels`).
    Panels,
}

/// The quantized `[rows, cols]` matrix an op reads from its `u8` input.
#[derive(Debug)]
struct QuantizedMatrix {
    ggml_type: GgmlType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    layout: Layout,
}

impl QuantizedMatrix {
    fn build(ctx: &BuildContext) -> Result<QuantizedMatrix> {
        let args = NodeArgs::new(ctx.node);
        let id = args.req_int("ggml_type")?;
        let ggml_type = u32::try_from(id)
            .ok()
            .and_then(GgmlType::from_id)
            .filter(|t| t.can_dequantize())
            .ok_or_else(|| {
                crate::OpError::Unsupported(format!(
                    "attribute \"ggml_type\" = {id} is not a ggml type samebits dequantizes"
                ))
            })?;
        let dim = |name: &str| -> Result<usize> {
            let v = args.req_int(name)?;
            usize::try_from(v).map_err(|_| {
                crate::OpError::Invalid(format!("attribute \"{name}\" = {v} must not be negative"))
            })
        };
        let (rows, cols) = (dim("rows")?, dim("cols")?);
        let row_bytes = ggml_type.row_bytes(cols).ok_or_else(|| {
            crate::OpError::Invalid(format!(
                "attribute \"cols\" = {cols} is not a whole number of {}-element {ggml_type} blocks",
                ggml_type.block_elems()
            ))
        })?;
        let layout = match args.string("layout")?.as_deref() {
            None | Some("rows") => Layout::Rows,
            Some("panels") if panel_bytes(ggml_type, rows, cols).is_some() => Layout::Panels,
            Some("panels") => {
                return Err(crate::OpError::Unsupported(format!(
                    "attribute \"layout\" = \"panels\": {ggml_type} has no panel layout"
                )));
            }
            Some(other) => {
                return Err(crate::OpError::Invalid(format!(
                    "attribute \"layout\" = {other:?} must be \"rows\" or \"panels\""
                )));
            }
        };
        Ok(QuantizedMatrix {
            ggml_type,
            rows,
            cols,
            row_bytes,
            layout,
        })
    }

    /// Bytes of the whole matrix in its layout.
    fn size(&self) -> usize {
        match self.layout {
            Layout::Rows => self.rows * self.row_bytes,
            Layout::Panels => panel_bytes(self.ggml_type, self.rows, self.cols)
                .expect("checked when the op was built"),
        }
    }

    /// Input `i` as a panel matrix (layout `panels`).
    fn panels<'a>(&self, inputs: &'a Inputs, i: usize) -> Result<PanelMatrix<'a>> {
        let bytes = self.blocks(inputs, i)?;
        PanelMatrix::new(self.ggml_type, self.rows, self.cols, bytes)
            .map_err(|e| crate::OpError::Invalid(format!("input {i}: {e}")))
    }

    /// The raw blocks of input `i`, checked to hold the whole matrix.
    fn blocks<'a>(&self, inputs: &'a Inputs, i: usize) -> Result<&'a [u8]> {
        let t = inputs.tensor(i)?;
        if t.dtype() != DType::U8 {
            bail!(
                "input {i} (quantized weight) must be uint8 blocks, is {}",
                t.dtype()
            );
        }
        let bytes = t.bytes()?;
        if bytes.len() != self.size() {
            bail!(
                "input {i} holds {} bytes, a [{}, {}] {} matrix in {:?} layout needs {}",
                bytes.len(),
                self.rows,
                self.cols,
                self.ggml_type,
                self.layout,
                self.size()
            );
        }
        Ok(bytes)
    }

    /// `[.., cols]` with the leading dims of `shape`: the output shape.
    fn out_shape(&self, leading: &[usize]) -> Vec<usize> {
        leading.iter().copied().chain([self.cols]).collect()
    }
}

/// The row panels a rows-layout weight was packed into on first use (module docs), with the
/// weight tensor they come from. Holding the tensor keeps its bytes where they are, so a later
/// input whose bytes have the same address and length is that very (immutable) tensor.
#[derive(Debug)]
struct Packing {
    weight: Tensor,
    panels: Vec<u8>,
}

impl Packing {
    fn packs(&self, blocks: &[u8]) -> bool {
        self.weight
            .bytes()
            .is_ok_and(|b| std::ptr::eq(b.as_ptr(), blocks.as_ptr()) && b.len() == blocks.len())
    }
}

/// Every packing alive in the process: plans compiled from one graph's weights (an LLM's
/// one-sequence and batched plans) share one packing per weight instead of packing it each.
static PACKINGS: Mutex<Vec<Weak<Packing>>> = Mutex::new(Vec::new());

/// An op's packing of its weight (module docs), shared through [`PACKINGS`].
#[derive(Debug, Default)]
struct PackedPanels(Mutex<Option<Arc<Packing>>>);

impl PackedPanels {
    /// The panels of `weight` (whose bytes are `blocks`), packed now unless already packed
    /// for this op or another.
    fn of(&self, w: &QuantizedMatrix, weight: &Tensor, blocks: &[u8]) -> Result<Arc<Packing>> {
        let mut cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(packing) = cached.as_ref().filter(|p| p.packs(blocks)) {
            return Ok(Arc::clone(packing));
        }
        // The process-wide list is held only to look up and to add, not while packing: the
        // products of one body pack their weights in parallel on first use.
        let shared = {
            let mut all = PACKINGS.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|p| p.strong_count() > 0);
            all.iter()
                .filter_map(Weak::upgrade)
                .find(|p| p.packs(blocks))
        };
        if let Some(packing) = shared {
            *cached = Some(Arc::clone(&packing));
            return Ok(packing);
        }
        // The rows are not read again here: a memory-mapped file's pages need not stay
        // resident beside the packed copy. They are let go every few MiB (a fault maps the
        // pages around it too, so letting each panel's rows go at once would not last).
        let mut kept = 0;
        let panels = pack_panels(w.ggml_type, w.rows, w.cols, |first, out: &mut [u8]| {
            let at = first * w.row_bytes;
            out.copy_from_slice(&blocks[at..at + out.len()]);
            if at + out.len() - kept >= RELEASE_BYTES {
                weight.release_pages(kept..at + out.len());
                kept = at + out.len();
            }
            Ok::<(), QuantError>(())
        })
        .map_err(|e| crate::OpError::Invalid(e.to_string()))?;
        weight.release_pages(0..blocks.len());
        let packing = Arc::new(Packing {
            weight: weight.clone(),
            panels,
        });
        PACKINGS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&packing));
        *cached = Some(Arc::clone(&packing));
        Ok(packing)
    }
}

/// Which definition a `MatMulGguf` computes (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Products {
    /// The canonical f32 dot products of the dequantized weights (contract: `gguf`).
    F32,
    /// The exact-integer products over 8-bit activations (contract: `int8-products`).
    Int8,
}

#[derive(Debug)]
struct MatMulGguf(QuantizedMatrix, PackedPanels, Products);

impl Op for MatMulGguf {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(ValueType::tensor(DType::F32, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let w = &self.0;
        let x_in = inputs.tensor(0)?;
        let blocks = w.blocks(inputs, 1)?;
        let x = x_in.as_slice::<f32>().map_err(|e| {
            crate::OpError::Invalid(format!("input 0 (activations) must be float32: {e}"))
        })?;
        if x_in.shape().last() != Some(&w.cols) {
            bail!(
                "input 0 has shape {:?}, its last dim must be the {} columns of the weight",
                x_in.shape(),
                w.cols
            );
        }
        let m = x.len() / w.cols.max(1);
        let mut y = vec![0f32; m * w.rows];
        if self.2 == Products::Int8 {
            let xq = Int8Activations::quantize(x, w.cols)
                .map_err(|e| crate::OpError::Invalid(format!("input 0: {e}")))?;
            let int8 =
                |w: &PanelMatrix, range, out: &mut [f32], isa| w.matmul_int8(range, &xq, out, isa);
            if w.layout == Layout::Panels {
                panels_matmul(&w.panels(inputs, 1)?, m, &mut y, int8)?;
            } else if m > 0 {
                let packed = self.1.of(w, inputs.tensor(1)?, blocks)?;
                let panels = PanelMatrix::new(w.ggml_type, w.rows, w.cols, &packed.panels)
                    .map_err(|e| crate::OpError::Invalid(format!("input 1: {e}")))?;
                panels_matmul(&panels, m, &mut y, int8)?;
            }
        } else if w.layout == Layout::Panels {
            panels_matmul(&w.panels(inputs, 1)?, m, &mut y, f32_products(x))?;
        } else if has_panel_layout(w.ggml_type) && m > 0 {
            let packed = self.1.of(w, inputs.tensor(1)?, blocks)?;
            let panels = PanelMatrix::new(w.ggml_type, w.rows, w.cols, &packed.panels)
                .map_err(|e| crate::OpError::Invalid(format!("input 1: {e}")))?;
            panels_matmul(&panels, m, &mut y, f32_products(x))?;
        } else if m == 1 {
            y.par_chunks_mut(ROWS_PER_TASK)
                .enumerate()
                .try_for_each(|(t, out)| {
                    let first = t * ROWS_PER_TASK * w.row_bytes;
                    let rows = &blocks[first..first + out.len() * w.row_bytes];
                    matvec_q_f32(w.ggml_type, rows, x, out)
                })
                .map_err(|e| crate::OpError::Invalid(e.to_string()))?;
        } else if m > 1 {
            let tiles: Vec<(usize, Vec<f32>)> = blocks
                .par_chunks(ROWS_PER_TILE * w.row_bytes)
                .enumerate()
                .map(|(t, tile_blocks)| {
                    let n = tile_blocks.len() / w.row_bytes;
                    let mut tile = vec![0f32; n * w.cols];
                    dequantize_row(w.ggml_type, tile_blocks, &mut tile)?;
                    let mut out = vec![0f32; m * n];
                    // contract: gemm (each output the canonical dot of a weight row and an x row)
                    gemm_f32(
                        1,
                        m,
                        n,
                        w.cols,
                        MatRef::row_major(x, m, w.cols),
                        MatRef::row_major(&tile, n, w.cols).transposed(),
                        &mut out,
                    );
                    Ok((t * ROWS_PER_TILE, out))
                })
                .collect::<samebits_ggml::Result<_>>()
                .map_err(|e| crate::OpError::Invalid(e.to_string()))?;
            for (first, out) in tiles {
                let n = out.len() / m;
                for (i, row) in out.chunks_exact(n).enumerate() {
                    y[i * w.rows + first..][..n].copy_from_slice(row);
                }
            }
        }
        let leading = &x_in.shape()[..x_in.rank() - 1];
        let shape: Vec<usize> = leading.iter().copied().chain([w.rows]).collect();
        Ok(vec![Tensor::from_vec(shape, y)?.into()])
    }

    /// The ggml rows layout only (the device kernel does not read row panels). Which products
    /// it computes follows the plan's operation set, as here.
    fn device_kernel(&self) -> Option<DeviceKernel> {
        let w = &self.0;
        if w.layout != Layout::Rows {
            return None;
        }
        Some(DeviceKernel::MatMulGguf {
            ggml_type: w.ggml_type,
            rows: w.rows,
            cols: w.cols,
        })
    }
}

/// The f32 products of the activations `x`.
fn f32_products(
    x: &[f32],
) -> impl Fn(&PanelMatrix, std::ops::Range<usize>, &mut [f32], Isa) -> samebits_ggml::Result<()>
+ Sync
+ '_ {
    move |w, panels, out, isa| w.matmul(panels, x, out, isa)
}

/// `y = x · Wᵀ` over a panel matrix, `m` rows of `x`, by `product`: parallel tasks of whole
/// panels, each all rows of `x` (the ISA is read here, on the calling thread, and handed to the
/// tasks).
fn panels_matmul(
    w: &PanelMatrix,
    m: usize,
    y: &mut [f32],
    product: impl Fn(&PanelMatrix, std::ops::Range<usize>, &mut [f32], Isa) -> samebits_ggml::Result<()>
    + Sync,
) -> Result<()> {
    let isa = Isa::active();
    let rows = w.rows();
    let invalid = |e: QuantError| crate::OpError::Invalid(e.to_string());
    let task_rows = PANELS_PER_TASK * PANEL_ROWS;
    if m == 1 {
        return y
            .par_chunks_mut(task_rows)
            .enumerate()
            .try_for_each(|(t, out)| {
                let first = t * PANELS_PER_TASK;
                let panels = first..(first + PANELS_PER_TASK).min(w.panels());
                product(w, panels, out, isa)
            })
            .map_err(invalid);
    }
    let blocks: Vec<Vec<f32>> = (0..w.panels().div_ceil(PANELS_PER_TASK))
        .into_par_iter()
        .map(|t| {
            let first = t * PANELS_PER_TASK;
            let panels = first..(first + PANELS_PER_TASK).min(w.panels());
            let n = (panels.end * PANEL_ROWS).min(rows) - first * PANEL_ROWS;
            let mut out = vec![0f32; m * n];
            product(w, panels, &mut out, isa)?;
            Ok(out)
        })
        .collect::<samebits_ggml::Result<_>>()
        .map_err(invalid)?;
    for (t, out) in blocks.iter().enumerate() {
        let n = out.len() / m;
        for (i, row) in out.chunks_exact(n.max(1)).enumerate() {
            y[i * rows + t * task_rows..][..n].copy_from_slice(row);
        }
    }
    Ok(())
}

#[derive(Debug)]
struct GatherGguf(QuantizedMatrix);

impl Op for GatherGguf {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(ValueType::tensor(DType::F32, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let w = &self.0;
        let blocks = w.blocks(inputs, 0)?;
        let indices = inputs.tensor(1)?;
        let ids = inputs.ints(1, "indices")?;
        let mut y = vec![0f32; ids.len() * w.cols];
        for (&id, out) in ids.iter().zip(y.chunks_exact_mut(w.cols.max(1))) {
            // Negative indices count from the end, as in ONNX Gather.
            let row = if id < 0 { id + w.rows as i64 } else { id };
            let Some(row) = usize::try_from(row).ok().filter(|&r| r < w.rows) else {
                bail!("index {id} lies outside the {} rows of the weight", w.rows);
            };
            match w.layout {
                Layout::Rows => {
                    let row_blocks = &blocks[row * w.row_bytes..(row + 1) * w.row_bytes];
                    dequantize_row(w.ggml_type, row_blocks, out)
                }
                Layout::Panels => w.panels(inputs, 0)?.dequantize_row(row, out),
            }
            .map_err(|e| crate::OpError::Invalid(e.to_string()))?;
        }
        Ok(vec![
            Tensor::from_vec(w.out_shape(indices.shape()), y)?.into(),
        ])
    }

    /// The ggml rows layout only, as for [`MatMulGguf`].
    fn device_kernel(&self) -> Option<DeviceKernel> {
        let w = &self.0;
        (w.layout == Layout::Rows).then_some(DeviceKernel::GatherGguf {
            ggml_type: w.ggml_type,
            rows: w.rows,
            cols: w.cols,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use samebits_ir::{Attribute, Node};
    use samebits_kernels::dot_q_f32;

    fn node(op: &str, ggml_type: GgmlType, rows: usize, cols: usize) -> Node {
        node_in(op, ggml_type, rows, cols, "rows")
    }

    fn node_in(op: &str, ggml_type: GgmlType, rows: usize, cols: usize, layout: &str) -> Node {
        Node {
            name: String::new(),
            op_type: op.into(),
            domain: "samebits".into(),
            inputs: vec!["a".into(), "b".into()],
            outputs: vec!["y".into()],
            attributes: [
                (
                    "ggml_type".to_string(),
                    Attribute::Int(ggml_type.id() as i64),
                ),
                ("rows".to_string(), Attribute::Int(rows as i64)),
                ("cols".to_string(), Attribute::Int(cols as i64)),
                ("layout".to_string(), Attribute::String(layout.into())),
            ]
            .into_iter()
            .collect(),
        }
    }

    fn build(node: &Node) -> Box<dyn Op> {
        build_for(node, crate::OperationSet::Reproducible)
    }

    fn build_for(node: &Node, operation_set: crate::OperationSet) -> Box<dyn Op> {
        let opsets = Default::default();
        let ctx = BuildContext {
            node,
            opset: 1,
            operation_set,
            opsets: &opsets,
            input_types: &[],
            constant_inputs: &[],
            captures: &[],
        };
        crate::registry::global().build(&ctx).unwrap()
    }

    /// Q8_0 blocks with varied scales and codes: `rows` rows of `cols` elements.
    fn q8_0_blocks(rows: usize, cols: usize) -> Vec<u8> {
        let mut bytes = Vec::new();
        for b in 0..rows * cols / 32 {
            let d = half::f16::from_f32(0.01 + (b % 7) as f32 * 0.003);
            bytes.extend_from_slice(&d.to_le_bytes());
            bytes.extend((0..32).map(|i| ((b * 37 + i * 11) % 255) as u8));
        }
        bytes
    }

    fn run(op: &dyn Op, a: Tensor, b: Tensor) -> Vec<f32> {
        let (a, b) = (Value::Tensor(a), Value::Tensor(b));
        let out = op.eval(&[Some(&a), Some(&b)]).unwrap();
        out[0]
            .as_tensor()
            .unwrap()
            .as_slice::<f32>()
            .unwrap()
            .to_vec()
    }

    #[test]
    fn matmul_equals_dot_q_f32_for_one_and_many_rows() {
        let (rows, cols) = (300, 160);
        let blocks = q8_0_blocks(rows, cols);
        let op = build(&node("MatMulGguf", GgmlType::Q8_0, rows, cols));
        let w = Tensor::from_vec(vec![blocks.len()], blocks.clone()).unwrap();
        let x: Vec<f32> = (0..3 * cols)
            .map(|i| ((i * 7919) % 97) as f32 / 13.0 - 3.5)
            .collect();
        let many = run(
            op.as_ref(),
            Tensor::from_vec(vec![3, cols], x.clone()).unwrap(),
            w.clone(),
        );
        let row_bytes = GgmlType::Q8_0.row_bytes(cols).unwrap();
        for m in 0..3 {
            let xm = &x[m * cols..(m + 1) * cols];
            let one = run(
                op.as_ref(),
                Tensor::from_vec(vec![1, cols], xm.to_vec()).unwrap(),
                w.clone(),
            );
            for n in 0..rows {
                let row = &blocks[n * row_bytes..(n + 1) * row_bytes];
                let expected = dot_q_f32(GgmlType::Q8_0, row, xm).unwrap();
                assert_eq!(one[n].to_bits(), expected.to_bits(), "one row, ({m}, {n})");
                assert_eq!(
                    many[m * rows + n].to_bits(),
                    expected.to_bits(),
                    "many rows, ({m}, {n})"
                );
            }
        }
    }

    /// Built for `reproducible-int8`, a Q8_0 product is `int8_dot` on every output, for one
    /// and several rows of `x`, whatever the thread count; its device kernel is the plain
    /// `MatMulGguf` (a device executor built for the set computes the integer products); a type
    /// without an integer product (F16) keeps the f32 product.
    #[test]
    fn int8_products_equal_int8_dot_for_one_and_many_rows() {
        let (rows, cols) = (300, 160);
        let blocks = q8_0_blocks(rows, cols);
        let int8 = crate::OperationSet::ReproducibleInt8;
        let op = build_for(&node("MatMulGguf", GgmlType::Q8_0, rows, cols), int8);
        assert_eq!(
            op.device_kernel(),
            Some(DeviceKernel::MatMulGguf {
                ggml_type: GgmlType::Q8_0,
                rows,
                cols
            })
        );
        let w = Tensor::from_vec(vec![blocks.len()], blocks.clone()).unwrap();
        let x: Vec<f32> = (0..5 * cols)
            .map(|i| ((i * 7919) % 97) as f32 / 13.0 - 3.5)
            .collect();
        let row_bytes = GgmlType::Q8_0.row_bytes(cols).unwrap();
        let xq = samebits_kernels::Int8Activations::quantize(&x, cols).unwrap();
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let many = pool.install(|| {
                run(
                    op.as_ref(),
                    Tensor::from_vec(vec![5, cols], x.clone()).unwrap(),
                    w.clone(),
                )
            });
            for m in 0..5 {
                let xm = &x[m * cols..(m + 1) * cols];
                let one = pool.install(|| {
                    run(
                        op.as_ref(),
                        Tensor::from_vec(vec![1, cols], xm.to_vec()).unwrap(),
                        w.clone(),
                    )
                });
                for n in 0..rows {
                    let row = &blocks[n * row_bytes..(n + 1) * row_bytes];
                    let expected = samebits_kernels::int8_dot(GgmlType::Q8_0, row, &xq, m)
                        .unwrap()
                        .to_bits();
                    assert_eq!(
                        one[n].to_bits(),
                        expected,
                        "{threads} threads, one row ({m}, {n})"
                    );
                    assert_eq!(
                        many[m * rows + n].to_bits(),
                        expected,
                        "many rows ({m}, {n})"
                    );
                }
            }
        }
        let f16 = build_for(&node("MatMulGguf", GgmlType::F16, 4, 32), int8);
        assert!(f16.device_kernel().is_some());
    }

    /// The CPU's packing of a rows weight into panels follows the weight: one op fed two
    /// different weights in turn (and a copy of the first, at another address) gives each
    /// weight's own products, never a stale packing.
    #[test]
    fn packed_panels_follow_the_weight() {
        let (rows, cols) = (40, 64);
        let first = q8_0_blocks(rows, cols);
        let mut second = first.clone();
        second.rotate_left(GgmlType::Q8_0.row_bytes(cols).unwrap());
        let op = build(&node("MatMulGguf", GgmlType::Q8_0, rows, cols));
        let x =
            Tensor::from_vec(vec![1, cols], (0..cols).map(|i| i as f32 / 9.0).collect()).unwrap();
        let reference = |blocks: &[u8]| -> Vec<u32> {
            blocks
                .chunks_exact(GgmlType::Q8_0.row_bytes(cols).unwrap())
                .map(|row| {
                    dot_q_f32(GgmlType::Q8_0, row, x.as_slice::<f32>().unwrap())
                        .unwrap()
                        .to_bits()
                })
                .collect()
        };
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        for blocks in [&first, &second, &first.clone(), &second] {
            let w = Tensor::from_vec(vec![blocks.len()], blocks.clone()).unwrap();
            assert_eq!(bits(run(op.as_ref(), x.clone(), w)), reference(blocks));
        }
    }

    /// Two plans compiled from one graph (an LLM's one-sequence and batched plans) hold one
    /// packing of a weight between them, and a packing goes when its last op goes.
    #[test]
    fn ops_reading_one_weight_share_its_packing() {
        let (rows, cols) = (40, 64);
        let blocks = q8_0_blocks(rows, cols);
        let w = Tensor::from_vec(vec![blocks.len()], blocks.clone()).unwrap();
        let m = QuantizedMatrix {
            ggml_type: GgmlType::Q8_0,
            rows,
            cols,
            row_bytes: GgmlType::Q8_0.row_bytes(cols).unwrap(),
            layout: Layout::Rows,
        };
        let (one, other) = (PackedPanels::default(), PackedPanels::default());
        let bytes = w.bytes().unwrap();
        let first = one.of(&m, &w, bytes).unwrap();
        assert!(Arc::ptr_eq(&first, &other.of(&m, &w, bytes).unwrap()));
        let weak = Arc::downgrade(&first);
        drop((first, one, other));
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn gather_dequantizes_the_picked_rows() {
        let (rows, cols) = (5, 64);
        let blocks = q8_0_blocks(rows, cols);
        let op = build(&node("GatherGguf", GgmlType::Q8_0, rows, cols));
        let w = Tensor::from_vec(vec![blocks.len()], blocks.clone()).unwrap();
        let ids = Tensor::from_vec(vec![1, 2], vec![3i64, -5]).unwrap();
        let y = run(op.as_ref(), w, ids);
        let mut all = vec![0f32; rows * cols];
        dequantize_row(GgmlType::Q8_0, &blocks, &mut all).unwrap();
        assert_eq!(&y[..cols], &all[3 * cols..4 * cols]);
        assert_eq!(&y[cols..], &all[..cols]);
    }

    /// The panels layout gives the rows layout's bits, for one and several activation rows, and
    /// its gather the same rows; 300 rows end on a partly padded panel.
    #[test]
    fn panels_layout_equals_rows_layout() {
        let (rows, cols) = (300, 160);
        let blocks = q8_0_blocks(rows, cols);
        let row_bytes = GgmlType::Q8_0.row_bytes(cols).unwrap();
        let packed = samebits_kernels::pack_panels(GgmlType::Q8_0, rows, cols, |first, out| {
            out.copy_from_slice(&blocks[first * row_bytes..][..out.len()]);
            Ok::<(), QuantError>(())
        })
        .unwrap();
        let w_rows = Tensor::from_vec(vec![blocks.len()], blocks).unwrap();
        let w_panels = Tensor::from_vec(vec![packed.len()], packed).unwrap();
        let by_rows = build(&node("MatMulGguf", GgmlType::Q8_0, rows, cols));
        let by_panels = build(&node_in("MatMulGguf", GgmlType::Q8_0, rows, cols, "panels"));
        for m in [1, 3, 6] {
            let x: Vec<f32> = (0..m * cols)
                .map(|i| ((i * 7919) % 97) as f32 / 13.0 - 3.5)
                .collect();
            let x = Tensor::from_vec(vec![m, cols], x).unwrap();
            let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            assert_eq!(
                bits(run(by_panels.as_ref(), x.clone(), w_panels.clone())),
                bits(run(by_rows.as_ref(), x, w_rows.clone())),
                "{m} rows"
            );
        }
        let ids = Tensor::from_vec(vec![3], vec![0i64, 299, -17]).unwrap();
        let gather_rows = build(&node("GatherGguf", GgmlType::Q8_0, rows, cols));
        let gather_panels = build(&node_in("GatherGguf", GgmlType::Q8_0, rows, cols, "panels"));
        assert_eq!(
            run(gather_panels.as_ref(), w_panels, ids.clone()),
            run(gather_rows.as_ref(), w_rows, ids)
        );
    }

    #[test]
    fn rejects_a_weight_of_the_wrong_size() {
        let op = build(&node("MatMulGguf", GgmlType::Q8_0, 2, 32));
        let (x, w) = (
            Value::Tensor(Tensor::from_vec(vec![1, 32], vec![0f32; 32]).unwrap()),
            Value::Tensor(Tensor::from_vec(vec![3], vec![0u8; 3]).unwrap()),
        );
        let err = op.eval(&[Some(&x), Some(&w)]).unwrap_err().to_string();
        assert!(err.contains("68"), "{err}");
    }
}
