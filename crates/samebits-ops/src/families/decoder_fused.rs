//! The ops that the decoder-fusion rules of samebits-passes (`decoder_fusion.rs`) emit, domain
//! `"samebits"`: each stands for a few nodes of an LLM decoder that a device runs as one launch.
//!
//! - `SiluGate(g, u)`: `Mul(Mul(g, Sigmoid(g)), u)`, the SiLU gate of a feed-forward block
//!   (device kernel [`DeviceKernel::SiluGate`]).
//! - `MatMulGgufAdd(x, w, r)`: `Add(MatMulGguf(x, w), r)` (either operand order), a product with
//!   its residual connection (device kernel [`DeviceKernel::MatMulGgufAdd`], the product's
//!   attributes).
//! - `GgufProducts(x, scale, w0[, w1[, w2]][, cos, sin])`: an `RMSNormalization` over the last
//!   axis, one to three `MatMulGguf` of its output, then the interleaved `RotaryEmbedding` of
//!   some products or the `SiluGate` of two (device kernel [`DeviceKernel::GgufProducts`]: a
//!   llama layer's norm, Q, K, V and rotaries, or its norm, gate, up and gate).
//! - `AttentionProduct(q, k, v, past_key, past_value, w, r)`: `Attention` (no mask) then the
//!   `MatMulGgufAdd` of its output Y with w and r; outputs the sum, present_key and
//!   present_value (device kernel [`DeviceKernel::AttentionProduct`]).
//!
//! A node of these ops carries the nodes it replaces in its `body` graph attribute (body inputs
//! are the node's inputs in order, body outputs its outputs). The CPU evaluation runs the body
//! as an ordinary plan: the very ops, kernels and order of the unfused graph, so fusion changes
//! no bit on the CPU; a device's fused launch computes the same roundings in the same order
//! (contract sections `elementwise-fusion`, `gguf`, `attention`), and where it has no launch
//! for the inputs (many rows: a prefill) it runs the body step by step ([`Op::body`]). The
//! device kernel is read off the body's own steps, so the body stays the one definition of
//! what the node computes; a body of another shape gets no device kernel.

use crate::registry::Registry;
use crate::{
    BuildContext, DeviceKernel, GGUF_PRODUCTS_MAX, GgufProductsKernel, Inputs, InputsExt, NodeArgs,
    Op, Plan, PlanStep, Result,
};
use samebits_ir::{Graph, Value, ValueType};
use std::sync::Arc;

/// The domain of the ops of this file.
pub const DOMAIN: &str = "samebits";
/// `SiluGate(g, u)`, see the module docs.
pub const SILU_GATE: &str = "SiluGate";
/// `MatMulGgufAdd(x, w, r)`, see the module docs.
pub const MATMUL_GGUF_ADD: &str = "MatMulGgufAdd";
/// `GgufProducts(x, scale, w0.., cos, sin)`, see the module docs.
pub const GGUF_PRODUCTS: &str = "GgufProducts";
/// `AttentionProduct(q, k, v, past_key, past_value, w, r)`, see the module docs.
pub const ATTENTION_PRODUCT: &str = "AttentionProduct";

pub fn register(r: &mut Registry) {
    r.register(DOMAIN, SILU_GATE, |ctx| {
        Ok(Box::new(BodyOp::build(ctx, |_| {
            Ok(DeviceKernel::SiluGate)
        })?))
    });
    r.register(DOMAIN, MATMUL_GGUF_ADD, |ctx| {
        Ok(Box::new(BodyOp::build(ctx, product_add_kernel)?))
    });
    r.register(DOMAIN, GGUF_PRODUCTS, |ctx| {
        Ok(Box::new(BodyOp::build(ctx, products_kernel)?))
    });
    r.register(DOMAIN, ATTENTION_PRODUCT, |ctx| {
        Ok(Box::new(BodyOp::build(ctx, attention_product_kernel)?))
    });
}

/// A fused node: the device kernel it names and its body compiled as a plan.
#[derive(Debug)]
struct BodyOp {
    kernel: Option<DeviceKernel>,
    inputs: usize,
    output_types: Vec<Option<ValueType>>,
    body: Arc<Plan>,
}

impl BodyOp {
    /// The op of `ctx.node`, its device kernel chosen by `kernel` from the body's plan.
    fn build(ctx: &BuildContext, kernel: fn(&Plan) -> Result<DeviceKernel>) -> Result<BodyOp> {
        let graph: &Graph = NodeArgs::new(ctx.node).graph("body")?;
        let body = Plan::build(graph, ctx.opsets, ctx.operation_set, &[])?;
        if graph.inputs.len() != ctx.node.inputs.len() {
            crate::bail!(
                "{}: the body takes {} inputs, the node gives {}",
                ctx.node.op_type,
                graph.inputs.len(),
                ctx.node.inputs.len()
            );
        }
        Ok(BodyOp {
            kernel: kernel(&body).ok(),
            inputs: graph.inputs.len(),
            output_types: graph.outputs.iter().map(|o| o.ty.clone()).collect(),
            body: Arc::new(body),
        })
    }
}

/// The device kernel of a `MatMulGgufAdd` body: its product's.
fn product_add_kernel(body: &Plan) -> Result<DeviceKernel> {
    match body.steps().find_map(|s| s.op.device_kernel()) {
        Some(DeviceKernel::MatMulGguf {
            ggml_type,
            rows,
            cols,
        }) => Ok(DeviceKernel::MatMulGgufAdd {
            ggml_type,
            rows,
            cols,
        }),
        _ => crate::bail!("{MATMUL_GGUF_ADD}: the body's product has no device kernel"),
    }
}

/// The device kernel of a `GgufProducts` body: norm, products, then rotaries or the gate
/// (module docs), each step reading what the kernel's definition says it reads.
fn products_kernel(body: &Plan) -> Result<DeviceKernel> {
    let steps: Vec<PlanStep> = body.steps().collect();
    let inputs: Vec<usize> = body.input_slots().collect();
    let kernel = |i: usize| steps.get(i).and_then(|s| s.op.device_kernel());
    let reads = |i: usize, slots: &[Option<usize>]| steps[i].inputs == slots;
    let Some(DeviceKernel::RmsNorm { axis: -1, epsilon }) = kernel(0) else {
        crate::bail!("{GGUF_PRODUCTS}: the body does not start with a row norm");
    };
    if inputs.len() < 3 || !reads(0, &[Some(inputs[0]), Some(inputs[1])]) {
        crate::bail!("{GGUF_PRODUCTS}: the norm does not read inputs 0 and 1");
    }
    let normed = steps[0].outputs[0];
    let mut kind = None;
    let mut rows = [0; GGUF_PRODUCTS_MAX];
    // Each product's output slot, then its final one (after a rotary).
    let mut products: Vec<(usize, usize)> = Vec::new();
    while let Some(DeviceKernel::MatMulGguf {
        ggml_type,
        rows: n,
        cols,
    }) = kernel(1 + products.len())
    {
        let (i, j) = (1 + products.len(), products.len());
        if j == GGUF_PRODUCTS_MAX
            || kind.is_some_and(|k| k != (ggml_type, cols))
            || !inputs
                .get(2 + j)
                .is_some_and(|&w| reads(i, &[Some(normed), Some(w)]))
        {
            crate::bail!("{GGUF_PRODUCTS}: product {j} is not one of the kernel's");
        }
        kind = Some((ggml_type, cols));
        rows[j] = n;
        products.push((steps[i].outputs[0], steps[i].outputs[0]));
    }
    let Some((ggml_type, cols)) = kind else {
        crate::bail!("{GGUF_PRODUCTS}: the body has no product");
    };
    let count = products.len();
    let mut rotary = [None; GGUF_PRODUCTS_MAX];
    let mut gate = false;
    for i in 1 + count..steps.len() {
        let product = |slot: Option<usize>| products.iter().position(|p| Some(p.0) == slot);
        match kernel(i) {
            Some(DeviceKernel::SiluGate)
                if count == 2
                    && i == steps.len() - 1
                    && reads(i, &[Some(products[0].0), Some(products[1].0)]) =>
            {
                gate = true;
                products.truncate(1);
                products[0].1 = steps[i].outputs[0];
            }
            Some(DeviceKernel::Rotary {
                interleaved: true,
                num_heads,
                rotary_dim,
            }) if !gate => {
                let tables = inputs.get(2 + count..4 + count);
                let Some(j) = product(steps[i].inputs[0]).filter(|&j| rotary[j].is_none()) else {
                    crate::bail!("{GGUF_PRODUCTS}: a rotary of no product");
                };
                if tables.is_none_or(|t| steps[i].inputs[1..] != [Some(t[0]), Some(t[1])]) {
                    crate::bail!("{GGUF_PRODUCTS}: a rotary not of the tables' inputs");
                }
                rotary[j] = Some((num_heads, rotary_dim));
                products[j].1 = steps[i].outputs[0];
            }
            _ => crate::bail!("{GGUF_PRODUCTS}: step {i} is not part of the kernel"),
        }
    }
    let tables = match rotary.iter().any(Option::is_some) {
        true => 2,
        false => 0,
    };
    if inputs.len() != 2 + count + tables {
        crate::bail!(
            "{GGUF_PRODUCTS}: {} inputs for {count} products",
            inputs.len()
        );
    }
    let finals: Vec<usize> = products.iter().map(|p| p.1).collect();
    if body.output_slots().collect::<Vec<_>>() != finals {
        crate::bail!("{GGUF_PRODUCTS}: the outputs are not the products' in order");
    }
    Ok(DeviceKernel::GgufProducts(GgufProductsKernel {
        epsilon,
        ggml_type,
        cols,
        count,
        rows,
        rotary,
        gate,
    }))
}

/// The device kernel of an `AttentionProduct` body: its Attention's and its product's
/// attributes, the steps reading the inputs in the kernel's order.
fn attention_product_kernel(body: &Plan) -> Result<DeviceKernel> {
    let steps: Vec<PlanStep> = body.steps().collect();
    let i: Vec<Option<usize>> = body.input_slots().map(Some).collect();
    let (
        [attention, product],
        Some(DeviceKernel::Attention {
            is_causal,
            q_num_heads,
            kv_num_heads,
            scale,
        }),
        Some(DeviceKernel::MatMulGgufAdd {
            ggml_type,
            rows,
            cols,
        }),
    ) = (
        &steps[..],
        steps.first().and_then(|s| s.op.device_kernel()),
        steps.get(1).and_then(|s| s.op.device_kernel()),
    )
    else {
        crate::bail!("{ATTENTION_PRODUCT}: the body is not an attention and a product");
    };
    let outputs: Vec<usize> = body.output_slots().collect();
    let fits = i.len() == 7
        && attention.inputs == [i[0], i[1], i[2], None, i[3], i[4]]
        && attention.outputs.len() == 3
        && product.inputs == [Some(attention.outputs[0]), i[5], i[6]]
        && outputs
            == [
                product.outputs[0],
                attention.outputs[1],
                attention.outputs[2],
            ];
    if !fits {
        crate::bail!("{ATTENTION_PRODUCT}: the body's steps do not read the kernel's inputs");
    }
    Ok(DeviceKernel::AttentionProduct {
        is_causal,
        q_num_heads,
        kv_num_heads,
        scale,
        ggml_type,
        rows,
        cols,
    })
}

impl Op for BodyOp {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(self.output_types.clone())
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let fed = (0..self.inputs)
            .map(|i| inputs.value(i).cloned())
            .collect::<Result<Vec<_>>>()?;
        self.body.run_body(fed)
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        self.kernel
    }

    fn body(&self) -> Option<&Arc<Plan>> {
        Some(&self.body)
    }
}
