//! Receipt JSON through what `samebits verify` does before it re-runs anything: the run receipt
//! reader and its model, external-file and input checks ([`receipt::verify_with`] with a run
//! that declines), the generation receipt reader with its model check
//! ([`generation_receipt::read_checked`]), and the embedding receipt reader with its model
//! digest. The receipt's folder holds `model.onnx`, `model.gguf` and `x.npy` (an f32 tensor
//! holding 1.0), so receipts that name them reach the hash comparisons and the tensor reader.

#![no_main]

use libfuzzer_sys::fuzz_target;
use samebits_fuzz::{scratch_subdir, write_file};
use samebits_ir::Tensor;
use samebits_llm::checkpoint::model_sha256;
use samebits_llm::embed::EmbeddingReceipt;
use samebits_llm::receipt as generation_receipt;
use samebits_runtime::{RuntimeError, receipt, tensor_file};

/// The model files beside the receipt: fixed bytes whose sha256 seed.py writes into the seeds.
const MODEL_FILES: [&str; 2] = ["model.onnx", "model.gguf"];
const MODEL_BYTES: &[u8] = b"samebits fuzz model\n";

fuzz_target!(|data: &[u8]| {
    let folder = scratch_subdir("receipt");
    for name in MODEL_FILES {
        write_file(&folder, name, MODEL_BYTES);
    }
    let one = Tensor::from_vec(vec![1], vec![1.0f32]).expect("one element");
    write_file(
        &folder,
        "x.npy",
        &tensor_file::npy_bytes(&one).expect("f32 writes"),
    );
    let path = write_file(&folder, "receipt.json", data);
    let _ = receipt::verify_with(&path, &mut |_, _, _| {
        Err(RuntimeError::Usage("the fuzzer runs no model".into()))
    });
    let _ = generation_receipt::read_checked(&path, None);
    if let Ok(embedding) = EmbeddingReceipt::read(&path) {
        let _ = model_sha256(&folder.join(&embedding.model.path));
    }
});
