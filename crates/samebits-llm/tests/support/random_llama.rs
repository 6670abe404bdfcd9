//! Random-weight llama-layout GGUF files for device tests and benchmarks (architectures llama,
//! qwen2 with Q / K / V biases, qwen3 with per-head Q / K norms and its own head size): the
//! shapes of a real model
//! (SmolLM2-135M: 30 layers, width 576, 9 / 3 heads, FFN 1536, vocabulary 49,152, tied Q8_0
//! embeddings, Q4_1 matrices) without its 98 MB download. Quantized blocks hold random codes
//! with scales that keep activations of order one; norms are near 1. The tokenizer has 47
//! one-character tokens, `<|end|>` (end of sequence) and fillers `<tN>` up to the vocabulary
//! size (no merges), so that prompts encode and every generated id decodes.
//! Used through `#[path]` by `tests/gpu.rs` and `examples/gpu_llm.rs` (with the GGUF writer of
//! samebits-gguf's tests as `gguf_common`).

use super::gguf_common::{GgufWriter, string, strings};
use samebits_gguf::{GgmlType, MetadataValue};
use samebits_testdata::Rng;
use std::path::Path;

/// The `general.architecture` of a random model and what it adds to the llama layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // the example builds llama shapes only; the tests build every family
pub enum Family {
    Llama,
    /// Q / K / V biases.
    Qwen2,
    /// Per-head Q / K RMSNorm scales, `attention.key_length`.
    Qwen3,
    /// Gemma 3: Qwen3's head norms, sandwich norms, a GELU gate, local layers, a window as long
    /// as the context.
    Gemma3,
}

/// The shape of a random llama-layout model.
#[derive(Clone, Copy, Debug)]
pub struct LlamaShape {
    pub family: Family,
    pub layers: usize,
    pub dim: usize,
    pub heads: usize,
    /// Features per head (`dim / heads` but for qwen3 shapes).
    pub head_dim: usize,
    pub kv_heads: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub context: usize,
    /// Type of the layer matrices (the embedding is Q8_0).
    pub matrices: GgmlType,
}

/// SmolLM2-135M's shape.
#[allow(dead_code)] // the example's shape; tests take small ones
pub const SMOLLM2: LlamaShape = LlamaShape {
    family: Family::Llama,
    layers: 30,
    dim: 576,
    heads: 9,
    head_dim: 64,
    kv_heads: 3,
    ffn: 1536,
    vocab: 49_152,
    context: 8192,
    matrices: GgmlType::Q4_1,
};

fn f16(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_le_bytes()
}

/// `rows` rows of `cols` random weights of `ty` (any type with a dequantization,
/// [`GgmlType::can_dequantize`]), values of order `scale`.
fn matrix(rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize, scale: f32) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows * ty.row_bytes(cols).expect("whole blocks"));
    if ty.block_elems() == 256 {
        // K-quant super-blocks: random codes and packed scales, f16 scales of order `scale`.
        for _ in 0..rows * cols / 256 {
            let d = scale * (0.5 + 0.5 * rng.unit().abs());
            match ty {
                GgmlType::Q4K | GgmlType::Q5K => {
                    out.extend(f16(d / 512.0));
                    out.extend(f16(d / 512.0));
                    out.extend(rng.bytes(ty.block_bytes() - 4));
                }
                GgmlType::Q6K => {
                    out.extend(rng.bytes(ty.block_bytes() - 2));
                    out.extend(f16(d / 2048.0));
                }
                GgmlType::Iq4Xs => {
                    out.extend(f16(d / 4096.0));
                    out.extend(rng.bytes(ty.block_bytes() - 2));
                }
                GgmlType::Q2K => {
                    out.extend(rng.bytes(80));
                    out.extend(f16(d / 64.0));
                    out.extend(f16(d / 64.0));
                }
                GgmlType::Q3K => {
                    out.extend(rng.bytes(108));
                    out.extend(f16(d / 128.0));
                }
                other => panic!("no random blocks of {other}"),
            }
        }
        return out;
    }
    let blocks = rows * cols / 32;
    for _ in 0..blocks {
        let d = scale * (0.5 + 0.5 * rng.unit().abs());
        match ty {
            GgmlType::Q4_1 => {
                out.extend(f16(d / 8.0));
                out.extend(f16(-d));
                out.extend(rng.bytes(16));
            }
            GgmlType::Q4_0 => {
                out.extend(f16(d / 8.0));
                out.extend(rng.bytes(16));
            }
            GgmlType::Q5_0 => {
                out.extend(f16(d / 16.0));
                out.extend(rng.bytes(20));
            }
            GgmlType::Q5_1 => {
                out.extend(f16(d / 16.0));
                out.extend(f16(-d));
                out.extend(rng.bytes(20));
            }
            GgmlType::Q8_0 => {
                out.extend(f16(d / 128.0));
                out.extend(rng.bytes(32));
            }
            GgmlType::Iq4Nl => {
                out.extend(f16(d / 128.0));
                out.extend(rng.bytes(16));
            }
            GgmlType::F32 => {
                for _ in 0..32 {
                    out.extend((rng.unit() * scale).to_le_bytes());
                }
            }
            GgmlType::F16 => {
                for _ in 0..32 {
                    out.extend(f16(rng.unit() * scale));
                }
            }
            GgmlType::BF16 => {
                for _ in 0..32 {
                    out.extend(half::bf16::from_f32(rng.unit() * scale).to_le_bytes());
                }
            }
            other => panic!("no random blocks of {other}"),
        }
    }
    out
}

/// Writes a random model of `shape` to `path` (weights from `seed`).
pub fn write_random_llama(path: &Path, shape: &LlamaShape, seed: u64) {
    let LlamaShape {
        family,
        layers,
        dim,
        heads,
        head_dim,
        kv_heads,
        ffn,
        vocab,
        context,
        matrices,
    } = *shape;
    let u32v = |x: usize| MetadataValue::U32(x as u32);
    let mut tokens: Vec<String> = (b'!'..=b'O').map(|b| char::from(b).to_string()).collect();
    tokens.push("<|end|>".into());
    // Fillers (no merge produces them) so that every id of the embedding decodes.
    tokens.extend((tokens.len()..vocab).map(|i| format!("<t{i}>")));
    let token_refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut types = vec![MetadataValue::I32(1); tokens.len()];
    types[47] = MetadataValue::I32(3);
    let arch = match family {
        Family::Llama => "llama",
        Family::Qwen2 => "qwen2",
        Family::Qwen3 => "qwen3",
        Family::Gemma3 => "gemma3",
    };
    let key = |k: &str| format!("{arch}.{k}");
    let mut w = GgufWriter::new(3)
        .kv("general.architecture", string(arch))
        .kv(&key("block_count"), u32v(layers))
        .kv(&key("embedding_length"), u32v(dim))
        .kv(&key("feed_forward_length"), u32v(ffn))
        .kv(&key("attention.head_count"), u32v(heads))
        .kv(&key("attention.head_count_kv"), u32v(kv_heads))
        .kv(&key("attention.key_length"), u32v(head_dim))
        .kv(&key("rope.freq_base"), MetadataValue::F32(100_000.0))
        .kv(
            &key("attention.layer_norm_rms_epsilon"),
            MetadataValue::F32(1e-5),
        )
        .kv(&key("context_length"), u32v(context))
        .kv(&key("vocab_size"), u32v(vocab))
        .kv(&key("attention.sliding_window"), u32v(context))
        .kv("tokenizer.ggml.model", string("gpt2"))
        .kv("tokenizer.ggml.tokens", strings(&token_refs))
        .kv("tokenizer.ggml.token_type", MetadataValue::Array(types))
        .kv("tokenizer.ggml.merges", MetadataValue::Array(vec![]))
        .kv("tokenizer.ggml.eos_token_id", u32v(47));
    let mut rng = Rng(seed);
    let (q_dim, kv_dim) = (heads * head_dim, kv_heads * head_dim);
    let norm = |rng: &mut Rng, n: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|_| (1.0 + 0.1 * rng.unit()).to_le_bytes())
            .collect()
    };
    let embd = matrix(&mut rng, GgmlType::Q8_0, vocab, dim, 1.0);
    w = w.tensor(
        "token_embd.weight",
        &[dim as u64, vocab as u64],
        GgmlType::Q8_0,
        embd,
    );
    let in_scale = 1.0 / (dim as f32).sqrt();
    for i in 0..layers {
        let name = |n: &str| format!("blk.{i}.{n}.weight");
        let mats = [
            ("attn_q", q_dim, dim, in_scale),
            ("attn_k", kv_dim, dim, in_scale),
            ("attn_v", kv_dim, dim, in_scale),
            ("attn_output", dim, q_dim, 1.0 / (q_dim as f32).sqrt()),
            ("ffn_gate", ffn, dim, in_scale),
            ("ffn_up", ffn, dim, in_scale),
            ("ffn_down", dim, ffn, 1.0 / (ffn as f32).sqrt()),
        ];
        w = w.tensor(
            &name("attn_norm"),
            &[dim as u64],
            GgmlType::F32,
            norm(&mut rng, dim),
        );
        w = w.tensor(
            &name("ffn_norm"),
            &[dim as u64],
            GgmlType::F32,
            norm(&mut rng, dim),
        );
        for (n, rows, cols, scale) in mats {
            let m = matrix(&mut rng, matrices, rows, cols, scale);
            w = w.tensor(&name(n), &[cols as u64, rows as u64], matrices, m);
        }
        if family == Family::Qwen2 {
            for (n, rows) in [("attn_q", q_dim), ("attn_k", kv_dim), ("attn_v", kv_dim)] {
                let bias: Vec<u8> = (0..rows)
                    .flat_map(|_| (0.1 * rng.unit()).to_le_bytes())
                    .collect();
                let bias_name = format!("blk.{i}.{n}.bias");
                w = w.tensor(&bias_name, &[rows as u64], GgmlType::F32, bias);
            }
        }
        if matches!(family, Family::Qwen3 | Family::Gemma3) {
            for n in ["attn_q_norm", "attn_k_norm"] {
                let scale = norm(&mut rng, head_dim);
                w = w.tensor(&name(n), &[head_dim as u64], GgmlType::F32, scale);
            }
        }
        if family == Family::Gemma3 {
            for n in ["post_attention_norm", "post_ffw_norm"] {
                w = w.tensor(&name(n), &[dim as u64], GgmlType::F32, norm(&mut rng, dim));
            }
        }
    }
    w = w.tensor(
        "output_norm.weight",
        &[dim as u64],
        GgmlType::F32,
        norm(&mut rng, dim),
    );
    std::fs::write(path, w.to_bytes()).expect("writing the random model");
}
