//! End-to-end tests of the `samebits` binary: ONNX node cases through `run`, receipts through
//! `verify`, bad input handled with one-line errors, and bit equality across thread counts and
//! ISA paths on a real model. Reference outputs are ONNX's own test data (onnx 1.22.0 wheel).

use samebits_testdata::{ONNX_NODE_TESTS, PP_OCR_MODELS, Rng, SMOLLM2_GGUF, cached};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_samebits"))
}

fn node_dir() -> Option<PathBuf> {
    cached(ONNX_NODE_TESTS)
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("samebits starts");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// (name, input file) pairs of a case's first data set, in the model's input order.
fn case_inputs(case: &Path) -> Vec<(String, PathBuf)> {
    let model = samebits_onnx::load_model(&case.join("model.onnx")).unwrap();
    model
        .graph
        .runtime_inputs()
        .enumerate()
        .map(|(i, v)| {
            (
                v.name.clone(),
                case.join(format!("test_data_set_0/input_{i}.pb")),
            )
        })
        .collect()
}

const ISSUE_CASES: [&str; 16] = [
    "test_conv_with_strides_padding",
    "test_gemm_default_matrix_bias",
    "test_softmax_axis_1",
    "test_layer_normalization_4d_axis0",
    "test_matmul_4d",
    "test_gather_0",
    "test_transpose_all_permutations_3",
    "test_reduce_mean_keepdims_example",
    "test_gelu_default_1",
    "test_averagepool_2d_pads",
    "test_batchnorm_epsilon",
    "test_concat_3d_axis_1",
    "test_where_example",
    "test_erf",
    "test_relu",
    "test_sigmoid",
];

#[test]
fn node_cases_through_run_match_onnx_reference_outputs() {
    let Some(dir) = node_dir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for name in ISSUE_CASES {
        let case = dir.join(name);
        let out = tmp.path().join(name);
        let mut cmd = bin();
        cmd.arg("run")
            .arg(case.join("model.onnx"))
            .arg("--out")
            .arg(&out);
        for (input, file) in case_inputs(&case) {
            cmd.arg("--input")
                .arg(format!("{input}={}", file.display()));
        }
        run_ok(&mut cmd);
        let model = samebits_onnx::load_model(&case.join("model.onnx")).unwrap();
        for (i, o) in model.graph.outputs.iter().enumerate() {
            let expected =
                samebits_onnx::read_tensor_pb(&case.join(format!("test_data_set_0/output_{i}.pb")))
                    .unwrap();
            let actual =
                samebits_runtime::tensor_file::read_npy(&out.join(format!("{}.npy", o.name)))
                    .unwrap();
            assert_eq!(actual.shape(), expected.shape(), "{name}");
            let (a, e) = (actual.to_f64_vec().unwrap(), expected.to_f64_vec().unwrap());
            for (x, y) in a.iter().zip(&e) {
                assert!((x - y).abs() <= 1e-6 + 1e-3 * y.abs(), "{name}: {x} vs {y}");
            }
        }
    }
}

#[test]
fn verify_accepts_a_true_receipt_and_rejects_an_altered_one() {
    let Some(dir) = node_dir() else { return };
    let case = dir.join("test_softmax_axis_1");
    let tmp = tempfile::tempdir().unwrap();
    let receipt = tmp.path().join("receipt.json");
    let mut cmd = bin();
    cmd.arg("run").arg(case.join("model.onnx"));
    for (input, file) in case_inputs(&case) {
        cmd.arg("--input")
            .arg(format!("{input}={}", file.display()));
    }
    run_ok(
        cmd.arg("--out")
            .arg(tmp.path().join("out"))
            .arg("--receipt")
            .arg(&receipt),
    );
    let ok = bin().arg("verify").arg(&receipt).output().unwrap();
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    // Three runs in one process, each compared with the receipt.
    let runs = bin()
        .args(["verify", "--runs", "3"])
        .arg(&receipt)
        .output()
        .unwrap();
    assert_eq!(runs.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&runs.stdout).contains("in each of 3 runs"));
    // --runs re-runs one process's model, not a pipeline of stages.
    let staged = bin()
        .args(["verify", "--runs", "2", "--n-partitions", "2"])
        .arg(&receipt)
        .output()
        .unwrap();
    assert_eq!(staged.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&staged.stderr).contains("--runs"));

    let text = std::fs::read_to_string(&receipt).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let sha = json["outputs"][0]["sha256"].as_str().unwrap().to_string();
    let flipped = format!(
        "{}{}",
        if sha.starts_with('0') { "1" } else { "0" },
        &sha[1..]
    );
    json["outputs"][0]["sha256"] = flipped.into();
    let altered = tmp.path().join("altered.json");
    std::fs::write(&altered, json.to_string()).unwrap();
    let bad = bin().arg("verify").arg(&altered).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("MISMATCH"));

    let garbage = tmp.path().join("garbage.json");
    std::fs::write(&garbage, "{\"not\": \"a receipt\"}").unwrap();
    let unusable = bin().arg("verify").arg(&garbage).output().unwrap();
    assert_eq!(unusable.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unusable.stderr).contains("garbage.json"));
}

/// Runs `samebits run` expecting failure; returns stderr and checks the out dir stayed empty.
fn run_fails(args: &[&str], out: &Path) -> String {
    let o = bin()
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        matches!(o.status.code(), Some(1 | 2)),
        "exit {:?}",
        o.status.code()
    );
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "output written despite the error");
    err
}

#[test]
fn bad_input_gets_a_one_line_error_naming_the_culprit() {
    let Some(dir) = node_dir() else { return };
    let case = dir.join("test_relu");
    let model = case.join("model.onnx");
    let good_input = case.join("test_data_set_0/input_0.pb");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let m = model.to_str().unwrap();
    let mut errors = Vec::new();

    let truncated = tmp.path().join("truncated.onnx");
    std::fs::write(&truncated, &std::fs::read(&model).unwrap()[..40]).unwrap();
    let e = run_fails(
        &[
            truncated.to_str().unwrap(),
            "--input",
            &format!("x={}", good_input.display()),
        ],
        &out,
    );
    assert!(e.contains("truncated.onnx"), "{e}");
    errors.push(e);

    let corrupt = tmp.path().join("corrupt.npy");
    std::fs::write(&corrupt, b"\x93NUMPY\x01\x00\xff\xff{'descr'").unwrap();
    let e = run_fails(&[m, "--input", &format!("x={}", corrupt.display())], &out);
    assert!(e.contains("corrupt.npy"), "{e}");
    errors.push(e);

    let wrong_shape = tmp.path().join("wrong.npy");
    samebits_runtime::tensor_file::write_npy(
        &wrong_shape,
        &samebits_ir::Tensor::from_vec(vec![2], vec![1f32, 2.]).unwrap(),
    )
    .unwrap();
    let e = run_fails(
        &[m, "--input", &format!("x={}", wrong_shape.display())],
        &out,
    );
    assert!(e.contains("input \"x\" has shape [2]"), "{e}");
    errors.push(e);

    let e = run_fails(
        &[m, "--input", &format!("nope={}", good_input.display())],
        &out,
    );
    assert!(e.contains("no input named \"nope\""), "{e}");
    errors.push(e);

    let e = run_fails(&[m, "--input", "x=/no/such/file.npy"], &out);
    assert!(e.contains("/no/such/file.npy"), "{e}");
    errors.push(e);

    let e = run_fails(&["/no/such/model.onnx"], &out);
    assert!(e.contains("/no/such/model.onnx"), "{e}");
    errors.push(e);
    for err in errors {
        assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    }
}

/// A PP-OCR model (rapidocr-onnxruntime 1.4.4 wheel, shared/README.md) with the shape of its
/// fixed input and the sha256 of its output file on that input.
struct OcrCase {
    file: &'static str,
    shape: [usize; 4],
    /// Recorded from the samebits binary of main at 6f5a0bb (before the ocr-perf changes) on
    /// AVX-512, AVX2 and scalar paths and 1 and 2 threads alike: a regression pin that keeps
    /// performance work from changing a single output bit, not a correctness reference.
    output_sha256: &'static str,
}

const OCR_CASES: [OcrCase; 3] = [
    OcrCase {
        file: "ch_ppocr_mobile_v2.0_cls_infer.onnx",
        shape: [1, 3, 48, 192],
        output_sha256: "e2644926e29fe2bcb4b4d2ba47cd0307512e0d692b23ecb6c45f910a8b222508",
    },
    OcrCase {
        file: "ch_PP-OCRv4_det_infer.onnx",
        shape: [1, 3, 96, 128],
        output_sha256: "47440c69c2dd4a75917a3d072e041d7aa0f9d6d0be41c71a902e0e6632dd7551",
    },
    OcrCase {
        file: "ch_PP-OCRv4_rec_infer.onnx",
        shape: [1, 3, 48, 320],
        output_sha256: "5d89fd6bab9f3587a21df7e1729e8e24dae63c07100cf0c5e7dbedd7aad9e390",
    },
];

/// Runs `case` on its fixed input and returns the output file's bytes, or `None` (with a
/// loud skip) when the models are not cached.
fn ocr_run(case: &OcrCase, env: &[(&str, &str)], threads: &str, out: &Path) -> Option<Vec<u8>> {
    let model = cached(&format!("{PP_OCR_MODELS}/{}", case.file))?;
    let input = out.with_extension("x.npy");
    let values: Vec<f32> = (0..case.shape.iter().product::<usize>())
        .map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    samebits_runtime::tensor_file::write_npy(
        &input,
        &samebits_ir::Tensor::from_vec(case.shape.to_vec(), values).unwrap(),
    )
    .unwrap();
    let mut cmd = bin();
    cmd.envs(env.iter().copied())
        .args(["--threads", threads, "run"])
        .arg(&model)
        .arg("--input")
        .arg(format!("x={}", input.display()))
        .arg("--out")
        .arg(out);
    run_ok(&mut cmd);
    let file = std::fs::read_dir(out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    Some(std::fs::read(file).unwrap())
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn real_models_give_the_pinned_bits_for_every_thread_count_and_isa() {
    let tmp = tempfile::tempdir().unwrap();
    for (n, case) in OCR_CASES.iter().enumerate() {
        let dir = |what: &str| tmp.path().join(format!("{n}-{what}"));
        let Some(reference) = ocr_run(case, &[], "1", &dir("t1")) else {
            return;
        };
        assert_eq!(sha256_hex(&reference), case.output_sha256, "{}", case.file);
        let two = ocr_run(case, &[], "2", &dir("t2")).unwrap();
        assert_eq!(reference, two, "{}: 1 vs 2 threads", case.file);
        for isa in samebits_kernels::Isa::available() {
            let name = isa.name();
            let bits = ocr_run(case, &[("SAMEBITS_ISA", name)], "2", &dir(name)).unwrap();
            assert_eq!(reference, bits, "{}: ISA {name} differs", case.file);
        }
    }
}

/// The model zoo's entries (zoo/models.json, the one list bench.py and the GPU check read too).
fn zoo_models() -> Vec<serde_json::Value> {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("../../../zoo/models.json")).expect("zoo/models.json");
    doc["models"].as_array().expect("a models array").clone()
}

/// Writes `model`'s inputs, drawn as its entry says from a seeded generator, as .npy files in
/// `dir`, and returns them as `NAME=PATH` arguments.
fn zoo_inputs(model: &serde_json::Value, dir: &Path) -> Vec<String> {
    let mut rng = Rng(0x200);
    let mut args = Vec::new();
    for (i, input) in model["inputs"].as_array().unwrap().iter().enumerate() {
        let shape: Vec<usize> = serde_json::from_value(input["shape"].clone()).unwrap();
        let numel = shape.iter().product::<usize>();
        let (low, high) = (input["low"].as_f64(), input["high"].as_f64());
        let tensor = match input["dtype"].as_str().unwrap() {
            "f32" => {
                let value = |rng: &mut Rng| match input["fill"].as_f64() {
                    Some(fill) => fill as f32,
                    None => {
                        let (low, high) = (low.unwrap() as f32, high.unwrap() as f32);
                        low + (high - low) * (rng.unit() + 1.0) / 2.0
                    }
                };
                let values = (0..numel).map(|_| value(&mut rng)).collect::<Vec<f32>>();
                samebits_ir::Tensor::from_vec(shape, values)
            }
            "i64" => {
                let value = |rng: &mut Rng| match input["fill"].as_i64() {
                    Some(fill) => fill,
                    None => {
                        let (low, high) = (low.unwrap() as i64, high.unwrap() as i64);
                        low + rng.below((high - low) as usize) as i64
                    }
                };
                let values = (0..numel).map(|_| value(&mut rng)).collect::<Vec<i64>>();
                samebits_ir::Tensor::from_vec(shape, values)
            }
            other => panic!("zoo/models.json: input dtype {other}"),
        };
        let path = dir.join(format!("input{i}.npy"));
        samebits_runtime::tensor_file::write_npy(&path, &tensor.unwrap()).unwrap();
        args.push(format!(
            "{}={}",
            input["name"].as_str().unwrap(),
            path.display()
        ));
    }
    args
}

/// Every output file of `samebits run` of `model` on `inputs`, by name, with `env` and `threads`.
fn zoo_run(
    model: &Path,
    inputs: &[String],
    env: &[(&str, &str)],
    threads: &str,
    out: &Path,
) -> Vec<(String, Vec<u8>)> {
    let mut cmd = bin();
    cmd.envs(env.iter().copied())
        .args(["--threads", threads, "run"])
        .arg(model)
        .arg("--out")
        .arg(out);
    for input in inputs {
        cmd.arg("--input").arg(input);
    }
    run_ok(&mut cmd);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(out)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// The zoo's models (a YOLO detector, a ResNet-50-family classifier, a BERT-family encoder, a
/// vision transformer, two speech networks) give the same bits at 1 and 2 threads and on every
/// ISA path. Their closeness to ONNX Runtime (relative L2 < 1e-5 per output) is checked by
/// scripts/bench.py, which has ONNX Runtime at hand.
#[test]
fn zoo_models_give_the_same_bits_on_every_thread_count_and_isa() {
    let tmp = tempfile::tempdir().unwrap();
    for model in zoo_models() {
        let id = model["id"].as_str().unwrap();
        let Some(path) = cached(model["path"].as_str().unwrap()) else {
            continue;
        };
        let dir = |what: &str| tmp.path().join(format!("{id}-{what}"));
        std::fs::create_dir_all(dir("inputs")).unwrap();
        let inputs = zoo_inputs(&model, &dir("inputs"));
        let reference = zoo_run(&path, &inputs, &[], "1", &dir("t1"));
        assert!(!reference.is_empty(), "{id}: no outputs");
        let two = zoo_run(&path, &inputs, &[], "2", &dir("t2"));
        assert!(reference == two, "{id}: 1 vs 2 threads differ");
        for isa in samebits_kernels::Isa::available() {
            let name = isa.name();
            let bits = zoo_run(&path, &inputs, &[("SAMEBITS_ISA", name)], "2", &dir(name));
            assert!(reference == bits, "{id}: ISA {name} differs");
        }
    }
}

/// The zoo's models with dynamic axes (YOLOv8n, MiniLM, ViT-S compute shapes with Shape /
/// Gather / Concat nodes) run through a plan specialised to their input shapes from the second
/// run on (samebits-runtime's `specialised.rs`), and that plan gives the compiled plan's bits.
#[test]
fn zoo_models_give_the_same_bits_through_plans_specialised_to_their_input_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    for model in zoo_models() {
        let id = model["id"].as_str().unwrap();
        let Some(path) = cached(model["path"].as_str().unwrap()) else {
            continue;
        };
        let dir = tmp.path().join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let inputs: std::collections::BTreeMap<String, samebits_ir::Value> =
            zoo_inputs(&model, &dir)
                .iter()
                .map(|arg| {
                    let (name, file) = arg.split_once('=').unwrap();
                    let tensor = samebits_runtime::tensor_file::read_npy(Path::new(file));
                    (name.to_string(), tensor.unwrap().into())
                })
                .collect();
        let options = samebits_runtime::CompileOptions::default();
        let compiled = samebits_runtime::compile(path.as_path(), &options).unwrap();
        let bits = |outputs: Vec<(String, samebits_ir::Value)>| -> Vec<(String, Vec<u8>)> {
            let bytes = |v: samebits_ir::Value| v.into_tensor().unwrap().bytes().unwrap().to_vec();
            outputs.into_iter().map(|(n, v)| (n, bytes(v))).collect()
        };
        let compiled_plan = bits(compiled.run(&inputs).unwrap());
        let (steps, special) = compiled.step_counts(&inputs).unwrap();
        let specialised = bits(compiled.run(&inputs).unwrap());
        assert!(
            compiled_plan == specialised,
            "{id}: specialised plan differs"
        );
        if ["yolov8n", "minilm-l3", "vit-s-focus"].contains(&id) {
            let special = special.unwrap_or_else(|| panic!("{id}: not specialised"));
            assert!(special < steps, "{id}: {special} of {steps} steps");
        }
    }
}

fn smollm2() -> Option<PathBuf> {
    cached(SMOLLM2_GGUF)
}

#[test]
fn bench_on_a_gguf_model_writes_every_timed_run_of_every_test() {
    let Some(model) = smollm2() else { return };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("llm.json");
    let out = run_ok(
        bin()
            .args(["--threads", "2", "bench", "--model"])
            .arg(&model)
            .args([
                "--prompt-tokens",
                "3,5",
                "--gen-tokens",
                "2",
                "--runs",
                "2",
                "--warmup",
                "0",
                "--times-json",
                json.to_str().unwrap(),
            ]),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for test in ["pp3", "pp5", "tg2"] {
        assert!(stdout.contains(test), "no {test} row in {stdout}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["engine"], "samebits");
    assert_eq!(v["threads"], 2);
    assert_eq!(v["operation_set"], "reproducible");
    let tests = v["tests"].as_array().unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t["test"].as_str().unwrap()).collect();
    assert_eq!(names, ["pp3", "pp5", "tg2"]);
    for (t, tokens) in tests.iter().zip([3, 5, 2]) {
        assert_eq!(t["tokens"], tokens);
        let seconds = t["seconds"].as_array().unwrap();
        assert_eq!(seconds.len(), 2);
        assert!(seconds.iter().all(|s| s.as_f64().unwrap() > 0.0));
    }
    // The CPU limits: both probes measured, and decode reads about the file's bytes per token
    // (SmolLM2's output head is its tied embedding table, so every matrix counts: the file less
    // its metadata and norm vectors).
    let limits = &v["limits"];
    assert!(limits["memory_read_bytes_per_s"].as_f64().unwrap() > 1e8);
    assert!(limits["fma_flop_per_s"].as_f64().unwrap() > 1e8);
    assert!(stdout.contains("limits: memory read"), "{stdout}");
    let weights_mb: f64 = stdout
        .lines()
        .find(|l| l.starts_with("tg2 ") && l.contains("MB read per token"))
        .and_then(|l| {
            l.split('(')
                .nth(1)?
                .split(" MB weights")
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no tg2 limit line in {stdout}"));
    let file_mb = std::fs::metadata(&model).unwrap().len() as f64 / 1e6;
    assert!(
        (0.9 * file_mb..=file_mb).contains(&weights_mb),
        "{weights_mb} MB of weights per token from a {file_mb} MB file"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("pp5 ") && l.contains("% of FMA peak"))
    );
}

#[test]
fn bench_rejects_an_empty_prompt_length_and_a_second_model() {
    let Some(model) = smollm2() else { return };
    let out = bin()
        .args(["bench", "--model"])
        .arg(&model)
        .args(["--prompt-tokens", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--prompt-tokens"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let both = bin()
        .args(["bench", "model.onnx", "--model"])
        .arg(&model)
        .output()
        .unwrap();
    assert!(!both.status.success());
}

/// Usage mistakes found by mutation (a panic, and a hang at `--threads 100000`) get a one-line
/// error and exit 2 before any work.
#[test]
fn impossible_isa_and_thread_counts_are_usage_errors() {
    let unavailable = if cfg!(target_arch = "x86_64") {
        "neon"
    } else {
        "avx2"
    };
    for (isa, message) in [
        (
            unavailable,
            format!("error: SAMEBITS_ISA: ISA {unavailable} is not available on this CPU"),
        ),
        (
            "sse9",
            "error: SAMEBITS_ISA: unknown ISA \"sse9\": expected one of scalar, avx2, avx512, neon"
                .to_string(),
        ),
    ] {
        let o = bin()
            .env("SAMEBITS_ISA", isa)
            .args(["run", "/no/such/model.onnx", "--out", "/tmp/never"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "SAMEBITS_ISA={isa}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.trim().starts_with(&message), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    for threads in ["0", "100000", "1025"] {
        let o = bin()
            .args(["--threads", threads, "run", "/no/such/model.onnx"])
            .args(["--out", "/tmp/never"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "--threads {threads}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--threads"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
