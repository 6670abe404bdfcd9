//! Products of block-quantized ggml weights with f32 activations, in the canonical order of
//! `docs/contract.md` (canonical-sum): each weight dequantized by samebits-ggml's one definition of
//! its block format (`docs/gguf.md`) and rounded to f32, then the canonical dot product.
//!
//! - [`dot`]: [`dot_q_f32`] / [`matvec_q_f32`] over rows in the ggml layout (any format with a
//!   dequantization), for the decode hot path.
//! - [`panel`]: [`PanelMatrix`], the same products over row panels packed once at load time
//!   ([`pack_panels`]) so that SIMD lanes are output rows; the types of [`PANEL_TYPES`]. Its
//!   exact-integer tier ([`PanelMatrix::matmul_int8`] over [`Int8Activations`], [`int8_dot`]) sums
//!   each block's products of 8-bit codes exactly (the types of [`INT8_TYPES`]).

pub mod dot;
pub mod panel;

pub use dot::{dot_q_f32, matvec_q_f32};
pub use panel::{
    INT8_TYPES, Int8Activations, PANEL_ROWS, PANEL_TYPES, PanelMatrix, has_int8_products,
    has_panel_layout, int8_block_codes, int8_dot, pack_panels, panel_bytes,
};
