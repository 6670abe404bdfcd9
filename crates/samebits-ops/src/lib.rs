//! samebits operators and the CPU graph interpreter.
//!
//! - [`Op`]: an operator instance built from one graph node (attributes parsed once), able to
//!   infer its output types and to evaluate itself on CPU values.
//! - [`registry`]: maps `(domain, op_type)` to a constructor; each op family registers its ops in
//!   its own file under `families/`, one line per op.
//! - [`Plan`]: a graph compiled into a list of op instances over value slots, run by
//!   [`Plan::run`]; control-flow ops build plans for their subgraphs the same way.
//! - [`DeviceKernel`]: what an op computes in terms of the shared reproducible kernels, for
//!   backends other than the CPU ([`Op::device_kernel`]), and the shape resolutions the CPU ops
//!   and those backends share ([`ShapedKernel`], [`MatrixProducts`], [`AttentionHeads`],
//!   [`RotaryShape`]): one definition of each shape rule.
//! - [`OperationSet`]: which promise the kernels keep (`reproducible`, `deterministic`,
//!   `default`), as written in docs/contract.md.

mod along_axis;
mod args;
pub mod broadcast;
mod device_kernel;
mod error;
mod families;
pub use families::{decoder_fused, fused};
mod layout;
pub use layout::StridedView;
mod op;
mod plan;
pub mod registry;
mod run_stats;
mod spatial;
mod staging;

pub use args::{NodeArgs, normalize_axis};
pub use device_kernel::{
    BinaryKernel, ChainKernel, ChainLayout, ChainOp, ChainOperand, ChainStep, CopyPart,
    DeviceKernel, GGUF_PRODUCTS_MAX, GgufProductsKernel, RECURRENT_STAGE_COLS,
    RECURRENT_STAGE_ROWS, ResizeTaps, SOURCE_KERNEL_MAX_BUFFERS, SOURCE_KERNEL_MAX_FLOATS,
    SOURCE_KERNEL_MAX_INTS, SOURCE_KERNEL_MAX_OUTPUTS, SOURCE_TABLE_EXACT, ShapedKernel,
    SourceKernel, SourceLaunch, UnaryKernel,
};
pub use error::{OpError, Result};
pub use families::{
    AttentionHeads, HeadsLayout, MatrixProducts, RotaryShape, gemm_c_strides, gemm_products,
    matmul_products, softmax_f32,
};
pub use op::{BuildContext, Inputs, InputsExt, Op, OperationSet};
pub use plan::{
    Plan, PlanStep, RunOptions, StepObserver, free_variables, node_captures, topological_order,
};
pub use run_stats::RunStats;
