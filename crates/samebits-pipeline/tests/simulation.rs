//! The N-stage CPU simulation against one stage, bit for bit, on the real models (skipped with
//! a loud notice when scripts/setup.sh has not fetched them), micro-batch grouping invariance,
//! and the errors made before any work. The NCCL transport needs GPUs: its test skips loudly
//! here and runs on a GPU machine (scripts/pipeline_gpu_check.sh runs the multi-GPU cases).

use samebits_ir::{Tensor, Value};
use samebits_llm::{GenerateOptions, Llm, SamplingOptions, generate};
use samebits_ops::OperationSet;
use samebits_pipeline::drivers::{
    decode_fixed, generate_many, ordered_inputs, prefill, run_named, run_requests,
};
use samebits_pipeline::{Loaded, ModelSpec, Pipeline, PipelineOptions};
use samebits_runtime::{CompileOptions, Device, compile, tensor_file};
use samebits_testdata::{PP_OCR_MODELS, SMOLLM2_GGUF, cached, skip};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn det_model() -> Option<PathBuf> {
    cached(&format!("{PP_OCR_MODELS}/ch_PP-OCRv4_det_infer.onnx"))
}

fn smollm2() -> Option<PathBuf> {
    cached(SMOLLM2_GGUF)
}

fn cpu(n: usize) -> PipelineOptions {
    PipelineOptions {
        n_partitions: n,
        operation_set: OperationSet::Reproducible,
        device: Device::Cpu,
        rendezvous: None,
    }
}

fn start(spec: &ModelSpec, n: usize) -> (Pipeline, Loaded) {
    Pipeline::start(spec, &cpu(n)).unwrap_or_else(|e| panic!("{n} stages: {e}"))
}

/// The input of the pinned PP-OCR det case of crates/samebits-cli/tests/cli.rs, shifted by
/// `seed`.
fn det_input(seed: usize) -> Tensor {
    let shape = vec![1, 3, 96, 128];
    let values: Vec<f32> = (0..shape.iter().product::<usize>())
        .map(|i| (((i + seed) * 7919) % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    Tensor::from_vec(shape, values).unwrap()
}

fn bits(t: &Tensor) -> Vec<u8> {
    t.bytes().unwrap().to_vec()
}

#[test]
fn pp_ocr_det_gives_one_stages_bits_with_every_stage_count_from_1_to_8() {
    let Some(path) = det_model() else { return };
    let whole = compile(path.as_path(), &CompileOptions::default()).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), Value::Tensor(det_input(0)))]);
    let reference = whole.run(&inputs).unwrap();
    let npy = tensor_file::npy_bytes(reference[0].1.as_tensor().unwrap()).unwrap();
    let sha = samebits_runtime::hashing::sha256_bytes(&npy);
    // The regression pin of crates/samebits-cli/tests/cli.rs for this input.
    assert_eq!(
        sha,
        "47440c69c2dd4a75917a3d072e041d7aa0f9d6d0be41c71a902e0e6632dd7551"
    );
    let spec = ModelSpec::from_path(&path);
    for n in 1..=8 {
        let (mut pipeline, loaded) = start(&spec, n);
        let Loaded::Onnx(model) = loaded else {
            panic!("an ONNX model")
        };
        assert_eq!(pipeline.summary().len(), n);
        let outputs = run_named(&mut pipeline, &model, &inputs).unwrap();
        assert_eq!(outputs.len(), reference.len());
        for ((name, got), (want_name, want)) in outputs.iter().zip(&reference) {
            assert_eq!(name, want_name);
            assert_eq!(
                bits(got.as_tensor().unwrap()),
                bits(want.as_tensor().unwrap()),
                "{n} stages: output {name} differs"
            );
        }
        eprintln!("{n} stages: {:?}", pipeline.summary());
    }
}

#[test]
fn onnx_requests_give_the_same_bits_however_they_are_grouped() {
    let Some(path) = det_model() else { return };
    let whole = compile(path.as_path(), &CompileOptions::default()).unwrap();
    let requests: Vec<BTreeMap<String, Value>> = (0..4)
        .map(|seed| BTreeMap::from([("x".to_string(), Value::Tensor(det_input(seed * 31)))]))
        .collect();
    let reference: Vec<Vec<u8>> = requests
        .iter()
        .map(|r| bits(whole.run(r).unwrap()[0].1.as_tensor().unwrap()))
        .collect();
    assert_ne!(
        reference[0], reference[1],
        "distinct inputs give distinct outputs"
    );
    let spec = ModelSpec::from_path(&path);
    let (mut pipeline, loaded) = start(&spec, 3);
    let Loaded::Onnx(model) = loaded else {
        panic!("an ONNX model")
    };
    for micro_batch in [1, 2, 3, 4] {
        let ordered: Vec<Vec<Tensor>> = requests
            .iter()
            .map(|r| ordered_inputs(&model, r).unwrap())
            .collect();
        let outputs = run_requests(&mut pipeline, ordered, micro_batch).unwrap();
        for (i, out) in outputs.iter().enumerate() {
            assert_eq!(
                bits(&out[0]),
                reference[i],
                "micro-batch {micro_batch}, request {i}"
            );
        }
    }
    let e = run_requests(&mut pipeline, vec![], 0)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "--micro-batch must be at least 1");
}

fn greedy(max_tokens: usize) -> GenerateOptions {
    GenerateOptions {
        chat: false,
        max_tokens,
        sampling: SamplingOptions::default(),
    }
}

const PROMPTS: [&str; 3] = [
    "The capital of France is",
    "Once upon a time",
    "def fibonacci(n):",
];

#[test]
fn smollm2_generation_gives_one_stages_bits_with_every_stage_count_from_1_to_8() {
    let Some(path) = smollm2() else { return };
    let options = greedy(8);
    let reference = {
        let llm = Llm::load(&path, OperationSet::Reproducible).unwrap();
        generate(&llm, PROMPTS[0], &options, |_| {}).unwrap()
    };
    assert!(reference.text.starts_with(" Paris"), "{:?}", reference.text);
    let spec = ModelSpec::from_path(&path);
    for n in 1..=8 {
        let (mut pipeline, loaded) = start(&spec, n);
        let Loaded::Llm(llm) = loaded else {
            panic!("a decoder")
        };
        let mut streamed = String::new();
        let got = generate_many(
            &mut pipeline,
            &llm,
            &[PROMPTS[0].to_string()],
            &options,
            1,
            &mut |_, text| streamed.push_str(text),
        )
        .unwrap()
        .remove(0);
        assert_eq!(got.tokens, reference.tokens, "{n} stages");
        assert_eq!(got.logits, reference.logits, "{n} stages: logits differ");
        assert_eq!(streamed, reference.text);
        eprintln!(
            "{n} stages: {:?} digest {}",
            pipeline.summary(),
            got.logits.digest()
        );
    }
}

#[test]
fn smollm2_prompts_in_flight_give_the_same_bits_however_they_are_grouped() {
    let Some(path) = smollm2() else { return };
    let options = greedy(6);
    let llm = Llm::load(&path, OperationSet::Reproducible).unwrap();
    let reference: Vec<_> = PROMPTS
        .iter()
        .map(|p| generate(&llm, p, &options, |_| {}).unwrap())
        .collect();
    let all_rows = llm
        .forward(&reference[1].prompt_tokens, &mut llm.new_cache())
        .unwrap();
    let spec = ModelSpec::from_path(&path);
    let (mut pipeline, loaded) = start(&spec, 3);
    let Loaded::Llm(staged) = loaded else {
        panic!("a decoder")
    };
    let prompts: Vec<String> = PROMPTS.iter().map(|p| p.to_string()).collect();
    for micro_batch in [1, 2, 3] {
        let mut texts = vec![String::new(); prompts.len()];
        let got = generate_many(
            &mut pipeline,
            &staged,
            &prompts,
            &options,
            micro_batch,
            &mut |i, text| texts[i].push_str(text),
        )
        .unwrap();
        for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
            assert_eq!(g.tokens, r.tokens, "micro-batch {micro_batch}, prompt {i}");
            assert_eq!(g.logits, r.logits, "micro-batch {micro_batch}, prompt {i}");
            assert_eq!(texts[i], r.text);
        }
    }
    // One prefill over a prompt (how receipts are verified) gives every row's bits.
    let rows = prefill(&mut pipeline, &reference[1].prompt_tokens).unwrap();
    assert_eq!(rows, all_rows);
    // Token-by-token decode of fixed tokens gives the prefill's rows, two sequences at once.
    let tokens = reference[1].prompt_tokens.clone();
    let (decoded, _) = decode_fixed(&mut pipeline, &[tokens.clone(), tokens], 2).unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&decoded[0]), bits(&all_rows));
    assert_eq!(bits(&decoded[1]), bits(&all_rows));
}

#[test]
fn errors_come_before_any_work() {
    let fake = ModelSpec::Onnx(PathBuf::from("/no/such/model.onnx"));
    let e = Pipeline::start(&fake, &cpu(0)).err().unwrap().to_string();
    assert_eq!(e, "--n-partitions must be at least 1");
    // A huge count (found by mutation: a capacity overflow) is refused before any allocation.
    for n in [samebits_pipeline::MAX_PARTITIONS + 1, 1 << 31, usize::MAX] {
        let e = Pipeline::start(&fake, &cpu(n)).err().unwrap().to_string();
        assert_eq!(
            e,
            format!("--n-partitions {n} is more than the 1024 stages a pipeline can have")
        );
    }
    // In a build without CUDA, or on a machine without GPUs, the GPU check fails first,
    // whatever the model.
    let refusal = if !cfg!(feature = "cuda") {
        Some("this samebits was built without CUDA (feature `cuda`)")
    } else if samebits_pipeline::nccl::visible_gpus() == 0 {
        Some("pipeline parallelism with 2 partitions needs 2 GPUs; found 0")
    } else {
        None
    };
    if let Some(refusal) = refusal {
        let mut options = cpu(2);
        options.device = Device::Cuda(0);
        let e = Pipeline::start(&fake, &options).err().unwrap().to_string();
        assert_eq!(e, refusal);
    }
    match samebits_pipeline::nccl::check_nccl() {
        Err(_) if !cfg!(feature = "cuda") => {}
        Ok(()) => skip("NCCL is present: its missing-library message is not checked"),
        Err(e) => {
            let e = e.to_string();
            assert!(
                e.starts_with("NCCL is unavailable: none of libnccl.so,"),
                "{e}"
            );
            assert!(e.contains("LD_LIBRARY_PATH"), "{e}");
        }
    }
    if let Some(path) = smollm2() {
        let e = Pipeline::start(&ModelSpec::from_path(&path), &cpu(31))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "pipeline parallelism with 31 partitions needs at least 31 decoder layers; the model \
             has 30"
        );
    }
}

/// The NCCL transport with one rank on one GPU (a send to itself), against the CPU's bits.
#[test]
fn nccl_single_rank_pipeline_on_one_gpu() {
    if samebits_pipeline::nccl::visible_gpus() == 0 {
        return skip("no CUDA GPU: the NCCL transport is not exercised");
    }
    if let Err(e) = samebits_pipeline::nccl::check_nccl() {
        return skip(&format!("{e}"));
    }
    let Some(path) = det_model() else { return };
    let whole = compile(path.as_path(), &CompileOptions::default()).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), Value::Tensor(det_input(0)))]);
    let reference = whole.run(&inputs).unwrap();
    let mut options = cpu(1);
    options.device = Device::Cuda(0);
    let (mut pipeline, loaded) = Pipeline::start(&ModelSpec::from_path(&path), &options).unwrap();
    let Loaded::Onnx(model) = loaded else {
        panic!("an ONNX model")
    };
    let got = run_named(&mut pipeline, &model, &inputs).unwrap();
    assert_eq!(
        bits(got[0].1.as_tensor().unwrap()),
        bits(reference[0].1.as_tensor().unwrap())
    );
}
