//! The launches of decoder fusion's multi-step ops (samebits-ops' `decoder_fused.rs`, which
//! samebits-passes' `decoder_fusion.rs` writes into the graph): `GgufProducts` (a row norm,
//! up to three GGUF products of the normalized rows, and their rotaries or SiLU gate) and
//! `AttentionProduct` (attention, then the GGUF product of its output plus a residual term).
//!
//! Each runs as one launch where its inputs fit the fused kernel: few activation rows (fewer
//! than [`GGUF_GEMM_MIN_ROWS`], a decode step) for the products, each block recomputing the
//! row's RMS statistic in the canonical order (kernels/gguf.cu); few queries and heads of 64
//! values for the attention, head h's outputs being the 64-term tile h of every dot of the
//! product, the tiles folded in order by the last head block (kernels/attention.cu,
//! `sb_attention_product`). Otherwise no launch is planned and the executor runs the op's body
//! step by step on the device (`Op::body`): the same ops, the same bits.

use samebits_ir::DType;
use samebits_kernels::REDUCTION_TILE;
use samebits_ops::{DeviceKernel, GgufProductsKernel};

use super::dispatch::{
    ArgInfo, GROUPED_ATTENTION_MIN_QUERIES, Launch, attention, f32_arg, plan_launch,
};
use crate::attention::HeadsLayout;
use crate::gguf::GGUF_GEMM_MIN_ROWS;

/// The one launch of a `GgufProducts` step on these inputs (x, scale, the weights, then the
/// cos and sin tables when a product has a rotary), or `None`.
pub(super) fn gguf_products(
    k: &GgufProductsKernel,
    args: &[Option<ArgInfo<'_>>],
) -> Option<Launch> {
    let f32_arg = |i: usize| f32_arg(args, i);
    let x = f32_arg(0)?.shape;
    let m = x.iter().product::<usize>() / k.cols.max(1);
    let tables = match k.rotary.iter().any(Option::is_some) {
        true => 2,
        false => 0,
    };
    let fits = args.len() == 2 + k.count + tables
        && x.last() == Some(&k.cols)
        && (1..GGUF_GEMM_MIN_ROWS).contains(&m)
        && f32_arg(1)?.shape.iter().product::<usize>() == k.cols;
    if !fits {
        return None;
    }
    let activations = Some(ArgInfo {
        dtype: DType::F32,
        shape: x,
        host: None,
    });
    let mut matrices = Vec::with_capacity(k.count);
    let mut out_shapes = Vec::with_capacity(k.count);
    for j in 0..k.count {
        let product = DeviceKernel::MatMulGguf {
            ggml_type: k.ggml_type,
            rows: k.rows[j],
            cols: k.cols,
        };
        let Launch::Gguf { out_shape, .. } = plan_launch(product, &[activations, args[2 + j]], 1)?
        else {
            return None;
        };
        let rotary = match k.rotary[j] {
            None => None,
            Some((num_heads, rotary_dim)) => {
                let kernel = DeviceKernel::Rotary {
                    interleaved: true,
                    num_heads,
                    rotary_dim,
                };
                let product = Some(ArgInfo {
                    dtype: DType::F32,
                    shape: &out_shape,
                    host: None,
                });
                let rotary_args = [product, f32_arg(2 + k.count), f32_arg(3 + k.count)];
                let Launch::Rotary {
                    layout,
                    width,
                    rot,
                    interleaved: true,
                } = plan_launch(kernel, &rotary_args, 1)?
                else {
                    return None;
                };
                // The fused kernel rotates whole heads of the product's rows as they come.
                let split = match out_shape[..] {
                    [b, s, n] => {
                        HeadsLayout::split(b, s, layout.heads, layout.size) == layout
                            && n == k.rows[j]
                    }
                    _ => false,
                };
                if !split {
                    return None;
                }
                Some((layout.size, rot, width))
            }
        };
        matrices.push((k.rows[j], rotary));
        out_shapes.push(out_shape);
    }
    if k.gate {
        if k.count != 2 || out_shapes[0] != out_shapes[1] {
            return None;
        }
        out_shapes.truncate(1);
    }
    Some(Launch::GgufProducts {
        ggml_type: k.ggml_type,
        cols: k.cols,
        epsilon: k.epsilon,
        matrices,
        gate: k.gate,
        out_shapes,
    })
}

/// The one launch of an `AttentionProduct` step on these inputs (q, k, v, past_key,
/// past_value, w, r; read through [`attention_product_slots`]), or `None`.
pub(super) fn attention_product(
    kernel: DeviceKernel,
    args: &[Option<ArgInfo<'_>>],
    outputs: usize,
) -> Option<Launch> {
    let DeviceKernel::AttentionProduct {
        is_causal,
        q_num_heads,
        kv_num_heads,
        scale,
        ggml_type,
        rows,
        cols,
    } = kernel
    else {
        return None;
    };
    let [q, k, v, past_key, past_value, w, r] = args else {
        return None;
    };
    let attention_args = [*q, *k, *v, None, *past_key, *past_value];
    let Launch::Attention {
        q,
        k,
        v,
        y,
        y_shape,
        causal,
        scale,
        product: None,
    } = attention(
        &attention_args,
        outputs,
        is_causal,
        (q_num_heads, kv_num_heads),
        scale,
    )?
    else {
        return None;
    };
    let product = DeviceKernel::MatMulGguf {
        ggml_type,
        rows,
        cols,
    };
    let y_arg = Some(ArgInfo {
        dtype: DType::F32,
        shape: &y_shape,
        host: None,
    });
    let Launch::Gguf { out_shape, .. } = plan_launch(product, &[y_arg, *w], 1)? else {
        return None;
    };
    let tile = REDUCTION_TILE;
    let fits = q.seq < GROUPED_ATTENTION_MIN_QUERIES
        && v.size == tile
        && cols == q.heads * tile
        // The fused kernel addresses a head's tile of a weight row in whole blocks.
        && ggml_type.row_bytes(tile).is_some()
        && y == HeadsLayout::split(q.batch, q.seq, q.heads, tile)
        && r.is_some_and(|r| r.dtype == DType::F32 && r.shape == out_shape.as_slice());
    fits.then_some(Launch::Attention {
        q,
        k,
        v,
        y,
        y_shape,
        causal,
        scale,
        product: Some((ggml_type, rows, out_shape)),
    })
}

/// An `AttentionProduct` step's input slots in the order its launch reads them: Attention's
/// six (the mask, absent, fourth), then the weights and the residual term.
pub(super) fn attention_product_slots(inputs: &[Option<usize>]) -> Vec<Option<usize>> {
    let mut slots = inputs.to_vec();
    slots.insert(3.min(slots.len()), None);
    slots
}
