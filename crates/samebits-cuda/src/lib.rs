//! samebits CUDA backend: kernels compiled at run time by NVRTC that give, bit for bit, the
//! results of the CPU kernels (docs/contract.md), on any GPU and for any launch shape.
//!
//! - [`CudaBackend::new`] opens a GPU and compiles `kernels/*.cu` after samebits-math's
//!   header and the device ABI generated from Rust (`device_abi.rs`: shared constants and
//!   kernel argument structs) with `--fmad=false --prec-div=true --prec-sqrt=true --ftz=false`
//!   for the device's architecture; a missing driver, NVRTC or GPU is a [`CudaError`], never a
//!   panic.
//! - [`DeviceBuffer`]: f32 device memory from a caching pool; [`CudaBackend::upload`] /
//!   [`CudaBackend::download`].
//! - Operations: [`CudaBackend::unary`] and [`CudaBackend::binary`] (broadcasting) of
//!   samebits-ops' `UnaryKernel` / `BinaryKernel`, [`CudaBackend::gemm`] ([`DeviceMat`],
//!   [`GemmEpilogue`], [`GemmLaunch`]), [`CudaBackend::reduce`], [`CudaBackend::softmax`],
//!   [`CudaBackend::layer_norm`], [`CudaBackend::rms_norm`]; their CPU side is the samebits-ops
//!   op of the same kernel.
//! - [`CudaBackend::gguf_products`] / [`CudaBackend::gguf_matmul`]: products with GGUF
//!   block-quantized weights (`DeviceBytes`; a launch may fuse the RMSNorm before them and a
//!   residual add, rotary embedding or SiLU gate after), [`CudaBackend::gguf_gather`]
//!   (embedding rows), the prefill GEMM over dequantized weights; for the operation set
//!   `reproducible-int8` ([`Kernels::ReproducibleInt8`]) the same launch computes the
//!   exact-integer products of Q4_0 / Q4_1 / Q8_0 weights (contract: int8-products).
//! - [`CudaBackend::rotary`], [`CudaBackend::attention`] ([`HeadsLayout`], [`AttentionShape`]) and
//!   the device-resident KV cache ([`KvStorage`]) they append to.
//! - Shape-dependent ops, from the geometries samebits-ops resolves for its CPU kernels:
//!   [`CudaBackend::conv`], [`CudaBackend::conv_transpose`], [`CudaBackend::pool`],
//!   [`CudaBackend::global_pool`], [`CudaBackend::resize`], [`CudaBackend::copy_parts`]
//!   (Transpose, Slice, Split, Concat), [`CudaBackend::chain`] (ElementwiseChain,
//!   BatchNormalization).
//! - [`Kernels::Fast`]: the default operation set's products on cuBLAS with TF32
//!   ([`CudaBackend::gemm_with`]), loaded at run time; no promise about bits.
//! - [`executor`]: [`CudaExecutor`] runs a compiled `samebits_ops::Plan` on the device, each
//!   step on its device kernel or, failing that, on the CPU, values kept on the device between
//!   device steps and, as [`IoValue::Device`], between runs; decoder fusion's ops run as one
//!   launch where their inputs fit (else their bodies step by step), and decode steps replay as
//!   CUDA graphs.
//! - `testing`: the `test_device!` macro that runs one test body on
//!   the CPU (the samebits-ops op) and on CUDA.

mod attention;
mod backend;
mod buffer;
mod chain;
mod conv;
mod device_abi;
mod elementwise;
mod error;
pub mod executor;
mod fast;
mod fused;
mod gemm;
mod gguf;
mod layout;
mod pool;
mod program;
mod reduce;
mod resize;
mod source_kernel;
pub mod testing;

pub use attention::{
    AttentionProduct, AttentionShape, HeadsLayout, KvLease, KvStorage, NewKv, attention_rows,
    attention_split_fits,
};
pub use backend::CudaBackend;
pub use buffer::{DeviceBuffer, DeviceBytes};
pub use elementwise::{BroadcastLayout, MAX_RANK};
pub use error::{CudaError, Result};
pub use executor::{CudaExecutor, DeviceTensor, IoValue, RunStats};
pub use fast::Kernels;
pub use gemm::{DeviceMat, DeviceMatBf16, GemmEpilogue, GemmLaunch, GemmShape, SPLIT_K_MAX_M};
pub use gguf::{GgufMatrix, GgufProducts, GgufRotary, gguf_supported};

/// The complete CUDA source the backend compiles (for inspection with nvcc / ptxas).
pub fn cuda_source() -> String {
    program::source()
}
