//! ONNX model bytes through what `samebits run` does: the file is written into a model folder
//! (beside a small external-data file a model may name), compiled for the CPU with
//! [`samebits_runtime::compile`], and, when it compiles and its inputs are small, run once on
//! zero inputs. Errors are expected; a panic, an abort or a hang is a finding.

#![no_main]

use libfuzzer_sys::fuzz_target;
use samebits_fuzz::{scratch_subdir, write_file};
use samebits_ir::{DType, Dim, Tensor, Value, ValueType};
use samebits_runtime::{CompileOptions, compile};
use std::collections::BTreeMap;

/// Most elements, over all inputs together, of a run on zero inputs.
const MAX_RUN_ELEMENTS: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let folder = scratch_subdir("model");
    write_file(&folder, "weights.bin", &[0u8; 256]);
    let model = write_file(&folder, "model.onnx", data);
    let options = CompileOptions {
        artifacts_dir: Some(scratch_subdir("artifacts")),
        ..CompileOptions::default()
    };
    let Ok(compiled) = compile(model.as_path(), &options) else {
        return;
    };
    let Some(inputs) = zero_inputs(&compiled.model.graph) else {
        return;
    };
    let _ = compiled.run(&inputs);
});

/// Zeros for every graph input of a known tensor type (symbolic dims taken as 1), or `None`
/// when an input is no tensor, has an unknown rank, or the inputs are too large to run.
fn zero_inputs(graph: &samebits_ir::Graph) -> Option<BTreeMap<String, Value>> {
    let mut inputs = BTreeMap::new();
    let mut elements = 0usize;
    for input in &graph.inputs {
        if graph.initializers.contains_key(&input.name) {
            continue;
        }
        let Some(ValueType::Tensor {
            dtype,
            shape: Some(shape),
        }) = &input.ty
        else {
            return None;
        };
        let dims: Vec<usize> = shape
            .0
            .iter()
            .map(|d| match d {
                Dim::Known(n) => *n,
                Dim::Symbol(_) => 1,
            })
            .collect();
        let numel = samebits_ir::checked_numel(&dims).ok()?;
        elements = elements.checked_add(numel)?;
        if elements > MAX_RUN_ELEMENTS {
            return None;
        }
        let tensor = match dtype {
            DType::String => Tensor::from_strings(dims, vec![String::new(); numel]),
            _ => Tensor::from_le_bytes(*dtype, dims, &vec![0u8; numel * dtype.size()]),
        }
        .ok()?;
        inputs.insert(input.name.clone(), Value::Tensor(tensor));
    }
    Some(inputs)
}
