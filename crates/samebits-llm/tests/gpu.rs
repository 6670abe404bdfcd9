//! The GPU against the CPU, end to end, on small random llama, qwen2, qwen3 and gemma3 models
//! (tests/support): the
//! logits of a prefill and of greedy decode steps have the same bits on `cuda:0` and on the
//! CPU, and on the GPU one prefill over the whole sequence gives each position the bits its
//! decode step gave (the device KV cache, attention and the GGUF products follow the contract's
//! orders whatever the number of tokens), in the reproducible set and in reproducible-int8
//! (the exact-integer products). Without a GPU the test prints SKIPPED and returns.

#[path = "support/batched_rounds.rs"]
mod batched_rounds;
#[path = "../../samebits-gguf/tests/common/mod.rs"]
mod gguf_common;
#[path = "support/random_llama.rs"]
mod random_llama;

use random_llama::{Family, LlamaShape, write_random_llama};
use samebits_gguf::GgmlType;
use samebits_llm::Llm;
use samebits_llm::sampling::argmax;
use samebits_ops::OperationSet;
use samebits_runtime::Device;

/// Prefill of `prompt`, then `steps` greedy decode steps: the token sequence and every
/// step's logits rows (the prefill's rows first).
fn greedy(llm: &Llm, prompt: &[u32], steps: usize) -> (Vec<u32>, Vec<Vec<f32>>) {
    let vocab = llm.vocab_size();
    let mut cache = llm.new_cache();
    let logits = llm.forward(prompt, &mut cache).unwrap();
    let mut rows: Vec<Vec<f32>> = logits.chunks(vocab).map(<[f32]>::to_vec).collect();
    let mut tokens = prompt.to_vec();
    for _ in 0..steps {
        let next = argmax(rows.last().unwrap());
        tokens.push(next);
        rows.push(llm.forward(&[next], &mut cache).unwrap());
    }
    (tokens, rows)
}

/// The model at `path` in `operation_set` on `cuda:0`, or `None` after a SKIPPED line naming `test` when there is
/// no CUDA device.
fn load_on_gpu(path: &std::path::Path, operation_set: OperationSet, test: &str) -> Option<Llm> {
    match Llm::load_on(path, operation_set, Device::Cuda(0)) {
        Ok(llm) => Some(llm),
        Err(why) => {
            let line = format!("SKIPPED (no CUDA device): {test} ({why})\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            None
        }
    }
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn gpu_logits_equal_the_cpu_and_gpu_prefill_equals_gpu_decode() {
    let dir = tempfile::tempdir().unwrap();
    let shapes = [
        LlamaShape {
            family: Family::Llama,
            layers: 2,
            dim: 128,
            heads: 4,
            head_dim: 32,
            kv_heads: 2,
            ffn: 256,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Q4_1,
        },
        LlamaShape {
            family: Family::Llama,
            layers: 3,
            dim: 192,
            heads: 6,
            head_dim: 32,
            kv_heads: 2,
            ffn: 320,
            vocab: 130,
            context: 128,
            matrices: GgmlType::Q8_0,
        },
        // Qwen2: Q / K / V biases, rows in the half-split order.
        LlamaShape {
            family: Family::Qwen2,
            layers: 2,
            dim: 128,
            heads: 4,
            head_dim: 32,
            kv_heads: 1,
            ffn: 256,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Q8_0,
        },
        // Qwen3: per-head Q / K norms, heads of 64 features in a width of 128; an FFN of 14336
        // (Llama-3.1-8B's), whose down product's rows need more than 48 KiB of shared memory
        // in the decode kernel.
        LlamaShape {
            family: Family::Qwen3,
            layers: 2,
            dim: 128,
            heads: 4,
            head_dim: 64,
            kv_heads: 2,
            ffn: 14336,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Q4_0,
        },
        // K-quant matrices (256-element super-blocks, four 64-term tiles each): Q4_K, then Q6_K.
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
            matrices: GgmlType::Q4K,
        },
        LlamaShape {
            family: Family::Llama,
            layers: 1,
            dim: 256,
            heads: 2,
            head_dim: 128,
            kv_heads: 1,
            ffn: 768,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Q6K,
        },
        // The 2- and 3-bit k-quants.
        LlamaShape {
            family: Family::Llama,
            layers: 1,
            dim: 256,
            heads: 2,
            head_dim: 128,
            kv_heads: 1,
            ffn: 512,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Q2K,
        },
        LlamaShape {
            family: Family::Llama,
            layers: 1,
            dim: 256,
            heads: 2,
            head_dim: 128,
            kv_heads: 1,
            ffn: 512,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Q3K,
        },
        // The non-linear IQ4 codes: IQ4_NL (blocks of 32), IQ4_XS (super-blocks of 256).
        LlamaShape {
            family: Family::Llama,
            layers: 1,
            dim: 128,
            heads: 2,
            head_dim: 64,
            kv_heads: 1,
            ffn: 256,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Iq4Nl,
        },
        LlamaShape {
            family: Family::Llama,
            layers: 1,
            dim: 256,
            heads: 2,
            head_dim: 128,
            kv_heads: 1,
            ffn: 512,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Iq4Xs,
        },
        // The 5-bit legacy codes (Q5_0, Q5_1) and the plain bf16 weights.
        LlamaShape {
            family: Family::Llama,
            layers: 1,
            dim: 128,
            heads: 2,
            head_dim: 64,
            kv_heads: 1,
            ffn: 256,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Q5_0,
        },
        LlamaShape {
            family: Family::Qwen2,
            layers: 1,
            dim: 128,
            heads: 2,
            head_dim: 64,
            kv_heads: 1,
            ffn: 320,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Q5_1,
        },
        LlamaShape {
            family: Family::Llama,
            layers: 1,
            dim: 128,
            heads: 2,
            head_dim: 64,
            kv_heads: 1,
            ffn: 256,
            vocab: 96,
            context: 128,
            matrices: GgmlType::BF16,
        },
        // Gemma 3: five local layers and a global one, sandwich norms, GELU gate.
        LlamaShape {
            family: Family::Gemma3,
            layers: 6,
            dim: 128,
            heads: 2,
            head_dim: 64,
            kv_heads: 1,
            ffn: 256,
            vocab: 96,
            context: 128,
            matrices: GgmlType::Q8_0,
        },
    ];
    for (n, shape) in shapes.iter().enumerate() {
        let path = dir.path().join(format!("random_{n}.gguf"));
        write_random_llama(&path, shape, 7 + n as u64);
        let test = "gpu::gpu_logits_equal_the_cpu_and_gpu_prefill_equals_gpu_decode";
        if !gpu_equals_cpu(&path, shape, OperationSet::Reproducible, test) {
            return;
        }
    }
}

/// Greedy runs of the model at `path` in `operation_set` on `cuda:0` and on the CPU: a prompt
/// of few rows (fused matrix-vector products) and one of many (the GEMM over dequantized
/// weights), decode steps past the first 64-key tile; every logits row has the same bits on
/// both, and one GPU prefill over the whole sequence gives each position its decode step's
/// bits. `false` after a SKIPPED line naming `test` when there is no CUDA device.
fn gpu_equals_cpu(
    path: &std::path::Path,
    shape: &LlamaShape,
    operation_set: OperationSet,
    test: &str,
) -> bool {
    let Some(gpu) = load_on_gpu(path, operation_set, test) else {
        return false;
    };
    let cpu = Llm::load(path, operation_set).unwrap();
    for (prompt_len, steps) in [(5, 6), (20, 50)] {
        let prompt: Vec<u32> = (0..prompt_len)
            .map(|i| (i * 17 + 3) % shape.vocab as u32)
            .collect();
        let (cpu_tokens, cpu_rows) = greedy(&cpu, &prompt, steps);
        let (gpu_tokens, gpu_rows) = greedy(&gpu, &prompt, steps);
        assert_eq!(gpu_tokens, cpu_tokens, "{operation_set} {shape:?}");
        for (t, (g, c)) in gpu_rows.iter().zip(&cpu_rows).enumerate() {
            assert!(
                same_bits(g, c),
                "{operation_set} {shape:?}: logits row {t} differ between GPU and CPU"
            );
        }
        // One GPU prefill over the whole sequence (all but the last token).
        let all = &gpu_tokens[..gpu_tokens.len() - 1];
        let prefill = gpu.forward(all, &mut gpu.new_cache()).unwrap();
        for (t, row) in prefill.chunks(gpu.vocab_size()).enumerate() {
            assert!(
                same_bits(row, &gpu_rows[t]),
                "{operation_set} {shape:?}: GPU prefill row {t} differs from its decode step"
            );
        }
        // The last row alone (only it leaves the device) is the prefill's last row.
        let last = gpu.forward_last(all, &mut gpu.new_cache()).unwrap();
        assert!(
            same_bits(&last, &gpu_rows[all.len() - 1]),
            "{operation_set} {shape:?}: forward_last differs from the prefill's last row"
        );
    }
    true
}

/// `reproducible-int8` on the GPU (`kernels/gguf_int8.cu`) gives the CPU's bits: its three
/// weight types (Q4_1 llama, Q8_0 qwen2, Q4_0 qwen3 with an FFN of 14,336, whose rows need the
/// opt-in shared memory), the fused decode steps (norm, Q / K / V with rotaries, the SiLU gate,
/// the attention's output product as separate steps) and many-row prefills; a Q4_K model keeps
/// the f32 products in this set on both.
#[test]
fn gpu_int8_products_equal_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let llama = |family, matrices, ffn| LlamaShape {
        family,
        layers: 2,
        dim: 128,
        heads: 4,
        head_dim: 32,
        kv_heads: 2,
        ffn,
        vocab: 96,
        context: 128,
        matrices,
    };
    let shapes = [
        llama(Family::Llama, GgmlType::Q4_1, 256),
        llama(Family::Qwen2, GgmlType::Q8_0, 320),
        LlamaShape {
            head_dim: 64,
            ..llama(Family::Qwen3, GgmlType::Q4_0, 14336)
        },
        LlamaShape {
            dim: 256,
            head_dim: 64,
            ..llama(Family::Llama, GgmlType::Q4K, 512)
        },
    ];
    for (n, shape) in shapes.iter().enumerate() {
        let path = dir.path().join(format!("random_{n}.gguf"));
        write_random_llama(&path, shape, 31 + n as u64);
        let test = "gpu::gpu_int8_products_equal_the_cpu";
        if !gpu_equals_cpu(&path, shape, OperationSet::ReproducibleInt8, test) {
            return;
        }
    }
}

/// A ragged batch on the GPU (`Llm::forward_last_batch`: RaggedAttention's launch per sequence
/// over device caches) gives every sequence the bits it gets alone on the CPU: four prompts of
/// 5, 1, 70 and 140 tokens join at rounds 0 to 3 (prefills beside decode steps; the first round
/// is a batch of one, the one-sequence plan, whose device caches the batched plan then extends),
/// the longest cache past 256 positions (decode attention split over blocks), and the last
/// rounds shrink back to one sequence; in the reproducible set and in reproducible-int8.
#[test]
fn gpu_ragged_batches_give_each_sequence_its_lone_cpu_bits() {
    let dir = tempfile::tempdir().unwrap();
    let shapes = [
        LlamaShape {
            family: Family::Llama,
            layers: 2,
            dim: 128,
            heads: 4,
            head_dim: 32,
            kv_heads: 2,
            ffn: 256,
            vocab: 96,
            context: 512,
            matrices: GgmlType::Q4_1,
        },
        LlamaShape {
            family: Family::Qwen3,
            layers: 2,
            dim: 128,
            heads: 4,
            head_dim: 64,
            kv_heads: 1,
            ffn: 256,
            vocab: 96,
            context: 512,
            matrices: GgmlType::Q8_0,
        },
    ];
    let lengths = [5usize, 1, 70, 140];
    let sets = [OperationSet::Reproducible, OperationSet::ReproducibleInt8];
    for (n, (shape, set)) in shapes.iter().flat_map(|s| sets.map(|o| (s, o))).enumerate() {
        let path = dir.path().join(format!("ragged_{n}.gguf"));
        write_random_llama(&path, shape, 31 + n as u64 / 2);
        let Some(gpu) = load_on_gpu(
            &path,
            set,
            "gpu::gpu_ragged_batches_give_each_sequence_its_lone_cpu_bits",
        ) else {
            return;
        };
        let cpu = Llm::load(&path, set).unwrap();
        let prompts: Vec<Vec<u32>> = lengths
            .iter()
            .enumerate()
            .map(|(p, &len)| {
                (0..len as u32)
                    .map(|i| (i * 13 + 7 * p as u32 + 1) % shape.vocab as u32)
                    .collect()
            })
            .collect();
        let steps = 8;
        let alone: Vec<Vec<Vec<f32>>> = prompts
            .iter()
            .map(|prompt| batched_rounds::alone(&cpu, prompt, steps))
            .collect();
        let rows = batched_rounds::joining_rounds(&gpu, &prompts, steps);
        for (p, (got, want)) in rows.iter().zip(&alone).enumerate() {
            assert_eq!(got.len(), steps + 1, "{set} {shape:?}: prompt {p}");
            for (step, (g, w)) in got.iter().zip(want).enumerate() {
                assert!(
                    same_bits(g, w),
                    "{set} {shape:?}: prompt {p} step {step}: the GPU batch differs from the CPU \
                     alone"
                );
            }
        }
    }
}
