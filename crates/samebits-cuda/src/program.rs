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
const GGUF_INT8: &str = include_str!("../kernels/gguf_int8.cu");
const LAYOUT: &str = include_str!("../kernels/layout.cu");
const POOL: &str = include_str!("../kernels/pool.cu");
const REDUCE: &str = include_str!("../kernels/reduce.cu");
const RESIZE: &str = include_str!("../kernels/resize.cu");

/// The device expression of an activation in terms of the input `v` and the parameters `p0`,
/// `p1` ([`Activation::params`]).
fn activation_expression(a: Activation) -> String {
    let name = a.name();
    match a {
        Activation::HardSigmoid { .. } | Activation::Selu { .. } => {
            format!("sb_{name}f(v, p0, p1)")
        }
        Activation::Elu { .. } | Activation::Celu { .. } | Activation::LeakyRelu { .. } => {
            format!("sb_{name}f(v, p0)")
        }
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

/// `sb_activation(a, v, p0, p1)`: activation number `a` of [`Activation::ALL`] (chain steps,
/// recurrent cells), and `sb_relu(v)`, Relu's formula.
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
    src.push_str(&format!(
        "__device__ __forceinline__ float sb_relu(float v) {{ return {}; }}\n",
        simple_expression(UnaryKernel::Relu)
    ));
    src
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
        GGUF_INT8,
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

/// Compiles [`source`] for `compute_<major><minor>`. For profiling,
/// `SAMEBITS_CUDA_LINEINFO=FILE` adds line information (`-lineinfo`, which changes no
/// instruction) and writes the source to FILE, so a profiler's per-line figures (Nsight
/// Compute's source page) can be read against it.
///
/// The PTX is kept in the cache folder (`ptx/<key>.ptx` under
/// [`samebits_ir::paths::cache_dir`]), the key the SHA-256 of the source, the options and
/// NVRTC's version, so later processes skip NVRTC (seconds for the whole program). A file is
/// used only when its trailer (the SHA-256 of the PTX before it) matches, and it is written
/// whole or not at all (a temporary file renamed into place); a cache that cannot be read or
/// written only costs the compilation. `SAMEBITS_PTX_CACHE=0` turns it off.
pub(crate) fn compile(major: i32, minor: i32) -> Result<Ptx> {
    let source = source();
    let mut extra = Vec::new();
    if let Some(path) = std::env::var_os("SAMEBITS_CUDA_LINEINFO") {
        std::fs::write(&path, &source).map_err(|e| {
            CudaError::Compile(format!(
                "SAMEBITS_CUDA_LINEINFO: cannot write {}: {e}",
                std::path::Path::new(&path).display()
            ))
        })?;
        extra.push("-lineinfo".to_string());
    }
    let options = CompileOptions {
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        use_fast_math: Some(false),
        options: [format!("-arch=compute_{major}{minor}"), "-std=c++17".into()]
            .into_iter()
            .chain(extra)
            .collect(),
        ..Default::default()
    };
    let cache = ptx_cache_path(&source, &options);
    if let Some(ptx) = cache.as_deref().and_then(read_cached_ptx) {
        return Ok(Ptx::from_src(ptx));
    }
    let ptx =
        compile_ptx_with_opts(source, options).map_err(|e| CudaError::Compile(e.to_string()))?;
    let text = ptx.as_bytes().and_then(|b| std::str::from_utf8(b).ok());
    if let (Some(path), Some(text)) = (cache, text) {
        write_cached_ptx(&path, text.trim_end_matches('\0'));
    }
    Ok(ptx)
}

/// The trailer line that ends a cached PTX file: this prefix, then the hex SHA-256 of the text
/// before it.
const PTX_TRAILER: &str = "// samebits ptx sha256 ";

fn sha256_hex(parts: &[&[u8]]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Where the PTX of `source` compiled with `options` is cached, or `None` when caching is off
/// (`SAMEBITS_PTX_CACHE=0`, line information asked for, or no cache folder).
fn ptx_cache_path(source: &str, options: &CompileOptions) -> Option<std::path::PathBuf> {
    let off = std::env::var("SAMEBITS_PTX_CACHE").is_ok_and(|v| v.trim() == "0");
    if off || std::env::var_os("SAMEBITS_CUDA_LINEINFO").is_some() {
        return None;
    }
    let (mut nvrtc_major, mut nvrtc_minor) = (0, 0);
    // SAFETY: NVRTC was loaded by the backend's presence check; the call writes two ints.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut nvrtc_major, &mut nvrtc_minor) };
    let compiler = format!("nvrtc {nvrtc_major}.{nvrtc_minor} {options:?}");
    let key = sha256_hex(&[source.as_bytes(), compiler.as_bytes()]);
    Some(
        samebits_ir::paths::cache_dir()?
            .join("ptx")
            .join(format!("{key}.ptx")),
    )
}

/// The PTX of a cache file whose trailer matches its text, else `None`.
fn read_cached_ptx(path: &std::path::Path) -> Option<String> {
    let mut text = std::fs::read_to_string(path).ok()?;
    let at = text.rfind(PTX_TRAILER)?;
    let digest = text[at + PTX_TRAILER.len()..].trim().to_string();
    text.truncate(at);
    (digest == sha256_hex(&[text.as_bytes()])).then_some(text)
}

/// Writes `ptx` with its trailer to `path` through a temporary file renamed into place; any
/// failure leaves no file (and is otherwise ignored: the cache only saves time).
fn write_cached_ptx(path: &std::path::Path, ptx: &str) {
    let Some(dir) = path.parent() else { return };
    static WRITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{}-{n}.tmp", std::process::id()));
    let text = format!("{ptx}{PTX_TRAILER}{}\n", sha256_hex(&[ptx.as_bytes()]));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, text))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// A cached PTX file is used only whole: written with its trailer, read back equal; a
    /// truncated or edited file, or one without a trailer, is ignored (compiled again).
    #[test]
    fn ptx_cache_files_are_used_only_whole() {
        let dir = std::env::temp_dir().join(format!("samebits-ptx-test-{}", std::process::id()));
        let path = dir.join("key.ptx");
        let ptx = ".version 8.0\n.target sm_90\n// body\n";
        super::write_cached_ptx(&path, ptx);
        assert_eq!(super::read_cached_ptx(&path).as_deref(), Some(ptx));
        let whole = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() - 10]).unwrap();
        assert_eq!(super::read_cached_ptx(&path), None, "truncated");
        std::fs::write(&path, whole.replace("body", "bodY")).unwrap();
        assert_eq!(super::read_cached_ptx(&path), None, "edited");
        std::fs::write(&path, ptx).unwrap();
        assert_eq!(super::read_cached_ptx(&path), None, "no trailer");
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("key.ptx")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The device `sb_canonical_max` / `sb_canonical_min` (kernels/canonical.cu, after
    /// samebits-math's header for `sb_nanf`), compiled on the host with g++, equal
    /// samebits-kernels' `canonical_max` / `canonical_min` bit for bit on every pair of special
    /// values (signed zeros, infinities, NaNs with payloads and signs, subnormals, the extremes)
    /// and on random bit patterns: the CPU and CUDA forms of contract `reduce-extrema` are tied
    /// by a test that needs no GPU. Skips loudly without g++.
    #[test]
    fn device_extrema_equal_the_cpu_definition() {
        if Command::new("g++").arg("--version").output().is_err() {
            let line =
                b"SKIPPED (no g++): program::tests::device_extrema_equal_the_cpu_definition\n";
            let _ = std::io::stderr().write_all(line);
            return;
        }
        let canonical = super::CANONICAL;
        let start = canonical
            .find("// `max` of reduce-extrema")
            .expect("sb_canonical_max in canonical.cu");
        let end = canonical[start..]
            .find("// One canonical reduction")
            .map(|n| start + n)
            .expect("the text after sb_canonical_min");
        let harness = format!(
            "#include <cstdio>\n#include <cstring>\n{math}\n#define __device__\n\
             #define __forceinline__ inline\n\
             inline unsigned __float_as_uint(float f) {{ unsigned u; std::memcpy(&u, &f, 4); return u; }}\n\
             {extrema}\n\
             int main() {{\n  unsigned pair[2];\n\
               while (fread(pair, 4, 2, stdin) == 2) {{\n\
                 float a, b; std::memcpy(&a, &pair[0], 4); std::memcpy(&b, &pair[1], 4);\n\
                 float r[2] = {{sb_canonical_max(a, b), sb_canonical_min(a, b)}};\n\
                 fwrite(r, 4, 2, stdout);\n  }}\n  return 0;\n}}\n",
            math = samebits_math::CUDA_SOURCE,
            extrema = &canonical[start..end],
        );
        let dir = std::env::temp_dir().join(format!("samebits-extrema-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("extrema.cpp"), harness).unwrap();
        let binary = dir.join("extrema");
        let status = Command::new("g++")
            .args(["-std=c++17", "-O2", "-ffp-contract=off", "-o"])
            .arg(&binary)
            .arg(dir.join("extrema.cpp"))
            .status()
            .unwrap();
        assert!(status.success(), "g++ failed on canonical.cu's extrema");

        let specials: [u32; 16] = [
            0x0000_0000,
            0x8000_0000,
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0000,
            0xffc0_0000,
            0x7f80_0001,
            0xffff_ffff,
            0x0000_0001,
            0x8000_0001,
            0x007f_ffff,
            0x7f7f_ffff,
            0xff7f_ffff,
            0x3f80_0000,
            0xbf80_0000,
            0x3f80_0001,
        ];
        let mut pairs: Vec<(u32, u32)> = specials
            .iter()
            .flat_map(|&a| specials.iter().map(move |&b| (a, b)))
            .collect();
        let mut rng = samebits_testdata::Rng(31);
        pairs.extend((0..4096).map(|_| {
            let a = rng.next_u64() as u32;
            // Half the pairs compare a value with itself or its negation (the tie rules).
            let b = match rng.next_u64() % 4 {
                0 => a,
                1 => a ^ 0x8000_0000,
                _ => rng.next_u64() as u32,
            };
            (a, b)
        }));
        let input: Vec<u8> = pairs
            .iter()
            .flat_map(|&(a, b)| [a.to_le_bytes(), b.to_le_bytes()].concat())
            .collect();
        let mut child = Command::new(&binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&input).unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "the host run failed");
        let device: Vec<u32> = output
            .stdout
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(device.len(), 2 * pairs.len());
        for (k, &(a, b)) in pairs.iter().enumerate() {
            let (x, y) = (f32::from_bits(a), f32::from_bits(b));
            let max = samebits_kernels::canonical_max(x, y).to_bits();
            let min = samebits_kernels::canonical_min(x, y).to_bits();
            assert_eq!(
                (device[2 * k], device[2 * k + 1]),
                (max, min),
                "({a:#010x}, {b:#010x}): device (max, min) vs samebits-kernels"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

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
            "sb_gguf_int8_products_q4_0",
            "sb_gguf_gather_q4_1",
            "sb_rotary",
            "sb_attention",
            "sb_ragged_attention",
            "sb_silu_mul",
            "sb_conv_direct",
            "sb_im2col",
            "sb_conv_transpose_direct",
            "sb_conv_transpose_filters",
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
