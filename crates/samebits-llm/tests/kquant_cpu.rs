//! Quantized decoders on the CPU: small random llamas with Q4_K, Q5_K and Q6_K layer matrices
//! (the types of the common Q4_K_M and Q5_K_M presets), or Q5_0, Q5_1, IQ4_NL or IQ4_XS ones,
//! run their products on the row-panel kernels (samebits-kernels `quant/panel.rs`), whose
//! several-token (prefill) and one-token (decode) paths are different code: one prefill over a
//! whole sequence must give every position the bits its decode step gave. (The kernels' own
//! tests hold both paths to the dequantize-then-dot definition of `docs/gguf.md` on every ISA.)

#[path = "../../samebits-gguf/tests/common/mod.rs"]
mod gguf_common;
#[path = "support/random_llama.rs"]
mod random_llama;

use random_llama::{Family, LlamaShape, write_random_llama};
use samebits_gguf::GgmlType;
use samebits_llm::Llm;
use samebits_llm::sampling::argmax;
use samebits_ops::OperationSet;

fn shape(matrices: GgmlType) -> LlamaShape {
    LlamaShape {
        family: Family::Llama,
        layers: 2,
        dim: 256,
        heads: 4,
        head_dim: 64,
        kv_heads: 2,
        ffn: 512,
        vocab: 96,
        context: 128,
        matrices,
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn panel_type_prefill_equals_decode_steps() {
    let dir = tempfile::tempdir().unwrap();
    let types = [
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Iq4Nl,
        GgmlType::Iq4Xs,
    ];
    for (n, matrices) in types.into_iter().enumerate() {
        let path = dir.path().join(format!("random_{n}.gguf"));
        write_random_llama(&path, &shape(matrices), 11 + n as u64);
        let llm = Llm::load(&path, OperationSet::Reproducible).unwrap();
        let vocab = llm.vocab_size();
        // 3 prompt tokens (the few-token kernel), then 20 greedy decode steps.
        let mut tokens = vec![5u32, 17, 42];
        let mut cache = llm.new_cache();
        let prompt_rows = llm.forward(&tokens, &mut cache).unwrap();
        let mut rows: Vec<Vec<f32>> = prompt_rows.chunks(vocab).map(<[f32]>::to_vec).collect();
        for _ in 0..20 {
            let next = argmax(rows.last().unwrap());
            tokens.push(next);
            rows.push(llm.forward(&[next], &mut cache).unwrap());
        }
        // One prefill of 22 tokens: the prefill kernel (8 or more token rows).
        let all = &tokens[..tokens.len() - 1];
        let prefill = llm.forward(all, &mut llm.new_cache()).unwrap();
        assert!(
            rows.iter().any(|r| r.iter().any(|&x| x != rows[0][0])),
            "{matrices}: logits are constant"
        );
        for (t, row) in prefill.chunks(vocab).enumerate() {
            assert_eq!(
                bits(row),
                bits(&rows[t]),
                "{matrices}: prefill row {t} differs from its decode step"
            );
        }
    }
}
