//! Hugging Face checkpoint import on tiny random Llama-layout checkpoints written here
//! (config.json, safetensors written with the `safetensors` crate, tokenizer.json):
//! - loading a checkpoint folder and loading the equivalent GGUF file (the same values, Q/K rows
//!   permuted as llama.cpp's converter does, written by the GGUF test writer of samebits-gguf)
//!   give the same logits bit for bit: an untied Llama in F32 split over two shards with
//!   `model.safetensors.index.json`, and a Qwen2 (Q/K/V biases, tied embeddings, one KV head) in
//!   BF16;
//! - those logits agree with the float64 forward of `tools/reference_tiny_llama.py`, which
//!   follows `transformers`' definition on the unpermuted weights (rotate_half rotary):
//!   max |a - b| / max |b| <= 1e-5 (fixture `tests/fixtures/tiny_llama_logits.json`);
//! - unsupported configurations are refused with the field named.
//!
//! The weights are not stored: the test and the Python tool generate them from the same rule
//! (the tool's docstring).

#[path = "../../samebits-gguf/tests/common/mod.rs"]
mod gguf_common;

use gguf_common::{GgufWriter, string, strings};
use safetensors::Dtype;
use safetensors::tensor::TensorView;
use samebits_gguf::{GgmlType, MetadataValue};
use samebits_llm::Llm;
use samebits_ops::OperationSet;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy)]
struct Variant {
    name: &'static str,
    model_type: &'static str,
    vocab: usize,
    hidden: usize,
    heads: usize,
    kv_heads: usize,
    inter: usize,
    layers: usize,
    eps: f32,
    theta: f32,
    tie: bool,
    qkv_bias: bool,
    /// The head size (`hidden / heads` when they are equal).
    head_dim: usize,
    /// Qwen3's per-head Q / K RMSNorm.
    qk_norm: bool,
    /// Llama 3.1 rope scaling: factor, low_freq_factor, high_freq_factor,
    /// original_max_position_embeddings.
    rope_scaling: Option<[f64; 4]>,
    /// Phi-3's fused `qkv_proj` and `gate_up_proj`.
    fused: bool,
    /// Gemma 3: scaled embeddings, `1 + w` norms, sandwich norms, a GELU gate, five local
    /// layers in six, linear rope scaling of the global ones by 8, a window of 16.
    gemma: bool,
    /// Gemma 2 instead (with `gemma`): alternating local and global layers, one rotary base, no
    /// rope scaling, these attention and final-logit soft caps.
    softcaps: Option<[f32; 2]>,
}

const LLAMA: Variant = Variant {
    name: "llama",
    model_type: "llama",
    vocab: 48,
    hidden: 32,
    heads: 4,
    kv_heads: 2,
    inter: 40,
    layers: 2,
    eps: 1e-5,
    theta: 10000.0,
    tie: false,
    qkv_bias: false,
    head_dim: 8,
    qk_norm: false,
    rope_scaling: None,
    fused: false,
    gemma: false,
    softcaps: None,
};

const QWEN2: Variant = Variant {
    name: "qwen2",
    model_type: "qwen2",
    kv_heads: 1,
    eps: 1e-6,
    theta: 500000.0,
    tie: true,
    qkv_bias: true,
    ..LLAMA
};

const LLAMA3: Variant = Variant {
    name: "llama3",
    heads: 2,
    kv_heads: 1,
    head_dim: 16,
    tie: true,
    rope_scaling: Some([8.0, 1.0, 4.0, 64.0]),
    ..LLAMA
};

const PHI3: Variant = Variant {
    name: "phi3",
    model_type: "phi3",
    fused: true,
    ..LLAMA
};

const GEMMA3: Variant = Variant {
    name: "gemma3",
    model_type: "gemma3_text",
    heads: 2,
    kv_heads: 1,
    head_dim: 16,
    layers: 6,
    eps: 1e-6,
    theta: 1_000_000.0,
    tie: true,
    qk_norm: true,
    gemma: true,
    ..LLAMA
};

const GEMMA2: Variant = Variant {
    name: "gemma2",
    model_type: "gemma2",
    layers: 4,
    theta: 10_000.0,
    qk_norm: false,
    softcaps: Some([5.0, 3.0]),
    ..GEMMA3
};

const QWEN3: Variant = Variant {
    name: "qwen3",
    model_type: "qwen3",
    eps: 1e-6,
    theta: 1_000_000.0,
    tie: true,
    head_dim: 16,
    qk_norm: true,
    ..LLAMA
};

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Embedding,
    Matrix,
    Norm,
}

/// The checkpoint's tensors in generation order (as `tensor_names` of the Python tool).
fn tensor_list(v: &Variant) -> Vec<(String, Vec<usize>, Kind)> {
    let (h, d) = (v.hidden, v.head_dim);
    let (q, kv) = (v.heads * d, v.kv_heads * d);
    let mut list = vec![(
        "model.embed_tokens.weight".to_string(),
        vec![v.vocab, h],
        Kind::Embedding,
    )];
    for i in 0..v.layers {
        let p = |n: &str| format!("model.layers.{i}.{n}");
        list.push((p("input_layernorm.weight"), vec![h], Kind::Norm));
        if v.fused {
            list.push((
                p("self_attn.qkv_proj.weight"),
                vec![q + 2 * kv, h],
                Kind::Matrix,
            ));
        } else {
            list.push((p("self_attn.q_proj.weight"), vec![q, h], Kind::Matrix));
            list.push((p("self_attn.k_proj.weight"), vec![kv, h], Kind::Matrix));
            list.push((p("self_attn.v_proj.weight"), vec![kv, h], Kind::Matrix));
        }
        if v.qkv_bias {
            list.push((p("self_attn.q_proj.bias"), vec![q], Kind::Matrix));
            list.push((p("self_attn.k_proj.bias"), vec![kv], Kind::Matrix));
            list.push((p("self_attn.v_proj.bias"), vec![kv], Kind::Matrix));
        }
        if v.qk_norm {
            list.push((p("self_attn.q_norm.weight"), vec![d], Kind::Norm));
            list.push((p("self_attn.k_norm.weight"), vec![d], Kind::Norm));
        }
        list.push((p("self_attn.o_proj.weight"), vec![h, q], Kind::Matrix));
        list.push((p("post_attention_layernorm.weight"), vec![h], Kind::Norm));
        if v.gemma {
            list.push((p("pre_feedforward_layernorm.weight"), vec![h], Kind::Norm));
            list.push((p("post_feedforward_layernorm.weight"), vec![h], Kind::Norm));
        }
        if v.fused {
            list.push((
                p("mlp.gate_up_proj.weight"),
                vec![2 * v.inter, h],
                Kind::Matrix,
            ));
        } else {
            list.push((p("mlp.gate_proj.weight"), vec![v.inter, h], Kind::Matrix));
            list.push((p("mlp.up_proj.weight"), vec![v.inter, h], Kind::Matrix));
        }
        list.push((p("mlp.down_proj.weight"), vec![h, v.inter], Kind::Matrix));
    }
    list.push(("model.norm.weight".into(), vec![h], Kind::Norm));
    if !v.tie {
        list.push(("lm_head.weight".into(), vec![v.vocab, h], Kind::Matrix));
    }
    list
}

/// Tensor number `n`'s values (the Python tool's rule; exact in f32 and bf16).
fn values(n: usize, count: usize, kind: Kind) -> Vec<f32> {
    let mut rng = samebits_testdata::Rng(n as u64 + 1);
    (0..count)
        .map(|_| {
            let k = (rng.next_u64() >> 56) as f32;
            match kind {
                Kind::Norm => 0.5 + (k / 2.0).floor() / 256.0,
                Kind::Embedding => (k - 128.0) / 128.0,
                Kind::Matrix => (k - 128.0) / 128.0 * 0.25,
            }
        })
        .collect()
}

fn bytes_of(values: &[f32], dtype: Dtype) -> Vec<u8> {
    match dtype {
        Dtype::F32 => values.iter().flat_map(|x| x.to_le_bytes()).collect(),
        // The values are exact in bf16: its bits are the top half of the f32's.
        Dtype::BF16 => values
            .iter()
            .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
            .collect(),
        other => panic!("no writer for {other:?}"),
    }
}

/// The 48 vocabulary strings: 47 byte-level characters (`!` to `O`) and `<|end|>`.
fn vocabulary() -> Vec<String> {
    let mut tokens: Vec<String> = (b'!'..=b'O').map(|b| char::from(b).to_string()).collect();
    tokens.push("<|end|>".into());
    tokens
}

fn write_json(path: &Path, value: &serde_json::Value) {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

/// Writes the checkpoint folder of `v` with weights in `dtype`, split over `shards` files.
fn write_checkpoint(dir: &Path, v: &Variant, dtype: Dtype, shards: usize) {
    std::fs::create_dir_all(dir).unwrap();
    write_json(
        &dir.join("config.json"),
        &serde_json::json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": v.model_type,
            "hidden_size": v.hidden,
            "intermediate_size": v.inter,
            "num_hidden_layers": v.layers,
            "num_attention_heads": v.heads,
            "num_key_value_heads": v.kv_heads,
            "rms_norm_eps": v.eps,
            "rope_theta": v.theta,
            "rope_scaling": v.rope_scaling.map(|[factor, low, high, old]| serde_json::json!({
                "rope_type": "llama3",
                "factor": factor,
                "low_freq_factor": low,
                "high_freq_factor": high,
                "original_max_position_embeddings": old,
            })),
            "max_position_embeddings": 64,
            "vocab_size": v.vocab,
            "tie_word_embeddings": v.tie,
            "hidden_act": "silu",
            "head_dim": v.head_dim,
        }),
    );
    if v.gemma {
        let path = dir.join("config.json");
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let gemma = match v.softcaps {
            None => serde_json::json!({
                "hidden_act": null,
                "hidden_activation": "gelu_pytorch_tanh",
                "query_pre_attn_scalar": v.head_dim,
                "rope_local_base_freq": 10000.0,
                "rope_scaling": {"rope_type": "linear", "factor": 8.0},
                "sliding_window": 16,
                "sliding_window_pattern": 6,
            }),
            Some([attention, logits]) => serde_json::json!({
                "hidden_act": null,
                "hidden_activation": "gelu_pytorch_tanh",
                "query_pre_attn_scalar": v.head_dim,
                "sliding_window": 16,
                "attn_logit_softcapping": attention,
                "final_logit_softcapping": logits,
            }),
        };
        for (key, value) in gemma.as_object().unwrap() {
            config[key] = value.clone();
        }
        write_json(&path, &config);
    }
    let tokens = vocabulary();
    let vocab: serde_json::Map<String, serde_json::Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), serde_json::json!(i)))
        .collect();
    let byte_level = serde_json::json!({
        "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true
    });
    write_json(
        &dir.join("tokenizer.json"),
        &serde_json::json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": [{
                "id": 47, "content": "<|end|>", "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true
            }],
            "normalizer": null,
            "pre_tokenizer": byte_level,
            "post_processor": null,
            "decoder": byte_level,
            "model": {
                "type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": null, "end_of_word_suffix": null,
                "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": []
            }
        }),
    );
    write_json(
        &dir.join("tokenizer_config.json"),
        &serde_json::json!({
            "eos_token": "<|end|>",
            "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}"
        }),
    );
    let list = tensor_list(v);
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = list
        .iter()
        .enumerate()
        .map(|(n, (name, shape, kind))| {
            let count = shape.iter().product();
            let bytes = bytes_of(&values(n, count, *kind), dtype);
            (name.clone(), shape.clone(), bytes)
        })
        .collect();
    let per_shard = data.len().div_ceil(shards);
    let mut weight_map = serde_json::Map::new();
    for (s, chunk) in data.chunks(per_shard).enumerate() {
        let file = match shards {
            1 => "model.safetensors".to_string(),
            _ => format!("model-{:05}-of-{shards:05}.safetensors", s + 1),
        };
        let views: Vec<(String, TensorView)> = chunk
            .iter()
            .map(|(name, shape, bytes)| {
                weight_map.insert(name.clone(), serde_json::json!(file));
                (
                    name.clone(),
                    TensorView::new(dtype, shape.clone(), bytes).unwrap(),
                )
            })
            .collect();
        safetensors::serialize_to_file(views, None, &dir.join(&file)).unwrap();
    }
    if shards > 1 {
        write_json(
            &dir.join("model.safetensors.index.json"),
            &serde_json::json!({ "metadata": {}, "weight_map": weight_map }),
        );
    }
}

/// llama.cpp's converter permutation of a Q/K projection (`[heads * d, cols]` rows, or a bias
/// with `cols` = 1): `reshape(heads, 2, d / 2, cols).swapaxes(1, 2)`.
fn permute_for_gguf(values: &[f32], heads: usize, cols: usize) -> Vec<f32> {
    let d = values.len() / cols / heads;
    let mut out = vec![0f32; values.len()];
    for h in 0..heads {
        for s in 0..2 {
            for j in 0..d / 2 {
                let from = (h * d + s * (d / 2) + j) * cols;
                let to = (h * d + 2 * j + s) * cols;
                out[to..to + cols].copy_from_slice(&values[from..from + cols]);
            }
        }
    }
    out
}

/// Q8_0 blocks of a row-major matrix whose rows are whole blocks (GGML's block format, written
/// out here: an f16 scale `max |x| / 127`, then 32 values `round(x / scale)` as i8).
fn quantize_q8_0(values: &[f32]) -> Vec<u8> {
    values
        .chunks_exact(32)
        .flat_map(|block| {
            let amax = block.iter().fold(0f32, |m, x| m.max(x.abs()));
            let d = amax / 127.0;
            let inv = if d == 0.0 { 0.0 } else { 1.0 / d };
            let mut out = half::f16::from_f32(d).to_le_bytes().to_vec();
            out.extend(block.iter().map(|x| (x * inv).round() as i8 as u8));
            out
        })
        .collect()
}

/// The GGUF file holding the same model as [`write_checkpoint`], as llama.cpp's converter writes
/// it for `arch`: `llama` with the Q / K rows permuted for adjacent-pair rotary embedding, `qwen2`
/// in the checkpoint's row order with Qwen2's pre-tokenizer (qwen3 alike), `phi3` also with Q, K
/// and V fused into `attn_qkv` and gate and up into `ffn_up`. With `q8_qkv`, the Q, K and V
/// matrices are Q8_0 (the CPU packs them into row panels).
fn write_gguf(path: &Path, v: &Variant, dtype: Dtype, arch: &str, q8_qkv: bool) {
    std::fs::write(path, gguf_writer(v, dtype, arch, q8_qkv).to_bytes()).unwrap();
}

/// The writer of [`write_gguf`]'s file, before it is written.
fn gguf_writer(v: &Variant, dtype: Dtype, arch: &str, q8_qkv: bool) -> GgufWriter {
    let u32v = |x: usize| MetadataValue::U32(x as u32);
    let key = |k: &str| format!("{arch}.{k}");
    let tokens = vocabulary();
    let token_refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut types = vec![MetadataValue::I32(1); tokens.len()];
    types[47] = MetadataValue::I32(3);
    let mut w = GgufWriter::new(3)
        .kv("general.architecture", string(arch))
        .kv(&key("block_count"), u32v(v.layers))
        .kv(&key("embedding_length"), u32v(v.hidden))
        .kv(&key("feed_forward_length"), u32v(v.inter))
        .kv(&key("attention.head_count"), u32v(v.heads))
        .kv(&key("attention.head_count_kv"), u32v(v.kv_heads))
        .kv(&key("rope.freq_base"), MetadataValue::F32(v.theta))
        .kv(
            &key("attention.layer_norm_rms_epsilon"),
            MetadataValue::F32(v.eps),
        )
        .kv(&key("context_length"), u32v(64))
        .kv(&key("attention.key_length"), u32v(v.head_dim))
        .kv(&key("attention.value_length"), u32v(v.head_dim))
        .kv("tokenizer.ggml.model", string("gpt2"))
        .kv("tokenizer.ggml.tokens", strings(&token_refs))
        .kv("tokenizer.ggml.token_type", MetadataValue::Array(types))
        .kv("tokenizer.ggml.merges", MetadataValue::Array(vec![]))
        .kv("tokenizer.ggml.eos_token_id", u32v(47));
    if arch != "llama" {
        w = w.kv("tokenizer.ggml.pre", string("qwen2"));
    }
    if v.gemma {
        w = w.kv(&key("attention.sliding_window"), u32v(16));
    }
    match v.softcaps {
        Some([attention, logits]) if v.gemma => {
            w = w
                .kv(
                    &key("attn_logit_softcapping"),
                    MetadataValue::F32(attention),
                )
                .kv(&key("final_logit_softcapping"), MetadataValue::F32(logits));
        }
        None if v.gemma => {
            w = w
                .kv(&key("rope.scaling.type"), string("linear"))
                .kv(&key("rope.scaling.factor"), MetadataValue::F32(8.0));
        }
        _ => {}
    }
    if let Some(divisors) = llama3_rope_freqs(v) {
        let bytes = bytes_of(&divisors, Dtype::F32);
        w = w.tensor(
            "rope_freqs.weight",
            &[divisors.len() as u64],
            GgmlType::F32,
            bytes,
        );
    }
    let ggml_type = match dtype {
        Dtype::BF16 => GgmlType::BF16,
        _ => GgmlType::F32,
    };
    // phi3 fuses Q, K, V into attn_qkv and gate, up into ffn_up (rows stacked in that order).
    let mut fusing: Vec<(u64, u64, GgmlType, Vec<u8>)> = Vec::new();
    for (n, (name, shape, kind)) in tensor_list(v).iter().enumerate() {
        let mut vals = values(n, shape.iter().product(), *kind);
        let gguf_name = gguf_tensor_name(name, v.gemma);
        // Gemma's converter stores RMSNorm scales as 1 + w.
        if v.gemma && gguf_name.ends_with("norm.weight") {
            vals.iter_mut().for_each(|w| *w += 1.0);
        }
        let cols = if shape.len() == 2 { shape[1] } else { 1 };
        let part = gguf_name.split('.').nth(2).unwrap_or("");
        let (q, k) = (part == "attn_q", part == "attn_k");
        if arch == "llama" && q {
            vals = permute_for_gguf(&vals, v.heads, cols);
        } else if arch == "llama" && k {
            vals = permute_for_gguf(&vals, v.kv_heads, cols);
        }
        let dims: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
        // Norms and biases are f32 in GGUF files; matrices keep the checkpoint's type.
        let qkv = q || k || part == "attn_v";
        let (ty, bytes) = match shape.len() {
            2 if q8_qkv && qkv => (GgmlType::Q8_0, quantize_q8_0(&vals)),
            2 => (ggml_type, bytes_of(&vals, dtype)),
            _ => (GgmlType::F32, bytes_of(&vals, Dtype::F32)),
        };
        let fused_into = match part {
            "attn_q" | "attn_k" | "attn_v" => Some(("attn_qkv", "attn_v")),
            "ffn_gate" | "ffn_up" => Some(("ffn_up", "ffn_up")),
            _ => None,
        };
        match fused_into {
            Some((fused, last)) if arch == "phi3" && shape.len() == 2 => {
                fusing.push((dims[0], dims[1], ty, bytes));
                if part == last {
                    let rows = fusing.iter().map(|f| f.1).sum::<u64>();
                    let bytes = fusing.iter().flat_map(|f| f.3.clone()).collect();
                    let layer = gguf_name.split('.').nth(1).unwrap();
                    let fused_name = format!("blk.{layer}.{fused}.weight");
                    w = w.tensor(&fused_name, &[dims[0], rows], ty, bytes);
                    fusing.clear();
                }
            }
            _ => w = w.tensor(&gguf_name, &dims, ty, bytes),
        }
    }
    w
}

/// The `rope_freqs.weight` of a Llama 3.1-scaled variant, as llama.cpp's converter computes it
/// (written out here from its published formula, in float64): per rotary pair, 1 for
/// wavelengths below `old / high`, `factor` above `old / low`, else `1 / ((1 - s) / factor + s)`,
/// `s = (old / wavelength - low) / (high - low)`.
fn llama3_rope_freqs(v: &Variant) -> Option<Vec<f32>> {
    let [factor, low, high, old] = v.rope_scaling?;
    let d = v.head_dim;
    let divisors = (0..d / 2).map(|i| {
        let freq = f64::from(v.theta).powf(-(2.0 * i as f64) / d as f64);
        let wavelen = 2.0 * std::f64::consts::PI / freq;
        if wavelen < old / high {
            1.0
        } else if wavelen > old / low {
            factor as f32
        } else {
            let s = (old / wavelen - low) / (high - low);
            (1.0 / ((1.0 - s) / factor + s)) as f32
        }
    });
    Some(divisors.collect())
}

/// GGUF's name of a checkpoint tensor (llama.cpp's naming, written out here independently).
fn gguf_tensor_name(hf: &str, gemma: bool) -> String {
    let fixed = [
        ("model.embed_tokens.weight", "token_embd.weight"),
        ("model.norm.weight", "output_norm.weight"),
        ("lm_head.weight", "output.weight"),
    ];
    if let Some((_, g)) = fixed.iter().find(|(h, _)| *h == hf) {
        return g.to_string();
    }
    let rest = hf.strip_prefix("model.layers.").unwrap();
    let (layer, rest) = rest.split_once('.').unwrap();
    let renames = [
        ("input_layernorm", "attn_norm"),
        ("self_attn.q_proj", "attn_q"),
        ("self_attn.k_proj", "attn_k"),
        ("self_attn.v_proj", "attn_v"),
        ("self_attn.o_proj", "attn_output"),
        ("self_attn.qkv_proj", "attn_qkv"),
        ("mlp.gate_up_proj", "ffn_up"),
        ("self_attn.q_norm", "attn_q_norm"),
        ("self_attn.k_norm", "attn_k_norm"),
        (
            "post_attention_layernorm",
            if gemma {
                "post_attention_norm"
            } else {
                "ffn_norm"
            },
        ),
        ("pre_feedforward_layernorm", "ffn_norm"),
        ("post_feedforward_layernorm", "post_ffw_norm"),
        ("mlp.gate_proj", "ffn_gate"),
        ("mlp.up_proj", "ffn_up"),
        ("mlp.down_proj", "ffn_down"),
    ];
    let (module, kind) = rest.rsplit_once('.').unwrap();
    let part = renames.iter().find(|(h, _)| *h == module).unwrap().1;
    format!("blk.{layer}.{part}.{kind}")
}

#[derive(serde::Deserialize)]
struct Reference {
    tokens: Vec<u32>,
    variants: HashMap<String, Vec<Vec<f64>>>,
}

fn reference() -> Reference {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny_llama_logits.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// (variant, weight dtype, shards) of the checks.
const CASES: [(Variant, Dtype, usize); 7] = [
    (LLAMA, Dtype::F32, 2),
    (QWEN2, Dtype::BF16, 1),
    (LLAMA3, Dtype::BF16, 1),
    (PHI3, Dtype::F32, 1),
    (GEMMA3, Dtype::BF16, 1),
    (GEMMA2, Dtype::F32, 1),
    (QWEN3, Dtype::BF16, 1),
];

#[test]
fn checkpoint_and_gguf_give_identical_logits_matching_the_float64_reference() {
    let reference = reference();
    let tmp = tempfile::tempdir().unwrap();
    for (v, dtype, shards) in CASES {
        let dir = tmp.path().join(v.name);
        write_checkpoint(&dir, &v, dtype, shards);
        let gguf = tmp.path().join(format!("{}.gguf", v.name));
        // GGUF calls Gemma 3's text decoder `gemma3`.
        let arch = match (v.gemma, v.softcaps) {
            (true, None) => "gemma3",
            _ => v.model_type,
        };
        write_gguf(&gguf, &v, dtype, arch, false);
        let hf = Llm::load(&dir, OperationSet::Reproducible).unwrap();
        let gg = Llm::load(&gguf, OperationSet::Reproducible).unwrap();
        assert_eq!(hf.config.vocab_size, v.vocab);
        let tokens = &reference.tokens;
        let a = hf.forward(tokens, &mut hf.new_cache()).unwrap();
        let b = gg.forward(tokens, &mut gg.new_cache()).unwrap();
        let differing = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| x.to_bits() != y.to_bits())
            .count();
        assert_eq!(
            differing, 0,
            "{}: {differing} logits differ from GGUF's",
            v.name
        );

        let expected: Vec<f64> = reference.variants[v.name].concat();
        assert_eq!(a.len(), expected.len());
        let scale = expected.iter().fold(0f64, |m, x| m.max(x.abs()));
        let err = a
            .iter()
            .zip(&expected)
            .fold(0f64, |m, (&x, &y)| m.max((f64::from(x) - y).abs()));
        eprintln!(
            "{}: max |logit - float64| / max |float64| = {:.2e}",
            v.name,
            err / scale
        );
        assert!(
            err / scale <= 1e-5,
            "{}: relative error {}",
            v.name,
            err / scale
        );

        // The last row alone is the prefill's last row.
        let last = hf.forward_last(tokens, &mut hf.new_cache()).unwrap();
        assert!(
            last.iter()
                .zip(&a[(tokens.len() - 1) * v.vocab..])
                .all(|(x, y)| x.to_bits() == y.to_bits())
                && last.len() == v.vocab
        );
        // Token-by-token decode gives the prefill's bits.
        let mut cache = hf.new_cache();
        for (t, &token) in tokens.iter().enumerate() {
            let row = hf.forward(&[token], &mut cache).unwrap();
            assert!(
                row.iter()
                    .zip(&a[t * v.vocab..])
                    .all(|(x, y)| x.to_bits() == y.to_bits())
            );
        }
        batched_sequences_get_their_own_bits(&hf, tokens, &a, v.name);
        // The two tokenizers agree, and the checkpoint's special token and template are used.
        let text = "AB!<|end|>O";
        assert_eq!(
            hf.tokenizer.encode(text, true).unwrap(),
            [32, 33, 0, 47, 46]
        );
        assert_eq!(
            gg.tokenizer.encode(text, true).unwrap(),
            [32, 33, 0, 47, 46]
        );
        assert_eq!(hf.tokenizer.eos_id(), Some(47));
        assert!(hf.chat_template.is_some());
    }
}

/// Three sequences over `tokens` run in batches (`Llm::forward_last_batch`) of mixed prefills
/// and decode steps, each at its own length, give at every step the bits of `prefill` (the
/// logits of all of `tokens` in one pass) at that sequence's position.
fn batched_sequences_get_their_own_bits(llm: &Llm, tokens: &[u32], prefill: &[f32], name: &str) {
    let vocab = llm.vocab_size();
    let mut caches = [llm.new_cache(), llm.new_cache(), llm.new_cache()];
    // Per round, the new tokens (a range of `tokens`) of each sequence that takes part.
    let rounds: [&[(usize, std::ops::Range<usize>)]; 5] = [
        &[(0, 0..2), (1, 0..1)],
        &[(0, 2..3), (1, 1..5), (2, 0..7)],
        &[(1, 5..6), (0, 3..4)],
        &[(0, 4..5), (1, 6..7)],
        &[(0, 5..7)],
    ];
    for (r, round) in rounds.iter().enumerate() {
        let mut pending: Vec<Option<&mut samebits_llm::KvCache>> =
            caches.iter_mut().map(Some).collect();
        let mut batch: Vec<(&[u32], &mut samebits_llm::KvCache)> = round
            .iter()
            .map(|(s, range)| (&tokens[range.clone()], pending[*s].take().unwrap()))
            .collect();
        let logits = llm.forward_last_batch(&mut batch).unwrap();
        for ((s, range), got) in round.iter().zip(&logits) {
            let expected = &prefill[(range.end - 1) * vocab..range.end * vocab];
            assert!(
                got.iter()
                    .zip(expected)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "{name}: round {r}, sequence {s} (tokens {range:?}) differs from its prefill"
            );
        }
    }
}

/// GGUF files as llama.cpp writes them for other architectures give the bits of the same weights
/// written as a llama-layout GGUF (separate matrices, Q / K rows permuted): qwen2 (rows in the
/// half-split order, Q / K / V biases) and phi3 (half-split rows, Q / K / V fused into one matrix,
/// gate and up into another), on dense matrices and on Q8_0 ones packed into the CPU's row panels
/// (a whole fused matrix, or a slice of it).
#[test]
fn other_architectures_gguf_layouts_give_the_llama_layouts_bits() {
    let tmp = tempfile::tempdir().unwrap();
    let tokens = &reference().tokens;
    for (arch, v, dtype) in [("qwen2", QWEN2, Dtype::BF16), ("phi3", LLAMA, Dtype::F32)] {
        for q8_qkv in [false, true] {
            let logits = [arch, "llama"].map(|a| {
                let path = tmp.path().join(format!("{a}-{q8_qkv}.gguf"));
                write_gguf(&path, &v, dtype, a, q8_qkv);
                let model = Llm::load(&path, OperationSet::Reproducible).unwrap();
                assert_eq!(model.config.qk_rows_half_split, a != "llama");
                model.forward(tokens, &mut model.new_cache()).unwrap()
            });
            let differing = logits[0]
                .iter()
                .zip(&logits[1])
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            assert_eq!(differing, 0, "{arch}, Q8_0 Q / K / V: {q8_qkv}");
        }
    }
}

/// A GGUF tensor the llama layout does not read (a norm bias, a layer past the block count, a
/// layer number spelled otherwise) is refused with its name, never ignored; so is a
/// `rope_freqs.weight` that does not hold one divisor per rotary pair.
#[test]
fn tensors_outside_the_layout_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("m.gguf");
    for (extra, expected) in [
        ("blk.0.attn_norm.bias", "not part of"),
        ("output_norm.bias", "not part of"),
        ("blk.2.ffn_up.weight", "not part of"),
        ("blk.01.attn_q.weight", "not part of"),
        // LLAMA's heads of 8 features have 4 rotary pairs, not 32.
        ("rope_freqs.weight", "one per rotary pair"),
    ] {
        let writer = gguf_writer(&LLAMA, Dtype::F32, "llama", false).tensor(
            extra,
            &[32],
            GgmlType::F32,
            bytes_of(&[1.0; 32], Dtype::F32),
        );
        std::fs::write(&path, writer.to_bytes()).unwrap();
        let err = Llm::load(&path, OperationSet::Reproducible)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(extra) && err.contains(expected),
            "{extra}: {err}"
        );
    }
}

/// A GGUF head size (`attention.key_length`) that the Q projection's rows do not hold is
/// refused naming that tensor, before rotary tables or caches are sized from it.
#[test]
fn a_head_size_the_q_rows_do_not_hold_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("m.gguf");
    let mut bytes = gguf_writer(&LLAMA, Dtype::F32, "llama", false).to_bytes();
    // The u32 values after the keys and their 4-byte type.
    for key in [
        &b"llama.attention.key_length"[..],
        &b"llama.attention.value_length"[..],
    ] {
        let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len() + 4;
        bytes[at..at + 4].copy_from_slice(&(1u32 << 30).to_le_bytes());
    }
    std::fs::write(&path, bytes).unwrap();
    let err = Llm::load(&path, OperationSet::Reproducible)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("blk.0.attn_q.weight"), "{err}");
}

#[test]
fn unsupported_configurations_are_refused_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    write_checkpoint(&dir, &LLAMA, Dtype::F32, 1);
    let config_path = dir.join("config.json");
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    for (key, value, expected) in [
        (
            "rope_scaling",
            serde_json::json!({"type": "yarn", "factor": 2.0}),
            "rope_scaling",
        ),
        ("hidden_act", serde_json::json!("gelu"), "hidden_act"),
        ("model_type", serde_json::json!("gpt_neox"), "model_type"),
        (
            "num_key_value_heads",
            serde_json::json!(3),
            "num_key_value_heads",
        ),
        ("head_dim", serde_json::json!(7), "head_dim"),
        // A head size the Q projection does not hold (it would size the rotary tables).
        ("head_dim", serde_json::json!(1 << 30), "head_dim"),
        // Found by mutation (a GGUF vocab_size larger than the embedding panicked in
        // generation): the declared vocabulary must be the embedding's rows.
        ("vocab_size", serde_json::json!(147457), "token_embd.weight"),
    ] {
        let mut config = original.clone();
        config[key] = value;
        write_json(&config_path, &config);
        let err = Llm::load(&dir, OperationSet::Reproducible)
            .err()
            .expect(key);
        assert!(err.to_string().contains(expected), "{key}: {err}");
    }
    write_json(&config_path, &original);
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let err = Llm::load(&dir, OperationSet::Reproducible).err().unwrap();
    assert!(err.to_string().contains("model.safetensors"), "{err}");
}

/// A `weight_map` naming a file outside the folder (found by mutation: it was opened and loaded,
/// and the receipt's folder digest did not cover it) is refused, naming the entry.
#[test]
fn weight_map_entries_cannot_leave_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    write_checkpoint(&dir, &LLAMA, Dtype::F32, 2);
    let index_path = dir.join("model.safetensors.index.json");
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&index_path).unwrap()).unwrap();
    // A copy of a real shard outside the folder, and a link to it inside.
    let first = "model-00001-of-00002.safetensors";
    std::fs::copy(dir.join(first), tmp.path().join("outside.safetensors")).unwrap();
    std::os::unix::fs::symlink(
        tmp.path().join("outside.safetensors"),
        dir.join("link.safetensors"),
    )
    .unwrap();
    let outside = tmp.path().join("outside.safetensors");
    for target in [
        outside.to_str().unwrap(),
        "../outside.safetensors",
        "sub/../../outside.safetensors",
        "link.safetensors",
    ] {
        let mut altered = index.clone();
        for v in altered["weight_map"].as_object_mut().unwrap().values_mut() {
            if v.as_str() == Some(first) {
                *v = serde_json::json!(target);
            }
        }
        write_json(&index_path, &altered);
        let err = Llm::load(&dir, OperationSet::Reproducible)
            .err()
            .expect(target);
        let err = err.to_string();
        assert!(
            err.contains("weight_map") && err.contains("outside"),
            "{target}: {err}"
        );
    }
}

/// A sentence-transformers folder's Pooling configuration (`1_Pooling/config.json`, in a
/// subfolder) is read by the embedder, so the folder digest receipts record covers it: changing
/// it changes the digest (issue #21). A folder without one keeps the digest of its top-level
/// files alone.
#[test]
fn the_folder_digest_covers_the_pooling_configuration() {
    use samebits_llm::checkpoint::model_sha256;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    write_json(
        &dir.join("config.json"),
        &serde_json::json!({"model_type": "bert"}),
    );
    let without_modules = model_sha256(&dir).unwrap();
    write_json(
        &dir.join("modules.json"),
        &serde_json::json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
        ]),
    );
    let pooling = dir.join("1_Pooling/config.json");
    write_json(
        &pooling,
        &serde_json::json!({"pooling_mode_mean_tokens": true}),
    );
    let mean = model_sha256(&dir).unwrap();
    write_json(
        &pooling,
        &serde_json::json!({"pooling_mode_cls_token": true}),
    );
    let cls = model_sha256(&dir).unwrap();
    assert_ne!(mean, cls, "the Pooling config is outside the digest");
    assert_ne!(without_modules, mean);
    // The digest is the sha256sum-style listing of every file it covers.
    let sha = |p: &Path| samebits_runtime::hashing::sha256_bytes(&std::fs::read(p).unwrap());
    let listing = format!(
        "{}  1_Pooling/config.json\n{}  config.json\n{}  modules.json\n",
        sha(&pooling),
        sha(&dir.join("config.json")),
        sha(&dir.join("modules.json"))
    );
    assert_eq!(
        cls,
        samebits_runtime::hashing::sha256_bytes(listing.as_bytes())
    );
}
