//! Random quantized weights shared by the benches: ggml rows of a type with small finite
//! scales, and the same rows packed into row panels.

use samebits_ggml::GgmlType;

/// `rows` random ggml rows of `t` and `cols` weights: every block's leading f16 (the scale `d`;
/// for the types with a min also `dmin` / `m`) a small finite value, every other byte random
/// (Q6_K's trailing `d` likewise). `seed` advances, so successive calls differ.
pub fn random_rows(t: GgmlType, rows: usize, cols: usize, seed: &mut u64) -> Vec<u8> {
    let mut next = || {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) as u8
    };
    let block = t.block_bytes();
    let mut bytes: Vec<u8> = (0..rows * t.row_bytes(cols).unwrap())
        .map(|_| next())
        .collect();
    let scale = half::f16::from_f32(0.0123).to_le_bytes();
    for b in bytes.chunks_exact_mut(block) {
        if t == GgmlType::Q6K {
            b[block - 2..].copy_from_slice(&scale);
        } else {
            b[..2].copy_from_slice(&scale);
        }
        if matches!(
            t,
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K
        ) {
            b[2..4].copy_from_slice(&scale);
        }
    }
    bytes
}

/// `ggml_rows` (`rows` rows of `t` and `cols` weights) packed into row panels.
pub fn packed(t: GgmlType, rows: usize, cols: usize, ggml_rows: &[u8]) -> Vec<u8> {
    let row_bytes = t.row_bytes(cols).unwrap();
    samebits_kernels::pack_panels(t, rows, cols, |first, out| {
        out.copy_from_slice(&ggml_rows[first * row_bytes..][..out.len()]);
        Ok::<(), samebits_ggml::QuantError>(())
    })
    .unwrap()
}
