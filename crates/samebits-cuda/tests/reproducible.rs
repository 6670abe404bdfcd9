//! The reproducible set on CPU and CUDA: every CUDA output must be bit-identical to the CPU
//! output (the samebits-ops op, or the samebits-kernels GEMM and reduction); on a machine
//! without a GPU the CUDA tests skip loudly.

use samebits_cuda::testing::{
    BROADCAST_SHAPES, Device, REDUCE_KINDS, ROW_LENGTHS, Rng, assert_same_bits, bf16_gemv_cases,
    binary_nodes, gemm_cases, large_gemm_case, unary_nodes, vector_gemm_cases, wide_gemv_cases,
};
use samebits_cuda::{GemmLaunch, test_device};
use samebits_ops::{BinaryKernel, UnaryKernel};

fn gemm_small_shapes(device: &Device) {
    for case in gemm_cases(1) {
        let want = Device::Cpu.gemm(&case, GemmLaunch::Auto);
        for how in case.launches() {
            let got = device.gemm(&case, how);
            assert_same_bits(
                &got,
                &want,
                &format!("{} gemm {:?} {how:?}", device.name(), case.shape),
            );
        }
    }
}
test_device!(
    gemm_small_shapes,
    gemm_small_shapes_cpu,
    gemm_small_shapes_cuda
);

fn gemv_vectorised_reads(device: &Device) {
    for case in wide_gemv_cases(9) {
        let want = Device::Cpu.gemm(&case, GemmLaunch::Auto);
        assert_same_bits(
            &device.gemm(&case, GemmLaunch::SplitK),
            &want,
            &format!("{:?}", case.b_strides),
        );
    }
}
/// bf16 weights, widened exactly: the bits of the f32 GEMM on the same values.
fn gemv_bf16_weights(device: &Device) {
    for case in bf16_gemv_cases(10) {
        let want = Device::Cpu.gemm(&case, GemmLaunch::Auto);
        assert_same_bits(
            &device.gemv_bf16(&case),
            &want,
            &format!("{:?} {:?}", case.shape, case.b_strides),
        );
    }
}
test_device!(
    gemv_bf16_weights,
    gemv_bf16_weights_cpu,
    gemv_bf16_weights_cuda
);

test_device!(
    gemv_vectorised_reads,
    gemv_vectorised_reads_cpu,
    gemv_vectorised_reads_cuda
);

/// Every launch configuration (and the automatic one) gives the CPU's bits on multi-block
/// GEMMs, with element-copied and 16-byte-copied B.
fn gemm_forced_launch_shapes(device: &Device) {
    let mut cases = vector_gemm_cases(2);
    cases.push(large_gemm_case(2));
    for case in &cases {
        let want = Device::Cpu.gemm(case, GemmLaunch::Auto);
        for how in case.launches() {
            assert_same_bits(
                &device.gemm(case, how),
                &want,
                &format!("{:?} {how:?}", case.shape),
            );
        }
    }
}
test_device!(
    gemm_forced_launch_shapes,
    gemm_forced_launch_shapes_cpu,
    gemm_forced_launch_shapes_cuda
);

/// A row's bits do not depend on M: row i of an M-row product equals the 1-row product.
fn gemm_rows_do_not_depend_on_m(device: &Device) {
    let case = large_gemm_case(3);
    let full = device.gemm(&case, GemmLaunch::Auto);
    let (n, k) = (case.shape.n, case.shape.k);
    for row in [0, 1, 150, 299] {
        let mut single = case.clone();
        single.shape.m = 1;
        single.a = case.a[row * k..(row + 1) * k].to_vec();
        single.a_strides = samebits_cuda::testing::Strides::dense(1, k, false);
        let got = device.gemm(&single, GemmLaunch::Auto);
        assert_same_bits(&got, &full[row * n..(row + 1) * n], &format!("row {row}"));
    }
}
test_device!(
    gemm_rows_do_not_depend_on_m,
    gemm_rows_do_not_depend_on_m_cpu,
    gemm_rows_do_not_depend_on_m_cuda
);

fn unary_functions(device: &Device) {
    let mut rng = Rng::new(4);
    let mut x = rng.any_floats(4096);
    x.extend(rng.values(4096, 10.0));
    x.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-45,
        -1e-45,
    ]);
    for (_, node) in unary_nodes() {
        let want = Device::Cpu.unary(&node, &x);
        assert_same_bits(&device.unary(&node, &x), &want, &node.op_type);
    }
}
test_device!(unary_functions, unary_functions_cpu, unary_functions_cuda);

fn binary_broadcast(device: &Device) {
    let mut rng = Rng::new(5);
    for (a_shape, b_shape) in BROADCAST_SHAPES {
        let a = rng.values(a_shape.iter().product(), 3.0);
        let b = rng.values(b_shape.iter().product(), 3.0);
        for (_, node) in binary_nodes() {
            let want = Device::Cpu.binary(&node, &a, a_shape, &b, b_shape);
            let got = device.binary(&node, &a, a_shape, &b, b_shape);
            let op = &node.op_type;
            assert_same_bits(&got, &want, &format!("{op} {a_shape:?} {b_shape:?}"));
        }
    }
}
test_device!(
    binary_broadcast,
    binary_broadcast_cpu,
    binary_broadcast_cuda
);

/// The ops tested above reach every binary kernel and unary kernels of every kind, and every
/// unary kernel an op names is generated (`UnaryKernel::all`).
#[test]
fn op_nodes_cover_the_kernels() {
    let binary: Vec<BinaryKernel> = binary_nodes().into_iter().map(|(k, _)| k).collect();
    for kernel in BinaryKernel::ALL {
        assert!(binary.contains(&kernel), "no op runs {kernel:?}");
    }
    let unary: Vec<UnaryKernel> = unary_nodes().into_iter().map(|(k, _)| k).collect();
    for kernel in UnaryKernel::SIMPLE {
        assert!(unary.contains(&kernel), "no op runs {kernel:?}");
    }
    assert!(unary.iter().any(|k| matches!(k, UnaryKernel::Math(_))));
    assert!(
        unary
            .iter()
            .any(|k| matches!(k, UnaryKernel::Activation(_)))
    );
    let generated = UnaryKernel::all();
    for kernel in unary {
        assert!(
            generated.iter().any(|k| k.name() == kernel.name()),
            "{kernel:?}"
        );
    }
}
/// Max and Min of every pair of special values (infinities, ±1, ±0, NaNs with and without a
/// payload or sign) give exactly the bits of samebits-kernels' `canonical_max` /
/// `canonical_min` (contract: reduce-extrema), canonical NaN included.
fn extrema_special_values(device: &Device) {
    let special = [
        f32::NEG_INFINITY,
        -1.0,
        -0.0,
        0.0,
        1.0,
        f32::INFINITY,
        f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xffc0_0000),
    ];
    let n = special.len();
    for (op, rule) in [
        (
            BinaryKernel::Max,
            samebits_kernels::canonical_max::<f32> as fn(f32, f32) -> f32,
        ),
        (BinaryKernel::Min, samebits_kernels::canonical_min::<f32>),
    ] {
        let (_, node) = binary_nodes()
            .into_iter()
            .find(|(kernel, _)| *kernel == op)
            .expect("an op runs the kernel");
        let got = device.binary(&node, &special, &[n, 1], &special, &[1, n]);
        for (i, &a) in special.iter().enumerate() {
            for (j, &b) in special.iter().enumerate() {
                let (got, want) = (got[i * n + j].to_bits(), rule(a, b).to_bits());
                assert_eq!(got, want, "{op:?}({a}, {b}): {got:#x}, want {want:#x}");
            }
        }
    }
}
test_device!(
    extrema_special_values,
    extrema_special_values_cpu,
    extrema_special_values_cuda
);

fn reductions(device: &Device) {
    let mut rng = Rng::new(6);
    for len in ROW_LENGTHS {
        for (outer, inner) in [(3, 1), (2, 5)] {
            let x = rng.values(outer * len * inner, 1.5);
            for kind in REDUCE_KINDS {
                let want = Device::Cpu.reduce(kind, &x, outer, len, inner);
                let got = device.reduce(kind, &x, outer, len, inner);
                assert_same_bits(&got, &want, &format!("{kind:?} [{outer}, {len}, {inner}]"));
            }
        }
    }
}
test_device!(reductions, reductions_cpu, reductions_cuda);

fn softmax_rows(device: &Device) {
    let mut rng = Rng::new(7);
    for len in ROW_LENGTHS {
        let x = rng.values(3 * len, 20.0);
        for log in [false, true] {
            let want = Device::Cpu.softmax(&x, len, log);
            assert_same_bits(
                &device.softmax(&x, len, log),
                &want,
                &format!("softmax len {len} log {log}"),
            );
        }
    }
}
test_device!(softmax_rows, softmax_rows_cpu, softmax_rows_cuda);

fn normalizations(device: &Device) {
    let mut rng = Rng::new(8);
    for len in ROW_LENGTHS {
        let x = rng.values(3 * len, 4.0);
        let scale = rng.values(len, 2.0);
        let bias = rng.values(len, 1.0);
        for b in [None, Some(bias.as_slice())] {
            let want = Device::Cpu.layer_norm(&x, &scale, b, 1e-5);
            assert_same_bits(
                &device.layer_norm(&x, &scale, b, 1e-5),
                &want,
                &format!("layer_norm {len}"),
            );
        }
        let want = Device::Cpu.rms_norm(&x, &scale, 1e-6);
        assert_same_bits(
            &device.rms_norm(&x, &scale, 1e-6),
            &want,
            &format!("rms_norm {len}"),
        );
    }
}
test_device!(normalizations, normalizations_cpu, normalizations_cuda);

#[test]
fn missing_cuda_is_an_error_not_a_panic() {
    match samebits_cuda::CudaBackend::new(0) {
        Ok(backend) => eprintln!("CUDA present: {}", backend.device_name()),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// Every launch covers all its elements however many there are: the backend caps a launch's
/// blocks (`blocks_for`: 65,535 x 8 blocks of 256 threads, 134,215,680 threads), so each kernel
/// loops over the rest (grid-stride). A Q8_0 matrix of 2^21 + 3 rows of 64 (134,217,920
/// elements, past the cap) dequantizes whole: its rows, the last ones included, equal
/// samebits-ggml's. Found on an 8B-shaped model: the prefill's dequantized copy of its
/// 128,256 x 4096 output matrix came back partly unwritten, and CPU and GPU logits differed.
#[test]
fn launches_past_the_block_cap_cover_every_element() {
    let test = "reproducible::launches_past_the_block_cap_cover_every_element";
    let Some(Device::Cuda(backend)) = samebits_cuda::testing::cuda_or_skip(test) else {
        return;
    };
    let _serial = samebits_cuda::testing::serial();
    let (ty, rows, cols) = (samebits_ggml::GgmlType::Q8_0, (1 << 21) + 3, 64);
    let row_bytes = ty.row_bytes(cols).unwrap();
    let mut bytes = samebits_testdata::Rng(31).bytes(rows * row_bytes);
    for block in bytes.chunks_exact_mut(ty.block_bytes()) {
        block[..2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
    }
    let w = backend.upload_bytes(&bytes).unwrap();
    let wt = backend.gguf_dequantize_t(ty, rows, cols, &w).unwrap();
    let got = backend.download(&wt).unwrap();
    let mut want = vec![0f32; cols];
    for r in [0, rows / 2, rows - 3, rows - 2, rows - 1] {
        samebits_ggml::dequantize_row(ty, &bytes[r * row_bytes..][..row_bytes], &mut want).unwrap();
        for (k, w) in want.iter().enumerate() {
            assert_eq!(
                got[k * rows + r].to_bits(),
                w.to_bits(),
                "row {r}, column {k}"
            );
        }
    }
}
