//! The ops that the decoder-fusion rules of samebits-passes (`decoder_fusion.rs`) emit, domain
//! `"samebits"`: each stands for a few nodes of an LLM decoder that a device runs as one launch.
//!
//! - `SiluGate(g, u)`: `Mul(Mul(g, Sigmoid(g)), u)`, the SiLU gate of a feed-forward block
//!   (device kernel [`DeviceKernel::SiluGate`]).
//! - `MatMulGgufAdd(x, w, r)`: `Add(MatMulGguf(x, w), r)` (either operand order), a product with
//!   its residual connection (device kernel [`DeviceKernel::MatMulGgufAdd`], the product's
//!   attributes).
//!
//! A node of these ops carries the nodes it replaces in its `body` graph attribute (body inputs
//! are the node's inputs in order, the body output is its output). The CPU evaluation runs the
//! body as an ordinary plan: the very ops, kernels and order of the unfused graph, so fusion
//! changes no bit on the CPU; a device's fused launch computes the same roundings in the same
//! order (contract sections `elementwise-fusion`, `gguf`).

use crate::registry::Registry;
use crate::{
    BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, Plan, Result, RunOptions,
};
use samebits_ir::{Graph, Value, ValueType};

/// The domain of the ops of this file.
pub const DOMAIN: &str = "samebits";
/// `SiluGate(g, u)`, see the module docs.
pub const SILU_GATE: &str = "SiluGate";
/// `MatMulGgufAdd(x, w, r)`, see the module docs.
pub const MATMUL_GGUF_ADD: &str = "MatMulGgufAdd";

pub fn register(r: &mut Registry) {
    r.register(DOMAIN, SILU_GATE, |ctx| {
        Ok(Box::new(BodyOp::build(ctx, |_| {
            Ok(DeviceKernel::SiluGate)
        })?))
    });
    r.register(DOMAIN, MATMUL_GGUF_ADD, |ctx| {
        Ok(Box::new(BodyOp::build(ctx, product_add_kernel)?))
    });
}

/// A fused node: the device kernel it names and its body compiled as a plan.
#[derive(Debug)]
struct BodyOp {
    kernel: Option<DeviceKernel>,
    inputs: usize,
    output_types: Vec<Option<ValueType>>,
    body: Plan,
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
            body,
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

impl Op for BodyOp {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(self.output_types.clone())
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let fed = (0..self.inputs)
            .map(|i| inputs.value(i).cloned())
            .collect::<Result<Vec<_>>>()?;
        self.body.run(fed, RunOptions::default())
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        self.kernel
    }
}
