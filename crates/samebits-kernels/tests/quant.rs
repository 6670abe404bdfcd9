//! The quantized dot products against dequantize-then-`canonical_dot`, bit for bit, on random
//! blocks of every format.

#[path = "../../samebits-ggml/tests/common/mod.rs"]
mod ggml_common;

use ggml_common::{TYPES, random_blocks};
use samebits_ggml::{GgmlType, dequantize_row};
use samebits_kernels::{canonical_dot, dot_q_f32, matvec_q_f32};
use samebits_testdata::Rng;

#[test]
fn fused_dot_products_equal_dequantize_then_canonical_dot() {
    let mut rng = Rng(2);
    for ty in TYPES {
        let lengths: &[usize] = match ty.block_elems() {
            1 => &[0, 1, 63, 64, 65, 200],
            32 => &[32, 64, 96, 576],
            _ => &[256, 512, 768],
        };
        for &k in lengths {
            let x: Vec<f32> = (0..k).map(|_| rng.unit() * 8.0).collect();
            for n_rows in [1, 3, 32, 37, 70] {
                let rows = random_blocks(ty, n_rows * k / ty.block_elems(), &mut rng);
                let mut fused = vec![f32::NAN; n_rows];
                matvec_q_f32(ty, &rows, &x, &mut fused).unwrap();
                let row_bytes = ty.row_bytes(k).unwrap();
                for r in 0..n_rows {
                    let row = &rows[r * row_bytes..(r + 1) * row_bytes];
                    let mut w = vec![0f32; k];
                    dequantize_row(ty, row, &mut w).unwrap();
                    let want = canonical_dot(&w, &x);
                    assert_eq!(
                        fused[r].to_bits(),
                        want.to_bits(),
                        "{ty} K={k} rows={n_rows} row {r}"
                    );
                    if n_rows == 3 {
                        let single = dot_q_f32(ty, row, &x).unwrap();
                        assert_eq!(single.to_bits(), want.to_bits(), "{ty} K={k} single row");
                    }
                }
            }
        }
    }
}

#[test]
fn canonical_dot_follows_the_tile_order() {
    // 64 terms of 1.0 then one of 2^24: tile 0 sums to 64, tile 1 to 2^24; 2^24 + 64 is exact.
    // A plain left-to-right chain gives the same here; the cases below separate the orders.
    let mut a = vec![1.0f32; 65];
    a[64] = 16_777_216.0;
    let b = vec![1.0f32; 65];
    assert_eq!(canonical_dot(&a, &b), 16_777_280.0);
    // Tile 0: 2^24 then 63 ones, each lost to rounding (2^24 + 1 rounds to 2^24); tile 1: 64 ones.
    let mut a = vec![1.0f32; 128];
    a[0] = 16_777_216.0;
    let b = vec![1.0f32; 128];
    assert_eq!(canonical_dot(&a, &b), 16_777_216.0 + 64.0);
    let sequential = a.iter().fold(0.0f32, |p, &v| v.mul_add(1.0, p));
    assert_eq!(sequential, 16_777_216.0);
    assert_eq!(canonical_dot(&[], &[]).to_bits(), 0.0f32.to_bits());
    // Partials start at +0.0, so a product of -0.0 leaves +0.0.
    assert_eq!(canonical_dot(&[-0.0], &[1.0]).to_bits(), 0.0f32.to_bits());
}

#[test]
fn mismatched_buffers_are_errors() {
    let x = vec![0f32; 64];
    assert!(dot_q_f32(GgmlType::Q4_1, &[0; 39], &x).is_err());
    assert!(dot_q_f32(GgmlType::Q4_1, &[0; 40], &x[..48]).is_err());
    assert!(matvec_q_f32(GgmlType::Q4_1, &[0; 80], &x, &mut [0f32; 3]).is_err());
    assert!(dot_q_f32(GgmlType::Iq2Xxs, &[0; 66], &[0f32; 256]).is_err());
}
