//! The quantized products of samebits-kernels on the real SmolLM2 Q4_1 weights (skipped with a
//! notice when the file is absent): `matvec_q_f32` equals dequantize-then-`canonical_dot` bit for
//! bit on every row.

#[path = "../../samebits-gguf/tests/common/mod.rs"]
mod gguf_common;

use gguf_common::smollm2_path;
use samebits_gguf::{GgufFile, TensorData};
use samebits_kernels::{canonical_dot, matvec_q_f32};

#[test]
fn fused_matvec_on_real_weights_equals_dequantize_then_dot() {
    let Some(path) = smollm2_path() else { return };
    let file = GgufFile::open(path).unwrap();
    for name in ["blk.0.attn_k.weight", "blk.3.ffn_down.weight"] {
        let info = file.tensor_info(name).unwrap();
        let k = info.row_len();
        let rows = info.numel() / k;
        let x: Vec<f32> = (0..k)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let bytes = file.tensor_bytes(name).unwrap();
        let mut fused = vec![0f32; rows];
        matvec_q_f32(info.ggml_type, bytes, &x, &mut fused).unwrap();
        let TensorData::Quantized(q) = file.tensor(name).unwrap() else {
            panic!("{name} is quantized")
        };
        let dense = q.dequantize().unwrap();
        for (r, w) in dense.as_slice::<f32>().unwrap().chunks_exact(k).enumerate() {
            assert_eq!(
                fused[r].to_bits(),
                canonical_dot(w, &x).to_bits(),
                "{name} row {r}"
            );
        }
    }
}
