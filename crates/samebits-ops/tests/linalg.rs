//! Linalg family: MatMul, Gemm, MatMulInteger and Einsum. Small cases are worked by hand (the
//! arithmetic is in the comments) or taken from the ONNX operator documentation's examples;
//! reproducibility cases check bit equality across batch sizes and thread counts.
mod common;
use common::*;
use half::f16;
use samebits_ir::{Attribute, Tensor};

fn matmul(a: &Tensor, b: &Tensor) -> Tensor {
    run1("MatMul", &[a.clone(), b.clone()], &[]).unwrap()
}

#[test]
fn matmul_2x2_by_hand() {
    // [[1,2],[3,4]] @ [[5,6],[7,8]] = [[1*5+2*7, 1*6+2*8], [3*5+4*7, 3*6+4*8]].
    let out = matmul(
        &f32s(&[2, 2], &[1., 2., 3., 4.]),
        &f32s(&[2, 2], &[5., 6., 7., 8.]),
    );
    assert_eq!(out.shape(), &[2, 2]);
    assert_eq!(out.as_slice::<f32>().unwrap(), &[19., 22., 43., 50.]);
}

#[test]
fn matmul_promotes_and_removes_1d_axes() {
    let v = f32s(&[3], &[1., 2., 3.]);
    let m = f32s(&[3, 2], &[1., 0., 0., 1., 1., 1.]);
    let row = matmul(&v, &m);
    assert_eq!(row.shape(), &[2]);
    assert_eq!(row.as_slice::<f32>().unwrap(), &[4., 5.]);
    let col = matmul(&f32s(&[2, 3], &[1., 0., 0., 1., 1., 1.]), &v);
    assert_eq!(col.shape(), &[2]);
    assert_eq!(col.as_slice::<f32>().unwrap(), &[1., 6.]);
    let dot = matmul(&v, &v);
    assert_eq!(dot.shape(), &[] as &[usize]);
    assert_eq!(dot.as_slice::<f32>().unwrap(), &[14.]);
}

#[test]
fn matmul_broadcasts_batch_axes_like_numpy() {
    // A [2, 1, 2, 3] and B [3, 3, 2] broadcast to a [2, 3] batch of 2x2 products.
    let a_data = pseudo_random(12, 1);
    let b_data = pseudo_random(18, 2);
    let out = matmul(&f32s(&[2, 1, 2, 3], &a_data), &f32s(&[3, 3, 2], &b_data));
    assert_eq!(out.shape(), &[2, 3, 2, 2]);
    let out = out.as_slice::<f32>().unwrap();
    for (p, chunk) in out.chunks(4).enumerate() {
        let (ai, bi) = (p / 3, p % 3);
        for i in 0..2 {
            for j in 0..2 {
                // Three terms in one tile: fma chain from +0.
                let mut acc = 0.0f32;
                for k in 0..3 {
                    acc = a_data[ai * 6 + i * 3 + k].mul_add(b_data[bi * 6 + k * 2 + j], acc);
                }
                assert_eq!(chunk[i * 2 + j].to_bits(), acc.to_bits());
            }
        }
    }
}

#[test]
fn matmul_f16_rounds_once_at_the_store() {
    let a: Vec<f16> = [1.0f32, 1.0 / 1024.0, 1.0 / 1024.0]
        .map(f16::from_f32)
        .to_vec();
    let b: Vec<f16> = [1.0f32, 1.0, 1.0].map(f16::from_f32).to_vec();
    // In f32: 1 + 2^-10 + 2^-10 = 1 + 2^-9, representable in f16; rounding each step to f16
    // would lose both small terms (1 + 2^-10 is a tie that rounds to even, 1).
    let out = run1(
        "MatMul",
        &[
            Tensor::from_vec(vec![1, 3], a).unwrap(),
            Tensor::from_vec(vec![3, 1], b).unwrap(),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(
        out.as_slice::<f16>().unwrap(),
        &[f16::from_f32(1.0 + 1.0 / 512.0)]
    );
}

#[test]
fn matmul_f64_and_integers() {
    let a = Tensor::from_vec(vec![2, 2], vec![1.5f64, 2., 3., 4.]).unwrap();
    let out = run1("MatMul", &[a.clone(), a], &[]).unwrap();
    // [[1.5*1.5+2*3, 1.5*2+2*4], [3*1.5+4*3, 3*2+4*4]]
    assert_eq!(out.as_slice::<f64>().unwrap(), &[8.25, 11., 16.5, 22.]);
    let a = Tensor::from_vec(vec![1, 2], vec![i32::MAX, 1]).unwrap();
    let b = Tensor::from_vec(vec![2, 1], vec![2i32, 2]).unwrap();
    let out = run1("MatMul", &[a, b], &[]).unwrap();
    // Wrapping: 2 * (2^31 - 1) + 2 = 2^32 ≡ 0.
    assert_eq!(out.as_slice::<i32>().unwrap(), &[0]);
}

#[test]
fn matmul_errors_name_the_shapes() {
    let e = run1(
        "MatMul",
        &[f32s(&[2, 3], &[0.; 6]), f32s(&[2, 3], &[0.; 6])],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("[2, 3] has 3 columns"), "{e}");
    let e = run1("MatMul", &[f32s(&[], &[1.]), f32s(&[1], &[1.])], &[]).unwrap_err();
    assert!(e.to_string().contains("rank >= 1"), "{e}");
    let e = run1(
        "MatMul",
        &[f32s(&[2, 1, 1], &[0.; 2]), f32s(&[3, 1, 1], &[0.; 3])],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("cannot be broadcast"), "{e}");
}

#[test]
fn gemm_applies_transposes_alpha_beta_and_broadcast_c() {
    // A^T = [[1,2],[3,4]] (A stored [[1,3],[2,4]]), B^T = [[1,0],[0,1]] scaled by 2.
    let a = f32s(&[2, 2], &[1., 3., 2., 4.]);
    let b = f32s(&[2, 2], &[2., 0., 0., 2.]);
    let c = f32s(&[2], &[10., 20.]);
    let attrs = [
        ("transA", Attribute::Int(1)),
        ("transB", Attribute::Int(1)),
        ("alpha", Attribute::Float(0.5)),
        ("beta", Attribute::Float(2.0)),
    ];
    let out = run1("Gemm", &[a, b, c], &attrs).unwrap();
    // 0.5 * 2 * [[1,2],[3,4]] + 2 * [10, 20] per row.
    assert_eq!(out.as_slice::<f32>().unwrap(), &[21., 42., 23., 44.]);
    // Without C: alpha * A @ B; a column C [2, 1] broadcast along rows.
    let a = f32s(&[1, 2], &[1., 2.]);
    let b = f32s(&[2, 1], &[3., 4.]);
    let out = run1(
        "Gemm",
        &[a.clone(), b.clone()],
        &[("alpha", Attribute::Float(2.0))],
    )
    .unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), &[22.]);
    let e = run1("Gemm", &[a, b, f32s(&[3], &[0.; 3])], &[]).unwrap_err();
    assert!(e.to_string().contains("input C of shape [3]"), "{e}");
}

#[test]
fn gemm_f64_matches_the_formula() {
    let a = Tensor::from_vec(vec![1, 2], vec![1f64, 2.]).unwrap();
    let b = Tensor::from_vec(vec![2, 1], vec![3f64, 4.]).unwrap();
    let c = Tensor::from_vec(vec![], vec![0.5f64]).unwrap();
    let out = run1("Gemm", &[a, b, c], &[("beta", Attribute::Float(4.0))]).unwrap();
    assert_eq!(out.as_slice::<f64>().unwrap(), &[13.]);
}

#[test]
fn matmul_integer_subtracts_zero_points() {
    // The example of the ONNX MatMulInteger documentation.
    let a = Tensor::from_vec(vec![4, 3], vec![11u8, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0]).unwrap();
    let b = Tensor::from_vec(vec![3, 2], vec![1u8, 4, 2, 5, 3, 6]).unwrap();
    let a_zero = Tensor::from_vec(vec![], vec![12u8]).unwrap();
    let b_zero = Tensor::from_vec(vec![], vec![0u8]).unwrap();
    let out = run1("MatMulInteger", &[a, b, a_zero, b_zero], &[]).unwrap();
    assert_eq!(
        out.as_slice::<i32>().unwrap(),
        &[-38, -83, -44, -98, -50, -113, -56, -128]
    );
    // Per-column zero point of B: column j loses zp[j] * sum(A row).
    let a = Tensor::from_vec(vec![1, 2], vec![1i8, 2]).unwrap();
    let b = Tensor::from_vec(vec![2, 2], vec![1i8, 1, 1, 1]).unwrap();
    let b_zero = Tensor::from_vec(vec![2], vec![0i8, 1]).unwrap();
    let no_a_zero = None;
    let out = run_node_opset(
        "MatMulInteger",
        21,
        &[
            Some(a.into()),
            Some(b.into()),
            no_a_zero,
            Some(b_zero.into()),
        ],
        &[],
        1,
    )
    .unwrap();
    let out = out[0].as_tensor().unwrap();
    assert_eq!(out.as_slice::<i32>().unwrap(), &[3, 0]);
}

fn einsum(equation: &str, inputs: &[&Tensor]) -> Tensor {
    let inputs: Vec<Tensor> = inputs.iter().map(|&t| t.clone()).collect();
    let equation = Attribute::String(equation.into());
    run1("Einsum", &inputs, &[("equation", equation)]).unwrap()
}

#[test]
fn einsum_matrix_forms_equal_matmul_bit_for_bit() {
    // K = 150 spans three reduction tiles.
    let a = f32s(&[3, 150], &pseudo_random(450, 3));
    let b = f32s(&[150, 5], &pseudo_random(750, 4));
    let reference = bits(&matmul(&a, &b));
    assert_eq!(bits(&einsum("ij,jk->ik", &[&a, &b])), reference);
    assert_eq!(bits(&einsum("ij,jk", &[&a, &b])), reference);
    // The transposed output, then the general loop (a diagonal forces it) on the same terms.
    let transposed = einsum("ij,jk->ki", &[&a, &b]);
    assert_eq!(transposed.shape(), &[5, 3]);
    let t = bits(&transposed);
    for i in 0..3 {
        for k in 0..5 {
            assert_eq!(t[k * 3 + i], reference[i * 5 + k]);
        }
    }
    let a3 = a.reshaped(vec![1, 3, 150]).unwrap();
    let b3 = b.reshaped(vec![1, 150, 5]).unwrap();
    let batched = einsum("bij,bjk->bik", &[&a3, &b3]);
    assert_eq!(bits(&batched), reference);
}

#[test]
fn einsum_general_forms_by_hand() {
    let m = f32s(&[2, 2], &[1., 2., 3., 4.]);
    assert_eq!(einsum("ii->i", &[&m]).as_slice::<f32>().unwrap(), &[1., 4.]);
    assert_eq!(einsum("ii", &[&m]).as_slice::<f32>().unwrap(), &[5.]);
    assert_eq!(einsum("ij->", &[&m]).as_slice::<f32>().unwrap(), &[10.]);
    assert_eq!(einsum("ij->i", &[&m]).as_slice::<f32>().unwrap(), &[3., 7.]);
    assert_eq!(
        einsum("ij->ji", &[&m]).as_slice::<f32>().unwrap(),
        &[1., 3., 2., 4.]
    );
    let v = f32s(&[2], &[1., 2.]);
    // 1*1*1 + 2*2*2.
    assert_eq!(
        einsum("i,i,i->", &[&v, &v, &v]).as_slice::<f32>().unwrap(),
        &[9.]
    );
    let batch = f32s(&[2, 2, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
    let diag = einsum("...ii->...i", &[&batch]);
    assert_eq!(diag.shape(), &[2, 2]);
    assert_eq!(diag.as_slice::<f32>().unwrap(), &[1., 4., 5., 8.]);
    let e = run1(
        "Einsum",
        &[m.clone(), v],
        &[("equation", Attribute::String("ij,jk->ik".into()))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("operand 1"), "{e}");
    let e = run1(
        "Einsum",
        &[m],
        &[("equation", Attribute::String("ij->k".into()))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("output subscripts"), "{e}");
}

#[test]
fn matmul_and_gemm_rows_do_not_depend_on_batch_or_threads() {
    let (k, n) = (300, 70);
    let b = f32s(&[k, n], &pseudo_random(k * n, 5));
    let a64 = pseudo_random(64 * k, 6);
    let one = f32s(&[1, k], &a64[..k]);
    let many = f32s(&[64, k], &a64);
    let row0 = bits(&matmul(&one, &b));
    assert_eq!(bits(&matmul(&many, &b))[..n], row0[..]);
    let batched = matmul(&many.reshaped(vec![64, 1, k]).unwrap(), &b);
    assert_eq!(bits(&batched)[..n], row0[..]);
    for threads in [1, 2] {
        let out = with_threads(threads, || matmul(&many, &b));
        assert_eq!(bits(&out)[..n], row0[..], "{threads} threads");
    }
    let c = f32s(&[n], &pseudo_random(n, 7));
    let attrs = [
        ("alpha", Attribute::Float(0.75)),
        ("beta", Attribute::Float(1.5)),
    ];
    let g1 = bits(&run1("Gemm", &[one, b.clone(), c.clone()], &attrs).unwrap());
    let g64 = bits(&run1("Gemm", &[many.clone(), b.clone(), c.clone()], &attrs).unwrap());
    assert_eq!(g64[..n], g1[..]);
    let g2 = with_threads(2, || bits(&run1("Gemm", &[many, b, c], &attrs).unwrap()));
    assert_eq!(g2, g64);
}

#[test]
fn det_by_pivoted_elimination() {
    // [[1, 2], [3, 4]]: pivot row 1 (|3| > |1|), swap (sign -1); f = 1/3,
    // a[1][1] = 2 - f * 4; det = -1 * 3 * (2 - f * 4), each step in f32.
    let y = run1("Det", &[f32s(&[2, 2], &[1., 2., 3., 4.])], &[]).unwrap();
    let f = 1.0f32 / 3.0;
    assert_eq!(y.as_slice::<f32>().unwrap(), &[-3.0 * (2.0 - f * 4.0)]);
    assert_eq!(y.shape(), &[] as &[usize]);
    // A batch of two 3x3 matrices: the identity scaled by 2 (det 8) and a singular one.
    let mut data = vec![2., 0., 0., 0., 2., 0., 0., 0., 2.];
    data.extend([1., 2., 3., 2., 4., 6., 0., 1., 1.]);
    let y = run1("Det", &[f32s(&[2, 3, 3], &data)], &[]).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), &[8.0, 0.0]);
    assert!(run1("Det", &[f32s(&[2, 3], &[0.; 6])], &[]).is_err());
}

/// The resolved products samebits-cuda's executor launches: one batch stride per operand when
/// the batch allows it (0 for an operand shared by every product), none for a broadcast that
/// needs per-product offsets.
#[test]
fn matrix_products_resolve_batch_strides() {
    use samebits_ops::{gemm_products, matmul_products};
    let strides = |a: &[usize], b: &[usize]| matmul_products(a, b).unwrap().0.batch_strides();
    assert_eq!(strides(&[5, 2, 3], &[3, 4]), Some((6, 0)));
    assert_eq!(strides(&[2, 3], &[7, 3, 4]), Some((0, 12)));
    assert_eq!(strides(&[1, 5, 2, 3], &[4, 1, 3, 4]), None);
    let (p, shape) = matmul_products(&[3], &[3, 4]).unwrap();
    assert_eq!((p.m, p.k, p.n, shape), (1, 3, 4, vec![4]));
    // op(A) = A^T of [3, 2], op(B) = B^T of [4, 3]: read through strides.
    let g = gemm_products(&[3, 2], &[4, 3], true, true).unwrap();
    assert_eq!(
        (g.m, g.k, g.n, g.a_strides, g.b_strides),
        (2, 3, 4, (1, 2), (1, 3))
    );
    assert!(gemm_products(&[3, 2], &[4, 3], false, true).is_err());
}

/// A MatMul whose B is a constant of the plan packs B once and reuses the packing: its outputs
/// have the bits of the same product with B fed at run time, for a 2-D and a batched 3-D A
/// (one tall product), run twice (the second run reuses the packing), at 1 and 2 threads.
#[test]
fn matmul_with_a_constant_b_gives_the_bits_of_a_fed_b() {
    use samebits_ir::{Graph, Value};
    use samebits_ops::{OperationSet, Plan, RunOptions};
    let (k, n) = (70, 45);
    let b = f32s(
        &[k, n],
        &(0..k * n)
            .map(|i| ((i * 37) % 101) as f32 / 17.0 - 3.0)
            .collect::<Vec<_>>(),
    );
    let mut g = Graph::default();
    g.inputs.push(value_info("a"));
    g.outputs.push(value_info("y"));
    g.initializers.insert("b".into(), b.clone());
    g.nodes.push(node("MatMul", &["a", "b"], &["y"], &[]));
    let plan = Plan::build(&g, &Default::default(), OperationSet::Reproducible, &[]).unwrap();
    for a_shape in [vec![33, k], vec![3, 17, k]] {
        let len: usize = a_shape.iter().product();
        let a = f32s(
            &a_shape,
            &(0..len)
                .map(|i| ((i * 53) % 97) as f32 / 13.0 - 3.5)
                .collect::<Vec<_>>(),
        );
        let want = matmul(&a, &b);
        for threads in [1, 2, 1] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let got = pool.install(|| {
                plan.run(vec![Value::Tensor(a.clone())], RunOptions::default())
                    .unwrap()
            });
            let got = got[0].as_tensor().unwrap();
            assert_eq!(got.shape(), want.shape());
            let bits = |t: &Tensor| -> Vec<u32> {
                t.as_slice::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            };
            assert_eq!(bits(got), bits(&want), "A {a_shape:?}, {threads} threads");
        }
    }
}
