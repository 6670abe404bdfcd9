//! Op families, one file each. Adding an op is one `register` line plus its code in the
//! family's file.

mod activation;
mod attention;
mod cast;
mod causal_conv;
mod col2im;
mod control_flow;
mod conv;
pub mod decoder_fused;
mod deform_conv;
mod detection;
mod elementwise;
mod flex_attention;
mod fourier;
pub mod fused;
mod generators;
mod gguf_matmul;
mod grid_sample;
mod indexing;
mod linalg;
mod linear_attention;
mod loss;
mod ml;
mod normalization;
mod numeric;
mod optional;
mod pool;
mod quantize;
mod random;
mod recurrent;
mod reduce;
mod resize;
mod roi_align;
mod sequence;
mod shape;
mod signal;
mod softmax;
mod string;
mod tensor_scatter;
mod tfidf;
mod training;

pub use attention::{AttentionHeads, HeadsLayout, RotaryShape};
pub use linalg::{MatrixProducts, gemm_c_strides, gemm_products, matmul_products};
pub use softmax::softmax_f32;

use crate::registry::Registry;
use samebits_ir::{DType, ValueType};

pub fn register_all(r: &mut Registry) {
    control_flow::register(r);
    elementwise::register(r);
    optional::register(r);
    quantize::register(r);
    sequence::register(r);
    string::register(r);
    tfidf::register(r);
    cast::register(r);
    shape::register(r);
    indexing::register(r);
    tensor_scatter::register(r);
    generators::register(r);
    reduce::register(r);
    normalization::register(r);
    softmax::register(r);
    activation::register(r);
    attention::register(r);
    linear_attention::register(r);
    flex_attention::register(r);
    linalg::register(r);
    conv::register(r);
    causal_conv::register(r);
    deform_conv::register(r);
    col2im::register(r);
    pool::register(r);
    resize::register(r);
    grid_sample::register(r);
    detection::register(r);
    roi_align::register(r);
    recurrent::register(r);
    random::register(r);
    loss::register(r);
    ml::register(r);
    training::register(r);
    signal::register(r);
    fourier::register(r);
    gguf_matmul::register(r);
    fused::register(r);
    decoder_fused::register(r);
}

/// The dtype of input `i`, when known.
fn input_dtype(inputs: &[Option<ValueType>], i: usize) -> Option<DType> {
    inputs.get(i)?.as_ref()?.dtype()
}

/// One output of `dtype` (when known) and unknown shape: what most data-moving ops infer.
fn output_of(dtype: Option<DType>) -> Vec<Option<ValueType>> {
    vec![dtype.map(|d| ValueType::tensor(d, None))]
}
