//! The samebits compiler passes over the graph IR, in pipeline order:
//!
//! 1. [`topological`]: nodes sorted so every node follows its producers.
//! 2. [`differentiation`]: each `Gradient` node (ONNX preview training) becomes the nodes that
//!    compute its gradients, in reverse mode.
//! 3. [`inference`]: dtypes and shapes of intermediate values, from each op's `infer`.
//! 4. [`folding`]: nodes whose inputs are all constant are evaluated once, with the same
//!    kernels and operation set as the run, so folding never changes bits.
//! 5. [`cast_hoisting`]: a Cast to float32 of a reshape / expand / transpose of a value moves
//!    before it (`Cast(Expand(mask))` -> `Expand(Cast(mask))`, the same bits).
//! 6. [`dead_nodes`]: nodes and initializers that no graph output depends on are removed.
//! 7. [`fusion`]: runs of elementwise f32 nodes become one `samebits::ElementwiseChain` node
//!    that computes the same per-element operations in one pass (the same bits).
//!
//! [`specialization`] is not part of the pipeline either: samebits-runtime runs it once per
//! set of input shapes, folding the shape arithmetic of dynamic-axis exports into constants
//! for those shapes (guarded where a shape was read from an intermediate value).
//!
//! [`decoder_fusion`] is not part of the pipeline: an LLM decoder's builder (samebits-llm) runs
//! it on its graph, rewriting its Sigmoid/Mul/Mul SiLU gates and product + residual Adds into
//! the fused `samebits::` ops a device runs as one launch (the same bits).
//!
//! [`Pipeline`] runs them and writes the JSON and DOT dump of the IR after each pass.

pub mod cast_hoisting;
pub mod dead_nodes;
pub mod decoder_fusion;
pub mod differentiation;
pub mod folding;
pub mod fusion;
pub mod inference;
mod pipeline;
pub mod specialization;
pub mod topological;

pub use pipeline::{PassReport, Pipeline};

/// A pass failure; the message names the node.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("{pass}: {source}")]
    Op {
        pass: &'static str,
        #[source]
        source: samebits_ops::OpError,
    },
    #[error("writing {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = PassError> = std::result::Result<T, E>;

/// The op of `node` as a run would build it (no constant inputs marked, no captures), the
/// error naming `pass` and the node: what folding and specialisation evaluate.
pub(crate) fn build_op(
    node: &samebits_ir::Node,
    graph: &samebits_ir::Graph,
    opsets: &samebits_ir::OpsetImports,
    operation_set: samebits_ops::OperationSet,
    pass: &'static str,
) -> Result<Box<dyn samebits_ops::Op>> {
    use samebits_ops::{BuildContext, registry};
    let input_types: Vec<_> = node.inputs.iter().map(|n| graph.value_type(n)).collect();
    let ctx = BuildContext {
        node,
        opset: registry::opset_of(opsets, &node.domain),
        operation_set,
        opsets,
        input_types: &input_types,
        constant_inputs: &[],
        captures: &[],
    };
    registry::global()
        .build(&ctx)
        .map_err(|source| PassError::Op {
            pass,
            source: source.at(&node.describe()),
        })
}
