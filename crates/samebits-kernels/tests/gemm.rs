//! GEMM against the scalar canonical oracle, bit for bit, on every ISA and thread count.

mod common;

use common::{Rng, assert_bits_eq, on_every_isa, on_threads};
use half::{bf16, f16};
use samebits_kernels::{
    Epilogue, Isa, MatRef, PackedB, canonical_dot_strided, gemm, gemm_f32, gemm_packed_b, with_isa,
};

/// Oracle: each output is `canonical_dot_strided` of a row of A and a column of B.
fn oracle(batch: usize, m: usize, n: usize, k: usize, a: MatRef<f32>, b: MatRef<f32>) -> Vec<f32> {
    let mut out = Vec::with_capacity(batch * m * n);
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let a_row = a.data.get(a.index(bi, i, 0)..).unwrap_or(&[]);
                let b_col = b.data.get(b.index(bi, 0, j)..).unwrap_or(&[]);
                out.push(canonical_dot_strided(
                    a_row,
                    a.col_stride,
                    b_col,
                    b.row_stride,
                    k,
                ));
            }
        }
    }
    out
}

fn run_gemm(
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<f32>,
    b: MatRef<f32>,
) -> Vec<f32> {
    let mut out = vec![f32::NAN; batch * m * n];
    gemm_f32(batch, m, n, k, a, b, &mut out);
    out
}

/// Checks one problem on every ISA against the oracle.
fn check_all_isas(batch: usize, m: usize, n: usize, k: usize, a: MatRef<f32>, b: MatRef<f32>) {
    let want = oracle(batch, m, n, k, a, b);
    for (isa, got) in on_every_isa(|| run_gemm(batch, m, n, k, a, b)) {
        assert_bits_eq(&got, &want, &format!("gemm {batch}x{m}x{n}x{k} on {isa}"));
    }
}

#[test]
fn row_major_shapes_match_oracle() {
    let mut rng = Rng::new(1);
    let shapes = [
        (1, 1, 0),
        (3, 5, 0),
        (1, 1, 1),
        (7, 9, 1),
        (8, 32, 63),
        (9, 33, 64),
        (13, 17, 65),
        (6, 16, 129),
        (17, 47, 300),
        (5, 70, 1000),
        (100, 3, 257),
        (97, 260, 70),
    ];
    for (m, n, k) in shapes {
        let a = rng.vec(m * k);
        let b = rng.vec(k * n);
        check_all_isas(
            1,
            m,
            n,
            k,
            MatRef::row_major(&a, m, k),
            MatRef::row_major(&b, k, n),
        );
    }
}

#[test]
fn row_vector_shapes_match_oracle() {
    let mut rng = Rng::new(9);
    for (n, k) in [
        (1, 5),
        (64, 1),
        (130, 63),
        (200, 64),
        (64, 65),
        (300, 1000),
        (129, 130),
    ] {
        // Batch of 2 row vectors, A read with column stride 2.
        let a = rng.vec(2 * 2 * k);
        let b = rng.vec(2 * k * n);
        let a_view = MatRef {
            data: &a[..],
            offset: 0,
            batch_stride: 2 * k,
            row_stride: 0,
            col_stride: 2,
        };
        check_all_isas(2, 1, n, k, a_view, MatRef::row_major(&b, k, n));
        // B shared (batch stride 0) with a padded leading dimension.
        let b_pad = rng.vec(k * (n + 3));
        let b_view = MatRef {
            data: &b_pad[..],
            offset: 0,
            batch_stride: 0,
            row_stride: n + 3,
            col_stride: 1,
        };
        check_all_isas(2, 1, n, k, a_view, b_view);
    }
}

/// B stored transposed (`[n, k]` row-major, the layout of weights stored per output row).
fn transposed_b(data: &[f32], n: usize, k: usize) -> MatRef<'_, f32> {
    MatRef::row_major(data, n, k).transposed()
}

#[test]
fn few_rows_times_transposed_b_match_oracle() {
    let mut rng = Rng::new(10);
    for (m, n, k) in [
        (1, 1, 1),
        (1, 7, 15),
        (1, 16, 16),
        (2, 17, 17),
        (3, 33, 63),
        (4, 64, 64),
        (5, 100, 65),
        (6, 31, 130),
        (7, 48, 200),
        (8, 300, 129),
        (8, 20, 1000),
        (9, 40, 70),
    ] {
        let a = rng.vec(m * k);
        let b = rng.vec(n * k);
        check_all_isas(
            1,
            m,
            n,
            k,
            MatRef::row_major(&a, m, k),
            transposed_b(&b, n, k),
        );
        // Batch of 2: A read with column stride 2, B shared with a padded row (ldb = k + 3).
        let a2 = rng.vec(2 * m * 2 * k);
        let a_view = MatRef {
            data: &a2[..],
            offset: 0,
            batch_stride: m * 2 * k,
            row_stride: 2 * k,
            col_stride: 2,
        };
        let b_pad = rng.vec(n * (k + 3));
        let b_view = MatRef {
            data: &b_pad[..],
            offset: 0,
            batch_stride: 0,
            row_stride: 1,
            col_stride: k + 3,
        };
        check_all_isas(2, m, n, k, a_view, b_view);
    }
}

#[test]
fn transposed_b_bits_do_not_depend_on_m_or_threads() {
    let mut rng = Rng::new(11);
    let (n, k) = (333, 520);
    let a = rng.vec(9 * k);
    let b = rng.vec(n * k);
    let b_view = transposed_b(&b, n, k);
    for isa in Isa::available() {
        // M = 9 takes the packed path; M <= 8 the transposed-B path.
        let nine = on_threads(2, isa, || {
            run_gemm(1, 9, n, k, MatRef::row_major(&a, 9, k), b_view)
        });
        for (m, threads) in [(1, 1), (3, 4), (8, 2)] {
            let got = on_threads(threads, isa, || {
                run_gemm(1, m, n, k, MatRef::row_major(&a[..m * k], m, k), b_view)
            });
            assert_bits_eq(
                &got,
                &nine[..m * n],
                &format!("{isa}: M={m} on {threads} threads vs M=9"),
            );
        }
    }
}

#[test]
fn packed_b_matches_oracle_on_every_isa() {
    let mut rng = Rng::new(12);
    for (batch, m, n, k, b_transposed) in [
        (1, 1, 70, 65, false),
        (2, 9, 100, 300, true),
        (1, 200, 33, 129, false),
        (3, 5, 1, 1, true),
    ] {
        let a = rng.vec(batch * m * k);
        let b = rng.vec(k * n);
        let a_view = MatRef::row_major(&a, m, k);
        let b_view = if b_transposed {
            transposed_b(&b, n, k)
        } else {
            MatRef::row_major(&b, k, n)
        };
        let want = oracle(batch, m, n, k, a_view, b_view.with_batch_stride(0));
        let packed_default = PackedB::new(k, n, b_view);
        assert_eq!((packed_default.k(), packed_default.n()), (k, n));
        for isa in Isa::available() {
            // Packed for this ISA, and packed for another one (repacked per call).
            let packed_here = with_isa(isa, || PackedB::new(k, n, b_view));
            assert_eq!(packed_here.isa(), isa);
            for packed in [&packed_here, &packed_default] {
                for threads in [1, 3] {
                    let got = on_threads(threads, isa, || {
                        let mut out = vec![f32::NAN; batch * m * n];
                        gemm_packed_b(batch, m, a_view, packed, Epilogue::None, &mut out);
                        out
                    });
                    assert_bits_eq(
                        &got,
                        &want,
                        &format!(
                            "packed B ({}) {batch}x{m}x{n}x{k} on {isa}, {threads} threads",
                            packed.isa()
                        ),
                    );
                }
            }
        }
    }
}

#[test]
fn packed_b_converts_half_inputs_and_applies_epilogues() {
    let mut rng = Rng::new(13);
    let (m, n, k) = (7, 40, 90);
    let a32 = rng.vec(m * k);
    let b32 = rng.vec(k * n);
    let a16: Vec<f16> = a32.iter().map(|&x| f16::from_f32(x)).collect();
    let b16: Vec<f16> = b32.iter().map(|&x| f16::from_f32(x)).collect();
    let widen = |v: &[f16]| v.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
    let (aw, bw) = (widen(&a16), widen(&b16));
    let acc = oracle(
        1,
        m,
        n,
        k,
        MatRef::row_major(&aw, m, k),
        MatRef::row_major(&bw, k, n),
    );
    let bias = rng.vec(n);
    let want: Vec<f32> = acc
        .iter()
        .enumerate()
        .map(|(idx, &v)| v + bias[idx % n])
        .collect();
    let bias_view = MatRef {
        data: &bias[..],
        offset: 0,
        batch_stride: 0,
        row_stride: 0,
        col_stride: 1,
    };
    for isa in Isa::available() {
        let got = with_isa(isa, || {
            let packed = PackedB::new(k, n, MatRef::row_major(&b16, k, n));
            let mut out = vec![0.0; m * n];
            gemm_packed_b(
                1,
                m,
                MatRef::row_major(&a16, m, k),
                &packed,
                Epilogue::Add(bias_view),
                &mut out,
            );
            out
        });
        assert_bits_eq(&got, &want, &format!("f16 packed B with bias on {isa}"));
    }
}

#[test]
fn strided_and_transposed_operands_match_oracle() {
    let mut rng = Rng::new(2);
    let (m, n, k) = (19, 41, 130);
    // A stored transposed ([k, m] row-major), B stored transposed ([n, k] row-major).
    let at = rng.vec(k * m);
    let bt = rng.vec(n * k);
    let a = MatRef::row_major(&at, k, m).transposed();
    let b = MatRef::row_major(&bt, n, k).transposed();
    check_all_isas(1, m, n, k, a, b);
    // Padded leading dimensions, an offset and a non-unit column stride.
    let a_pad = rng.vec(3 + m * (k * 2 + 5));
    let a = MatRef {
        data: &a_pad,
        offset: 3,
        batch_stride: 0,
        row_stride: k * 2 + 5,
        col_stride: 2,
    };
    let b_pad = rng.vec(k * (n + 7));
    let b = MatRef {
        data: &b_pad,
        offset: 0,
        batch_stride: 0,
        row_stride: n + 7,
        col_stride: 1,
    };
    check_all_isas(1, m, n, k, a, b);
}

#[test]
fn batched_with_shared_and_separate_operands() {
    let mut rng = Rng::new(3);
    let (batch, m, n, k) = (3, 11, 37, 90);
    let a = rng.vec(batch * m * k);
    let b = rng.vec(k * n);
    // Separate A per batch, one B shared across the batch (batch stride 0).
    let a_view = MatRef::row_major(&a, m, k);
    let b_view = MatRef::row_major(&b, k, n).with_batch_stride(0);
    check_all_isas(batch, m, n, k, a_view, b_view);
}

#[test]
fn thread_count_does_not_change_bits() {
    let mut rng = Rng::new(4);
    let (m, n, k) = (200, 300, 333);
    let a = rng.vec(m * k);
    let b = rng.vec(k * n);
    let (a, b) = (MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n));
    for isa in Isa::available() {
        let one = on_threads(1, isa, || run_gemm(1, m, n, k, a, b));
        for threads in [2, 4] {
            let many = on_threads(threads, isa, || run_gemm(1, m, n, k, a, b));
            assert_bits_eq(&many, &one, &format!("{isa}: {threads} threads vs 1"));
        }
    }
    let want = oracle(1, 8, n, k, a, b);
    let got = on_threads(4, Isa::detect(), || run_gemm(1, m, n, k, a, b));
    assert_bits_eq(&got[..8 * n], &want, "4 threads vs oracle, first 8 rows");
}

#[test]
fn rows_do_not_depend_on_m_or_position() {
    let mut rng = Rng::new(5);
    let (n, k) = (70, 200);
    let a = rng.vec(64 * k);
    let b = rng.vec(k * n);
    let b_view = MatRef::row_major(&b, k, n);
    for isa in Isa::available() {
        let full = on_threads(2, isa, || {
            run_gemm(1, 64, n, k, MatRef::row_major(&a, 64, k), b_view)
        });
        for row in [0, 5, 63] {
            let single = on_threads(1, isa, || {
                run_gemm(
                    1,
                    1,
                    n,
                    k,
                    MatRef::row_major(&a[row * k..(row + 1) * k], 1, k),
                    b_view,
                )
            });
            assert_bits_eq(
                &single,
                &full[row * n..(row + 1) * n],
                &format!("{isa}: row {row}, M=1 vs M=64"),
            );
        }
    }
}

#[test]
fn half_precision_inputs_convert_exactly() {
    let mut rng = Rng::new(6);
    let (m, n, k) = (10, 35, 150);
    let a32 = rng.vec(m * k);
    let b32 = rng.vec(k * n);
    let a16: Vec<f16> = a32.iter().map(|&x| f16::from_f32(x)).collect();
    let b16: Vec<f16> = b32.iter().map(|&x| f16::from_f32(x)).collect();
    let abf: Vec<bf16> = a32.iter().map(|&x| bf16::from_f32(x)).collect();
    let bbf: Vec<bf16> = b32.iter().map(|&x| bf16::from_f32(x)).collect();
    let widen16 = |v: &[f16]| v.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
    let widenbf = |v: &[bf16]| v.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
    let (a16w, b16w, abfw, bbfw) = (widen16(&a16), widen16(&b16), widenbf(&abf), widenbf(&bbf));
    let want16 = oracle(
        1,
        m,
        n,
        k,
        MatRef::row_major(&a16w, m, k),
        MatRef::row_major(&b16w, k, n),
    );
    let wantbf = oracle(
        1,
        m,
        n,
        k,
        MatRef::row_major(&abfw, m, k),
        MatRef::row_major(&bbfw, k, n),
    );
    for isa in Isa::available() {
        let mut got = vec![0.0; m * n];
        samebits_kernels::with_isa(isa, || {
            gemm(
                1,
                m,
                n,
                k,
                MatRef::row_major(&a16, m, k),
                MatRef::row_major(&b16, k, n),
                Epilogue::None,
                &mut got,
            )
        });
        assert_bits_eq(&got, &want16, &format!("f16 on {isa}"));
        // Transposed B exercises the strided conversion path.
        let bbf_t: Vec<bf16> = (0..n * k).map(|idx| bbf[(idx % k) * n + idx / k]).collect();
        samebits_kernels::with_isa(isa, || {
            gemm(
                1,
                m,
                n,
                k,
                MatRef::row_major(&abf, m, k),
                MatRef::row_major(&bbf_t, n, k).transposed(),
                Epilogue::None,
                &mut got,
            )
        });
        assert_bits_eq(&got, &wantbf, &format!("bf16 on {isa}"));
    }
}

#[test]
fn epilogues_follow_their_formulas() {
    let mut rng = Rng::new(7);
    for m in [1, 3, 9] {
        for b_transposed in [false, true] {
            check_epilogues(&mut rng, m, b_transposed);
        }
    }
}

fn check_epilogues(rng: &mut Rng, m: usize, b_transposed: bool) {
    let (batch, n, k) = (2, 140, 70);
    let a = rng.vec(batch * m * k);
    let b = rng.vec(batch * k * n);
    let a = MatRef::row_major(&a, m, k);
    let b = if b_transposed {
        MatRef::row_major(&b, n, k).transposed()
    } else {
        MatRef::row_major(&b, k, n)
    };
    let acc = oracle(batch, m, n, k, a, b);
    let bias = rng.vec(n);
    let bias_view = MatRef {
        data: &bias[..],
        offset: 0,
        batch_stride: 0,
        row_stride: 0,
        col_stride: 1,
    };
    let c = rng.vec(batch * m * n);
    let c_view = MatRef::row_major(&c, m, n);
    let (alpha, beta) = (0.7f32, -1.3f32);
    let want_bias: Vec<f32> = acc
        .iter()
        .enumerate()
        .map(|(idx, &v)| v + bias[idx % n])
        .collect();
    let want_ab: Vec<f32> = acc
        .iter()
        .zip(&c)
        .map(|(&v, &cv)| (alpha * v) + (beta * cv))
        .collect();
    for isa in Isa::available() {
        let mut got = vec![0.0; batch * m * n];
        samebits_kernels::with_isa(isa, || {
            gemm(batch, m, n, k, a, b, Epilogue::Add(bias_view), &mut got)
        });
        assert_bits_eq(&got, &want_bias, &format!("bias on {isa}"));
        let ab = Epilogue::AlphaBeta {
            alpha,
            beta,
            c: Some(c_view),
        };
        samebits_kernels::with_isa(isa, || gemm(batch, m, n, k, a, b, ab, &mut got));
        assert_bits_eq(&got, &want_ab, &format!("alpha/beta on {isa}"));
    }
}

#[test]
fn results_are_close_to_float64() {
    let mut rng = Rng::new(8);
    let (m, n, k) = (16, 48, 1000);
    let a = rng.vec(m * k);
    let b = rng.vec(k * n);
    let got = run_gemm(
        1,
        m,
        n,
        k,
        MatRef::row_major(&a, m, k),
        MatRef::row_major(&b, k, n),
    );
    for i in 0..m {
        for j in 0..n {
            let (exact, magnitude) = (0..k).fold((0.0f64, 0.0f64), |(s, mag), p| {
                let t = a[i * k + p] as f64 * b[p * n + j] as f64;
                (s + t, mag + t.abs())
            });
            let err = (got[i * n + j] as f64 - exact).abs();
            assert!(
                err <= 1e-5 * magnitude,
                "({i}, {j}): {} vs {exact}",
                got[i * n + j]
            );
        }
    }
}

#[test]
#[should_panic(expected = "does not fit")]
fn out_of_bounds_views_are_rejected() {
    let a = vec![0.0f32; 10];
    let mut out = vec![0.0f32; 4];
    // A claims [4, 3] = 12 elements of a 10-element buffer.
    gemm_f32(
        1,
        4,
        1,
        3,
        MatRef::row_major(&a, 4, 3),
        MatRef::row_major(&a, 3, 1),
        &mut out,
    );
}
