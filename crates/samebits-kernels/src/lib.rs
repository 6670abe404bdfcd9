//! samebits linear-algebra kernels: reproducible numeric kernels on plain slices.
//!
//! Every kernel computes exactly what `docs/contract.md` writes, so its bits do not depend on
//! the CPU, the ISA ([`Isa`]), the thread count or the batch size. Reductions follow the
//! canonical order (`canonical-sum`); SIMD lanes and threads split the work across outputs only.
//!
//! Public API:
//! - [`canonical`]: the scalar reference order ([`canonical_dot`], [`canonical_sum`], ...),
//!   the oracle of every test, and [`canonical_fold`], the tiled fold of any element type that
//!   every scalar reduction loop goes through.
//! - [`isa`]: [`Isa::detect`], [`Isa::available`], [`set_forced_isa`], [`with_isa`] and the
//!   `SAMEBITS_ISA` environment variable.
//! - [`gemm`]: [`gemm_f32`] / [`gemm()`] (f32, f16, bf16 inputs, [`Epilogue`]) over [`MatRef`]
//!   strided views; [`PackedB`] and [`gemm_packed_b`] for a B packed once and reused.
//! - [`conv`]: [`conv_f32`] and [`conv_transpose_f32`] (1D/2D/3D, groups, strides, dilations,
//!   pads, output padding) described by [`ConvGeometry`] / [`ConvTransposeGeometry`]; their
//!   `_mapped` forms apply an [`OutputMap`] to the finished outputs (fused epilogues).
//! - [`pool`]: [`pool_f32`] (max / average, N-d, ceil mode, count_include_pad) described by
//!   [`PoolGeometry`], and [`global_pool_f32`].
//! - [`quant`]: products of block-quantized ggml weights with f32 activations ([`dot_q_f32`],
//!   [`matvec_q_f32`], and [`PanelMatrix`] over row panels packed at load time), and the
//!   exact-integer tier over 8-bit activations ([`Int8Activations`], [`int8_dot`]).
//! - [`taps`]: [`Taps`], the spatial geometry of conv, transposed conv and pooling widened to 3
//!   axes, shared with samebits-cuda's device structs.
//! - [`reduce`]: [`reduce_f32`] ([`ReduceKind`]: sum, sum of squares, product, max, min) and
//!   [`argreduce_f32`] over the middle axis of `[outer, len, inner]`; [`canonical_max`] /
//!   [`canonical_min`], the one definition of `reduce-extrema` (f32 and f64, [`ExtremumFloat`]).

pub mod canonical;
pub mod conv;
pub mod gemm;
pub mod isa;
mod lanes;
pub mod pool;
pub mod quant;
pub mod reduce;
pub mod taps;

pub use canonical::{
    REDUCTION_TILE, canonical_dot, canonical_dot_strided, canonical_fold, canonical_prod,
    canonical_prod_strided, canonical_sum, canonical_sum_squares_strided, canonical_sum_strided,
};
pub use conv::{
    ConvGeometry, ConvTransposeGeometry, OutputMap, PackedConvWeights, conv_f32, conv_f32_mapped,
    conv_transpose_f32, conv_transpose_f32_mapped,
};
pub use gemm::{Epilogue, GemmInput, MatRef, PackedB, gemm, gemm_f32, gemm_packed_b};
pub use isa::{Isa, IsaError, set_forced_isa, with_isa};
pub use pool::{PoolGeometry, PoolKind, global_pool_f32, pool_f32};
pub use quant::{
    INT8_TYPES, Int8Activations, PANEL_ROWS, PANEL_TYPES, PanelMatrix, dot_q_f32,
    has_int8_products, has_panel_layout, int8_block_codes, int8_dot, matvec_q_f32, pack_panels,
    panel_bytes,
};
pub use reduce::{
    ArgKind, ExtremumFloat, ReduceKind, argreduce_f32, canonical_max, canonical_min, reduce_f32,
};
pub use taps::{Taps, widen};
