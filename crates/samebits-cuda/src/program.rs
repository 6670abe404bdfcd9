//! The NVRTC program: samebits-math's header, the device ABI generated from Rust (constants and
//! kernel argument structs, src/device_abi.rs), then the `.cu` files of `kernels/`, compiled for
//! the device's own architecture with the options the contract requires (`arithmetic`: no FMA
//! contraction, IEEE division and square root, subnormals kept, no fast math).

use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};
use samebits_math::{Activation, CUDA_SOURCE, UnaryFn};
use samebits_ops::UnaryKernel;

use crate::error::{CudaError, Result};

const ATTENTION: &str = include_str!("../kernels/attention.cu");
const CANONICAL: &str = include_str!("../kernels/canonical.cu");
const CHAIN: &str = include_str!("../kernels/chain.cu");
const CONV: &str = include_str!("../kernels/conv.cu");
const ELEMENTWISE: &str = include_str!("../kernels/elementwise.cu");
const FUSED: &str = include_str!("../kernels/fused.cu");
const GEMM: &str = include_str!("../kernels/gemm.cu");
const GGML: &str = include_str!("../kernels/ggml.cu");
const GGUF: &str = include_str!("../kernels/gguf.cu");
const LAYOUT: &str = include_str!("../kernels/layout.cu");
const POOL: &str = include_str!("../kernels/pool.cu");
const REDUCE: &str = include_str!("../kernels/reduce.cu");
const RESIZE: &str = include_str!("../kernels/resize.cu");

/// The device expression of an activation in terms of the input `v` and the parameters `p0`,
/// `p1` passed by [`activation_params`].
fn activation_expression(a: Activation) -> String {
    let name = a.name();
    match a {
        Activation::HardSigmoid { .. } | Activation::Selu { .. } => {
            format!("sb_{name}f(v, p0, p1)")
        }
        Activation::Elu { .. } | Activation::Celu { .. } => format!("sb_{name}f(v, p0)"),
        _ => format!("sb_{name}f(v)"),
    }
}

/// The device expression of a simple unary op of `v` (the formulas of the samebits-ops unary ops).
fn simple_expression(op: UnaryKernel) -> &'static str {
    match op {
        UnaryKernel::Neg => "-v",
        UnaryKernel::Abs => "fabsf(v)",
        UnaryKernel::Relu => "(v > 0.0f || v != v) ? v : 0.0f",
        UnaryKernel::Sqrt => "sb_sqrtf(v)",
        UnaryKernel::Reciprocal => "1.0f / v",
        UnaryKernel::Math(_) | UnaryKernel::Activation(_) => unreachable!("not a simple op"),
    }
}

/// The `(p0, p1)` kernel arguments of an activation.
pub(crate) fn activation_params(a: Activation) -> (f32, f32) {
    match a {
        Activation::HardSigmoid { alpha, beta } => (alpha, beta),
        Activation::Selu { alpha, gamma } => (alpha, gamma),
        Activation::Elu { alpha } | Activation::Celu { alpha } => (alpha, 0.0),
        _ => (0.0, 0.0),
    }
}

/// One `sb_unary_<name>` kernel per samebits-math function and activation, and per simple
/// IEEE function of [`UnaryKernel`].
fn unary_kernels() -> String {
    let mut src = String::new();
    for op in UnaryKernel::SIMPLE {
        src.push_str(&format!(
            "SB_UNARY_KERNEL({}, {})\n",
            op.name(),
            simple_expression(op)
        ));
    }
    for f in UnaryFn::IMPLEMENTED {
        src.push_str(&format!("SB_UNARY_KERNEL({0}, sb_{0}f(v))\n", f.name()));
    }
    for &a in Activation::ALL {
        src.push_str(&format!(
            "SB_UNARY_KERNEL({}, {})\n",
            a.name(),
            activation_expression(a)
        ));
    }
    src
}

/// `sb_activation(a, v, p0, p1)`: activation number `a` of [`Activation::ALL`] (chain steps).
fn activation_switch() -> String {
    let mut src = String::from(
        "__device__ __forceinline__ float sb_activation(int a, float v, float p0, float p1)\n{\n  \
         switch (a) {\n",
    );
    for (i, &a) in Activation::ALL.iter().enumerate() {
        src.push_str(&format!(
            "    case {i}: return {};\n",
            activation_expression(a)
        ));
    }
    src.push_str("    default: return v;\n  }\n}\n");
    src
}

/// The number of `a` in [`Activation::ALL`] (its parameters aside), as `sb_activation` takes it.
pub(crate) fn activation_index(a: Activation) -> Option<usize> {
    Activation::ALL.iter().position(|b| b.name() == a.name())
}

/// The whole CUDA source of the backend: the prelude, this crate's kernels, then the ops' own
/// kernel sources (samebits-ops `Registry::register_kernel_source`).
pub(crate) fn source() -> String {
    let ops = samebits_ops::registry::global()
        .kernel_sources()
        .map(|(file, source)| format!("// samebits-ops kernels/{file}\n{source}"));
    [
        CUDA_SOURCE,
        &crate::device_abi::source(),
        CANONICAL,
        ELEMENTWISE,
        &unary_kernels(),
        GEMM,
        GGML,
        GGUF,
        REDUCE,
        ATTENTION,
        FUSED,
        CONV,
        POOL,
        RESIZE,
        LAYOUT,
        &activation_switch(),
        CHAIN,
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(ops)
    .collect::<Vec<_>>()
    .join("\n")
}

/// Compiles [`source`] for `compute_<major><minor>`.
pub(crate) fn compile(major: i32, minor: i32) -> Result<Ptx> {
    let options = CompileOptions {
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        use_fast_math: Some(false),
        options: vec![format!("-arch=compute_{major}{minor}"), "-std=c++17".into()],
        ..Default::default()
    };
    compile_ptx_with_opts(source(), options).map_err(|e| CudaError::Compile(e.to_string()))
}

#[cfg(test)]
mod tests {
    /// Every unary op has its generated `sb_unary_<name>` kernel (the name `unary` launches).
    #[test]
    fn every_unary_op_has_a_kernel() {
        let source = super::source();
        for op in samebits_ops::UnaryKernel::all() {
            assert!(
                source.contains(&format!("SB_UNARY_KERNEL({}, ", op.name())),
                "no kernel for {}",
                op.name()
            );
        }
    }

    /// The kernels compile wherever NVRTC is present, even without a GPU.
    #[test]
    fn kernels_compile_for_sm90() {
        // SAFETY: only tries to load the shared library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            let line = b"SKIPPED (no NVRTC): program::tests::kernels_compile_for_sm90\n";
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line);
            return;
        }
        let ptx = super::compile(9, 0).expect("kernels compile");
        let text = ptx.to_src();
        for kernel in [
            "sb_gemv_nk_bf16_m8",
            "sb_gemv_kn_f32_m1",
            "sb_gemv_kn4_bf16_m8",
            "sb_softmax_rows",
            "sb_unary_exp",
            "sb_unary_relu",
            "sb_gguf_products_q4_1",
            "sb_gguf_gather_q4_1",
            "sb_rotary",
            "sb_attention",
            "sb_silu_mul",
            "sb_conv_direct",
            "sb_im2col",
            "sb_conv_transpose_direct",
            "sb_pool",
            "sb_resize",
            "sb_strided_copy",
            "sb_chain",
        ] {
            assert!(text.contains(kernel), "{kernel} missing from the PTX");
        }
        // Every kernel of the ops' own sources.
        for (file, source) in samebits_ops::registry::global().kernel_sources() {
            let entries: Vec<&str> = source
                .split("extern \"C\" __global__ void ")
                .skip(1)
                .filter_map(|rest| rest.split('(').next())
                .collect();
            assert!(!entries.is_empty(), "{file} defines no kernel");
            for kernel in entries {
                assert!(
                    text.contains(&format!(".entry {kernel}(")),
                    "{kernel} of {file} missing from the PTX"
                );
            }
        }
        for kernel in crate::GemmLaunch::kernel_names() {
            assert!(
                text.contains(&format!(".entry {kernel}(")),
                "{kernel} missing from the PTX"
            );
        }
    }
}
