//! Receipts: the record of one run, enough for anyone to re-run it and check the output bits.
//!
//! A receipt is JSON: the engine version, the operation set, the model file's sha256 (and each
//! external tensor file's), every input (name, dtype, shape, sha256 of its data, and the file it
//! came from, relative to the receipt), and every output (name, dtype, shape, sha256 of its raw
//! little-endian bytes). [`verify`] re-runs a receipt on this machine and compares.

use crate::device::Device;
use crate::hashing::{sha256_file, sha256_value};
use crate::{CompileOptions, CompiledModel, Result, RuntimeError, compile, tensor_file};
use samebits_ir::Value;
use samebits_ops::OperationSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "samebits-receipt/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileRecord {
    /// Relative to the receipt's folder when possible.
    pub path: String,
    pub sha256: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorRecord {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<usize>,
    pub sha256: String,
    /// For inputs: the file the data came from, relative to the receipt's folder when possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub format: String,
    pub engine: String,
    pub operation_set: OperationSet,
    pub device: String,
    pub model: FileRecord,
    #[serde(default)]
    pub model_files: Vec<FileRecord>,
    pub inputs: Vec<TensorRecord>,
    pub outputs: Vec<TensorRecord>,
    /// Pipeline stages the run used (`--n-partitions`); the bits do not depend on it.
    #[serde(default = "one_partition")]
    pub n_partitions: usize,
}

fn one_partition() -> usize {
    1
}

/// A path as the receipt stores it: relative to `base` when it lies under it, else absolute.
pub fn portable_path(path: &Path, base: &Path) -> String {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    match abs.strip_prefix(&base) {
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => abs.to_string_lossy().into_owned(),
    }
}

fn record(name: &str, value: &Value, path: Option<String>) -> TensorRecord {
    let (dtype, shape) = match value {
        Value::Tensor(t) => (t.dtype().name().to_string(), t.shape().to_vec()),
        other => (other.kind().to_string(), Vec::new()),
    };
    TensorRecord {
        name: name.to_string(),
        dtype,
        shape,
        sha256: sha256_value(value),
        path,
    }
}

impl Receipt {
    /// The receipt of a finished run. `input_files` gives, per input name, the file it was read
    /// from; `receipt_path` is where the receipt will be written (paths are stored relative to it).
    pub fn new(
        compiled: &CompiledModel,
        inputs: &BTreeMap<String, Value>,
        input_files: &BTreeMap<String, PathBuf>,
        outputs: &[(String, Value)],
        receipt_path: &Path,
    ) -> Result<Receipt> {
        let base = receipt_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut files = compiled.model_files.iter();
        let model_path = files.next().ok_or_else(|| {
            RuntimeError::Usage("receipts need a model compiled from a file".into())
        })?;
        let file_record = |p: &PathBuf| -> Result<FileRecord> {
            Ok(FileRecord {
                path: portable_path(p, base),
                sha256: sha256_file(p)?,
            })
        };
        Ok(Receipt {
            format: FORMAT.into(),
            engine: crate::ENGINE.into(),
            operation_set: compiled.operation_set,
            device: compiled.device_description(),
            model: FileRecord {
                path: portable_path(model_path, base),
                sha256: compiled.model_sha256.clone().unwrap_or_default(),
            },
            model_files: files.map(file_record).collect::<Result<_>>()?,
            inputs: inputs
                .iter()
                .map(|(name, v)| {
                    record(
                        name,
                        v,
                        input_files.get(name).map(|p| portable_path(p, base)),
                    )
                })
                .collect(),
            outputs: outputs.iter().map(|(n, v)| record(n, v, None)).collect(),
            n_partitions: 1,
        })
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("receipt serialises");
        std::fs::write(path, text + "\n").map_err(|e| RuntimeError::io(path, e))
    }

    pub fn read(path: &Path) -> Result<Receipt> {
        let text = std::fs::read_to_string(path).map_err(|e| RuntimeError::io(path, e))?;
        let receipt: Receipt = serde_json::from_str(&text)
            .map_err(|e| RuntimeError::bad_file(path, format!("not a samebits receipt: {e}")))?;
        if receipt.format != FORMAT {
            return Err(RuntimeError::bad_file(
                path,
                format!("receipt format {:?} is not {FORMAT:?}", receipt.format),
            ));
        }
        Ok(receipt)
    }
}

/// One output's comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputCheck {
    pub name: String,
    pub expected: String,
    pub actual: Option<String>,
}

impl OutputCheck {
    pub fn matches(&self) -> bool {
        self.actual.as_deref() == Some(self.expected.as_str())
    }
}

/// The result of re-running a receipt.
#[derive(Clone, Debug, PartialEq)]
pub struct Verification {
    pub checks: Vec<OutputCheck>,
}

impl Verification {
    pub fn all_match(&self) -> bool {
        self.checks.iter().all(OutputCheck::matches)
    }
}

/// Re-runs the receipt at `path` on this machine's CPU. Errors (unusable receipt, a model or
/// input file that is missing or whose hash differs) are distinct from a completed verification
/// whose outputs differ.
pub fn verify(path: &Path) -> Result<Verification> {
    verify_on(path, Device::Cpu)
}

/// [`verify`] on `device`. The bits are compared whatever device the receipt was made on.
pub fn verify_on(path: &Path, device: Device) -> Result<Verification> {
    verify_runs_on(path, device, 1)
}

/// [`verify_on`] with the model compiled once and run `runs` times (at least once), each run's
/// outputs compared with the receipt: runs after the first go through the plan specialised to
/// the input shapes (`specialised.rs`). The files are checked once; the verification is of the
/// first run whose outputs differ from the first run's, else of the first run.
pub fn verify_runs_on(path: &Path, device: Device, runs: usize) -> Result<Verification> {
    verify_with(path, &mut |model_path, operation_set, inputs| {
        let compiled = compile(
            model_path,
            &CompileOptions {
                requires_reproducibility: operation_set.is_reproducible(),
                operation_set: Some(operation_set),
                device,
                ..Default::default()
            },
        )?;
        let hashes = |outputs: &BTreeMap<String, Value>| -> Vec<String> {
            outputs.values().map(sha256_value).collect()
        };
        let first: BTreeMap<String, Value> = compiled.run(inputs)?.into_iter().collect();
        let want = hashes(&first);
        for _ in 1..runs {
            let again: BTreeMap<String, Value> = compiled.run(inputs)?.into_iter().collect();
            if hashes(&again) != want {
                return Ok(again);
            }
        }
        Ok(first)
    })
}

/// The model, operation set and named inputs of a receipt's run, returning its named outputs.
pub type RunFn<'a> = dyn FnMut(&Path, OperationSet, &BTreeMap<String, Value>) -> Result<BTreeMap<String, Value>>
    + 'a;

/// [`verify`] with the run done by `run` (another executor, a pipeline of stages); the files
/// are checked first, the outputs compared after.
pub fn verify_with(path: &Path, run: &mut RunFn) -> Result<Verification> {
    let receipt = Receipt::read(path)?;
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let resolve = |p: &str| base.join(p);
    let check_file = |rec: &FileRecord, what: &str| -> Result<PathBuf> {
        let file = resolve(&rec.path);
        let actual = sha256_file(&file)?;
        if actual != rec.sha256 {
            return Err(RuntimeError::bad_file(
                &file,
                format!(
                    "{what} sha256 is {actual}, the receipt records {}",
                    rec.sha256
                ),
            ));
        }
        Ok(file)
    };
    let model_path = check_file(&receipt.model, "model")?;
    for f in &receipt.model_files {
        check_file(f, "external tensor file")?;
    }
    let mut inputs = BTreeMap::new();
    for rec in &receipt.inputs {
        let rel = rec.path.as_deref().ok_or_else(|| {
            RuntimeError::bad_file(path, format!("input \"{}\" records no file", rec.name))
        })?;
        let file = resolve(rel);
        let value = Value::Tensor(tensor_file::read_tensor(&file)?);
        let actual = sha256_value(&value);
        if actual != rec.sha256 {
            return Err(RuntimeError::bad_file(
                &file,
                format!(
                    "input \"{}\" sha256 is {actual}, the receipt records {}",
                    rec.name, rec.sha256
                ),
            ));
        }
        inputs.insert(rec.name.clone(), value);
    }
    let outputs = run(&model_path, receipt.operation_set, &inputs)?;
    let checks = receipt
        .outputs
        .iter()
        .map(|rec| OutputCheck {
            name: rec.name.clone(),
            expected: rec.sha256.clone(),
            actual: outputs.get(&rec.name).map(sha256_value),
        })
        .collect();
    Ok(Verification { checks })
}
