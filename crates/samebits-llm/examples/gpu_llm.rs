//! SmolLM2-shaped generation on a GPU against the CPU, with a random-weight model written on
//! the spot (tests/support/random_llama.rs: the real model's shapes and weight types, no
//! 98 MB download): bits (greedy logits on CPU and GPU, GPU prefill against GPU decode) and
//! speed (prefill ppN and decode tgN tokens/s on the GPU, reproducible and default operation
//! sets alternating, medians of several runs), as one markdown table at the end.
//!
//! `cargo run --release -p samebits-llm --example gpu_llm -- [--tiny | --shape llama3-8b]
//! [--matrices TYPE] [--write-only] [--quick] [--runs N] [--model PATH]
//! [--profile N S] [--requests R]`; `--tiny` uses a 2-layer
//! model (a quick check on machines without a GPU, where only the CPU half runs); `--shape
//! llama3-8b` writes Llama-3.1-8B's shapes instead (32 layers, width 4096, 32 / 8 heads of 128,
//! FFN 14336, vocabulary 128,256; Q4_0 matrices, about 4.4 GB) and `--write-only` stops after
//! writing the file, for timing it with `samebits generate --device cuda` (`--shape
//! L,D,H,HD,KV,FFN,V` names any llama shape with Q4_0 matrices); `--quick` times tg128 only; `--profile N S`
//! runs only GPU prefills of N tokens (a first one to warm up, a timed one) and S decode steps
//! after the second (a short, fixed kernel sequence for a profiler such as `ncu`);
//! `--requests R` times R back-to-back "requests" as a server's lone client makes them (a new
//! cache, a prefill of 8 tokens, 64 decode steps, the cache dropped), printing the medians of
//! the prefill, of the first three decode steps and of the later ones;
//! `--matrices TYPE` picks the layer matrices' ggml type by name (q4_1, q5_0, q4_k, bf16, ..: any
//! type with a dequantization; K-quants and IQ4_XS need widths that are multiples of 256).

#[path = "../../samebits-gguf/tests/common/mod.rs"]
mod gguf_common;
#[path = "../tests/support/random_llama.rs"]
mod random_llama;

use random_llama::{Family, LlamaShape, SMOLLM2, write_random_llama};
use samebits_gguf::GgmlType;
use samebits_llm::sampling::argmax;
use samebits_llm::{KvCache, Llm};
use samebits_ops::OperationSet;
use samebits_runtime::Device;
use std::path::PathBuf;
use std::time::Instant;

/// `--shape L,D,H,HD,KV,FFN,V`: layers, width, heads, head size, KV heads, FFN width and
/// vocabulary of a llama with Q4_0 matrices.
fn custom_shape(spec: &str) -> Option<LlamaShape> {
    let v: Vec<usize> = spec
        .split(',')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let [layers, dim, heads, head_dim, kv_heads, ffn, vocab] = v[..] else {
        return None;
    };
    Some(LlamaShape {
        family: Family::Llama,
        layers,
        dim,
        heads,
        head_dim,
        kv_heads,
        ffn,
        vocab,
        context: 8192,
        matrices: GgmlType::Q4_0,
    })
}

/// Llama-3.1-8B's shapes (its real weight types aside).
const LLAMA3_8B: LlamaShape = LlamaShape {
    family: Family::Llama,
    layers: 32,
    dim: 4096,
    heads: 32,
    head_dim: 128,
    kv_heads: 8,
    ffn: 14336,
    vocab: 128_256,
    context: 8192,
    matrices: GgmlType::Q4_0,
};

const TINY: LlamaShape = LlamaShape {
    family: Family::Llama,
    layers: 2,
    dim: 128,
    heads: 4,
    head_dim: 32,
    kv_heads: 2,
    ffn: 256,
    vocab: 512,
    context: 1024,
    matrices: GgmlType::Q4_1,
};

/// Prefill of `prompt` and `steps` greedy decode steps: tokens and every logits row.
fn greedy(llm: &Llm, prompt: &[u32], steps: usize) -> (Vec<u32>, Vec<Vec<f32>>) {
    let vocab = llm.vocab_size();
    let mut cache = llm.new_cache();
    let logits = llm.forward(prompt, &mut cache).expect("prefill");
    let mut rows: Vec<Vec<f32>> = logits.chunks(vocab).map(<[f32]>::to_vec).collect();
    let mut tokens = prompt.to_vec();
    for _ in 0..steps {
        let next = argmax(rows.last().expect("a row"));
        tokens.push(next);
        rows.push(llm.forward(&[next], &mut cache).expect("decode"));
    }
    (tokens, rows)
}

/// Rows whose bits differ.
fn differing_rows(a: &[Vec<f32>], b: &[Vec<f32>]) -> usize {
    a.iter()
        .zip(b)
        .filter(|(x, y)| {
            x.len() != y.len()
                || x.iter()
                    .zip(y.iter())
                    .any(|(p, q)| p.to_bits() != q.to_bits())
        })
        .count()
        + a.len().abs_diff(b.len())
}

fn tokens(n: usize, vocab: usize) -> Vec<u32> {
    let mut state = 0x5eed_u64;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) % vocab as u64) as u32
        })
        .collect()
}

/// Seconds of one prefill of `ids` into an empty cache, returning every logits row or, with
/// `last`, the last one (what generation needs, as llama-bench's pp).
fn prefill_seconds(llm: &Llm, ids: &[u32], last: bool) -> f64 {
    let mut cache = llm.new_cache();
    let start = Instant::now();
    match last {
        true => llm.forward_last(ids, &mut cache),
        false => llm.forward(ids, &mut cache),
    }
    .expect("prefill");
    start.elapsed().as_secs_f64()
}

/// Seconds of `ids.len()` decode steps after a 1-token prompt.
fn decode_seconds(llm: &Llm, ids: &[u32]) -> f64 {
    let mut cache: KvCache = llm.new_cache();
    llm.forward(&ids[..1], &mut cache).expect("first token");
    let start = Instant::now();
    for &t in &ids[1..] {
        llm.forward(&[t], &mut cache).expect("decode");
    }
    start.elapsed().as_secs_f64()
}

/// `--requests R` (module docs): per-request costs on the GPU, in milliseconds.
fn requests(path: &std::path::Path, shape: &LlamaShape, n: usize) {
    let gpu = Llm::load_on(path, OperationSet::Reproducible, Device::Cuda(0)).expect("GPU");
    let ids = tokens(8 + 64, shape.vocab);
    let ms = |start: Instant| start.elapsed().as_secs_f64() * 1e3;
    let (mut prefill, mut later) = (Vec::new(), Vec::new());
    let mut first: [Vec<f64>; 3] = Default::default();
    let whole = Instant::now();
    for _ in 0..n {
        let mut cache = gpu.new_cache();
        let start = Instant::now();
        gpu.forward_last(&ids[..8], &mut cache).expect("prefill");
        prefill.push(ms(start));
        for (k, &t) in ids[8..].iter().enumerate() {
            let start = Instant::now();
            gpu.forward_last(&[t], &mut cache).expect("decode");
            match first.get_mut(k) {
                Some(times) => times.push(ms(start)),
                None => later.push(ms(start)),
            }
        }
    }
    let per_request = ms(whole) / n as f64;
    let [a, b, c] = first.map(median);
    println!(
        "{n} requests of 8 + 64 tokens: {per_request:.2} ms each; prefill {:.2} ms, decode steps \
         1-3 {a:.2} / {b:.2} / {c:.2} ms, later steps {:.3} ms (medians)",
        median(prefill),
        median(later)
    );
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tiny = args.iter().any(|a| a == "--tiny");
    let quick = args.iter().any(|a| a == "--quick");
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(5);
    let named = args
        .iter()
        .position(|a| a == "--shape")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let mut shape = match (tiny, named) {
        (true, _) => TINY,
        (false, Some("llama3-8b")) => LLAMA3_8B,
        (false, Some(custom)) => custom_shape(custom)
            .unwrap_or_else(|| panic!("--shape {custom}: llama3-8b or L,D,H,HD,KV,FFN,V")),
        (false, None) => SMOLLM2,
    };
    if let Some(i) = args.iter().position(|a| a == "--matrices") {
        let name = args
            .get(i + 1)
            .map(|n| n.to_uppercase())
            .unwrap_or_default();
        let types = || GgmlType::all().filter(|t| t.can_dequantize());
        shape.matrices = types().find(|t| t.name() == name).unwrap_or_else(|| {
            let names: Vec<String> = types().map(|t| t.name().to_lowercase()).collect();
            panic!("--matrices {name:?}: one of {}", names.join(", "))
        });
    }
    let path = args
        .iter()
        .position(|a| a == "--model")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("samebits_random_llama.gguf"));
    let start = Instant::now();
    write_random_llama(&path, &shape, 42);
    println!(
        "random model {shape:?} written to {} in {:.1} s",
        path.display(),
        start.elapsed().as_secs_f64()
    );
    if args.iter().any(|a| a == "--write-only") {
        return;
    }

    if let Some(i) = args.iter().position(|a| a == "--profile") {
        let number = |k: usize| -> usize {
            args.get(i + k)
                .and_then(|v| v.parse().ok())
                .expect("--profile N S")
        };
        let (n, steps) = (number(1), number(2));
        let gpu = Llm::load_on(&path, OperationSet::Reproducible, Device::Cuda(0)).expect("GPU");
        let ids = tokens(n + steps, shape.vocab);
        // A first prefill makes the dequantized weight copies the prefill GEMMs keep.
        gpu.forward(&ids[..n], &mut gpu.new_cache())
            .expect("prefill");
        let mut cache = gpu.new_cache();
        let start = Instant::now();
        gpu.forward(&ids[..n], &mut cache).expect("prefill");
        let prefill = start.elapsed().as_secs_f64();
        let start = Instant::now();
        for &t in &ids[n..] {
            gpu.forward(&[t], &mut cache).expect("decode");
        }
        let decode = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let _tables = samebits_llm::model::rotary_tables(0..n, 64, 1e5, None);
        println!(
            "profile run: prefill of {n} tokens {:.2} ms (its rotary tables on the host {:.2} \
             ms), {steps} decode steps {:.2} ms",
            prefill * 1e3,
            start.elapsed().as_secs_f64() * 1e3,
            decode * 1e3
        );
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--requests") {
        let n: usize = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .expect("--requests R");
        requests(&path, &shape, n);
        return;
    }
    let cpu = Llm::load(&path, OperationSet::Reproducible).expect("CPU model");
    let prompt = tokens(8, shape.vocab);
    let steps = 16;
    let (cpu_tokens, cpu_rows) = greedy(&cpu, &prompt, steps);
    println!("CPU greedy tokens {cpu_tokens:?}");
    let mut table = vec![];
    let gpu = match Llm::load_on(&path, OperationSet::Reproducible, Device::Cuda(0)) {
        Ok(gpu) => gpu,
        Err(why) => {
            println!("SKIPPED the GPU half: {why}");
            return;
        }
    };
    let default = Llm::load_on(&path, OperationSet::Default, Device::Cuda(0)).expect("GPU model");
    println!("GPU: {}", gpu.device_description());
    let (gpu_tokens, gpu_rows) = greedy(&gpu, &prompt, steps);
    println!("GPU greedy tokens {gpu_tokens:?}");
    let cpu_vs_gpu = differing_rows(&cpu_rows, &gpu_rows);
    // Row t holds the logits after token t: a prefill over every token gives all the rows.
    let all = &gpu_tokens[..];
    let prefill = gpu.forward(all, &mut gpu.new_cache()).expect("GPU prefill");
    let prefill_rows: Vec<Vec<f32>> = prefill
        .chunks(gpu.vocab_size())
        .map(<[f32]>::to_vec)
        .collect();
    let prefill_vs_decode = differing_rows(&prefill_rows, &gpu_rows);
    let cpu_prefill = cpu.forward(all, &mut cpu.new_cache()).expect("CPU prefill");
    let cpu_prefill_rows: Vec<Vec<f32>> = cpu_prefill
        .chunks(cpu.vocab_size())
        .map(<[f32]>::to_vec)
        .collect();
    let gpu_vs_cpu_prefill = differing_rows(&prefill_rows, &cpu_prefill_rows);
    let last_row = gpu
        .forward_last(all, &mut gpu.new_cache())
        .expect("GPU prefill");
    let last_vs_all = differing_rows(&[last_row], &prefill_rows[prefill_rows.len() - 1..]);
    table.push((
        "greedy logits rows (8-token prompt + 16 steps), GPU vs CPU".to_string(),
        format!(
            "{cpu_vs_gpu} of {} rows differ; tokens {}",
            gpu_rows.len(),
            if gpu_tokens == cpu_tokens {
                "equal"
            } else {
                "DIFFER"
            }
        ),
    ));
    table.push((
        "GPU one-pass prefill vs GPU decode steps".to_string(),
        format!("{prefill_vs_decode} of {} rows differ", prefill_rows.len()),
    ));
    table.push((
        "GPU prefill vs CPU prefill (24 tokens, the GEMM path)".to_string(),
        format!("{gpu_vs_cpu_prefill} of {} rows differ", prefill_rows.len()),
    ));
    table.push((
        "GPU prefill's last row alone (forward_last) vs its every-row prefill".to_string(),
        format!("{last_vs_all} of 1 rows differ"),
    ));

    let ids = tokens(512, shape.vocab);
    for (name, n) in [("tg128", 129usize), ("tg512", 513)] {
        if n > shape.context || (quick && n > 129) {
            continue;
        }
        let (mut rep, mut def) = (vec![], vec![]);
        decode_seconds(&gpu, &ids[..n.min(ids.len())]);
        decode_seconds(&default, &ids[..n.min(ids.len())]);
        let ids = tokens(n, shape.vocab);
        for _ in 0..runs {
            rep.push((n - 1) as f64 / decode_seconds(&gpu, &ids));
            def.push((n - 1) as f64 / decode_seconds(&default, &ids));
        }
        let (r, d) = (median(rep.clone()), median(def.clone()));
        println!("{name} reproducible {rep:.1?} default {def:.1?}");
        table.push((
            format!("decode {name} tok/s, GPU reproducible vs default"),
            format!(
                "{r:.1} vs {d:.1} (reproducible overhead {:.0}%)",
                (d / r - 1.0) * 100.0
            ),
        ));
    }
    for n in [128usize, 512] {
        if quick {
            break;
        }
        let (mut rep, mut def, mut last) = (vec![], vec![], vec![]);
        prefill_seconds(&gpu, &ids[..n], false);
        prefill_seconds(&default, &ids[..n], false);
        for _ in 0..runs {
            rep.push(n as f64 / prefill_seconds(&gpu, &ids[..n], false));
            def.push(n as f64 / prefill_seconds(&default, &ids[..n], false));
            last.push(n as f64 / prefill_seconds(&gpu, &ids[..n], true));
        }
        let (r, d, l) = (
            median(rep.clone()),
            median(def.clone()),
            median(last.clone()),
        );
        println!("pp{n} reproducible {rep:.1?} default {def:.1?} last row {last:.1?}");
        table.push((
            format!("prefill pp{n} tok/s, GPU reproducible vs default (every logits row)"),
            format!("{r:.1} vs {d:.1}"),
        ));
        table.push((
            format!("prefill pp{n} tok/s, GPU reproducible, last logits row (as llama-bench)"),
            format!("{l:.1}"),
        ));
    }
    println!();
    println!("| check ({}) | result |", gpu.device_description());
    println!("|---|---|");
    for (k, v) in table {
        println!("| {k} | {v} |");
    }
}
