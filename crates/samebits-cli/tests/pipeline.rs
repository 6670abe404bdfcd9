//! `--n-partitions` end to end through the binary (the CPU simulation): the same output bytes and
//! logits digests for every N, receipts that record N and verify through any other N, and the
//! errors made before any work. Skipped loudly without the cached models.

use samebits_testdata::{PP_OCR_MODELS, SMOLLM2_GGUF, cached, skip};
use std::path::Path;
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_samebits"))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("samebits runs")
}

fn ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn field(receipt: &Path, key: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(receipt).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()[key].clone()
}

#[test]
fn pp_ocr_det_output_and_receipts_do_not_depend_on_the_partition_count() {
    let Some(model) = cached(&format!("{PP_OCR_MODELS}/ch_PP-OCRv4_det_infer.onnx")) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("x.npy");
    let values: Vec<f32> = (0..3 * 64 * 96)
        .map(|i| ((i * 31) % 97) as f32 / 50.0 - 1.0)
        .collect();
    samebits_runtime::tensor_file::write_npy(
        &input,
        &samebits_ir::Tensor::from_vec(vec![1, 3, 64, 96], values).unwrap(),
    )
    .unwrap();
    let mut outputs = Vec::new();
    for n in [1, 3] {
        let out = tmp.path().join(format!("out{n}"));
        let receipt = tmp.path().join(format!("run{n}.json"));
        ok(bin()
            .arg("run")
            .arg(&model)
            .arg("--input")
            .arg(format!("x={}", input.display()))
            .arg("--out")
            .arg(&out)
            .arg("--receipt")
            .arg(&receipt)
            .args(["--n-partitions", &n.to_string()]));
        assert_eq!(field(&receipt, "n_partitions"), n);
        let file = std::fs::read_dir(&out)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        outputs.push(std::fs::read(file).unwrap());
    }
    assert_eq!(outputs[0], outputs[1], "1 and 3 stages give other bytes");
    // Each receipt verifies through the other partition count.
    for (receipt, n) in [("run1.json", "2"), ("run3.json", "1")] {
        let out = ok(bin()
            .arg("verify")
            .arg(tmp.path().join(receipt))
            .args(["--n-partitions", n]));
        assert!(String::from_utf8_lossy(&out.stdout).contains("verified"));
    }
}

#[test]
fn smollm2_generation_receipts_do_not_depend_on_the_partition_count() {
    let Some(model) = cached(SMOLLM2_GGUF) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut texts = Vec::new();
    for n in [1, 2] {
        let receipt = tmp.path().join(format!("gen{n}.json"));
        let out = ok(bin()
            .args([
                "generate",
                "--prompt",
                "The capital of France is",
                "--max-tokens",
                "6",
            ])
            .arg("--model")
            .arg(&model)
            .arg("--receipt")
            .arg(&receipt)
            .args(["--n-partitions", &n.to_string()]));
        texts.push(out.stdout);
        assert_eq!(field(&receipt, "n_partitions"), n);
    }
    assert_eq!(texts[0], texts[1]);
    let digest = |n: usize| field(&tmp.path().join(format!("gen{n}.json")), "logits_digest");
    assert_eq!(digest(1), digest(2));
    ok(bin()
        .arg("verify")
        .arg(tmp.path().join("gen2.json"))
        .args(["--n-partitions", "3"]));
    ok(bin().arg("verify").arg(tmp.path().join("gen1.json")));
}

#[test]
fn partition_errors_are_one_line_before_any_work() {
    let e = run(bin().args([
        "run",
        "/no/such/model.onnx",
        "--out",
        "/tmp/never",
        "--n-partitions",
        "0",
    ]));
    assert!(!e.status.success());
    assert_eq!(
        String::from_utf8_lossy(&e.stderr).trim(),
        "error: --n-partitions must be at least 1"
    );
    if samebits_pipeline_gpus() == 0 {
        let e = run(bin().args([
            "run",
            "/no/such/model.onnx",
            "--out",
            "/tmp/never",
            "--device",
            "cuda",
            "--n-partitions",
            "2",
        ]));
        assert_eq!(
            String::from_utf8_lossy(&e.stderr).trim(),
            "error: pipeline parallelism with 2 partitions needs 2 GPUs; found 0"
        );
    } else {
        skip("GPUs present: the missing-GPU message is not checked");
    }
}

/// GPUs the driver shows (0 without libcuda), without linking the pipeline crate here.
fn samebits_pipeline_gpus() -> usize {
    Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().count())
        .unwrap_or(0)
}
