//! The compile API: [`compile`] a model (a path or an IR [`Model`]) with [`CompileOptions`] into
//! a [`CompiledModel`], leaving inspectable artifacts behind:
//!
//! - `NN-<pass>.json` / `NN-<pass>.dot`: the IR after each compiler pass;
//! - `plan.json`: the operation set, inputs, outputs and the ordered steps the run executes;
//! - `tensors/`: the model's external tensor files, copied (`colocate_tensors`) or symlinked.
//!
//! `artifacts_dir` defaults to a temporary directory, removed when the compiled model is dropped
//! unless the `SAMEBITS_DEBUG` environment variable is set.

use crate::device::{Device, Executor};
use crate::hashing::sha256_file;
use crate::specialised::Specialisations;
use crate::{Result, RuntimeError};
use samebits_ir::{Model, Value};
use samebits_ops::RunStats;
use samebits_ops::{OperationSet, Plan, RunOptions};
use samebits_passes::{PassReport, Pipeline};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Compile options, named after the API samebits mirrors.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Where artifacts go; a temporary directory when `None`.
    pub artifacts_dir: Option<PathBuf>,
    /// Copy external tensor files into the artifacts (`true`) instead of symlinking them.
    pub colocate_tensors: bool,
    /// Demand the `reproducible` operation set (the default). With `false`, the operation set
    /// defaults to `default`.
    pub requires_reproducibility: bool,
    /// An explicit operation set; must be `reproducible` when reproducibility is required.
    pub operation_set: Option<OperationSet>,
    /// Where the model runs (the CPU by default); results have the same bits on every device.
    pub device: Device,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            artifacts_dir: None,
            colocate_tensors: false,
            requires_reproducibility: true,
            operation_set: None,
            device: Device::Cpu,
        }
    }
}

impl CompileOptions {
    /// The operation set these options select, or an error when they contradict each other.
    pub fn resolved_operation_set(&self) -> Result<OperationSet> {
        match (self.requires_reproducibility, self.operation_set) {
            (true, Some(set)) if !set.is_reproducible() => Err(RuntimeError::Usage(format!(
                "operation set {set} does not keep the reproducibility promise; \
                     choose reproducible or turn requires_reproducibility off"
            ))),
            (true, set) => Ok(set.unwrap_or(OperationSet::Reproducible)),
            (false, set) => Ok(set.unwrap_or(OperationSet::Default)),
        }
    }
}

/// What to compile.
pub enum ModelSource {
    /// An ONNX file; external tensor files resolve against its folder.
    Path(PathBuf),
    /// A model already in IR form (built in code or by another importer).
    Model(Box<Model>),
}

impl From<&Path> for ModelSource {
    fn from(p: &Path) -> Self {
        ModelSource::Path(p.to_path_buf())
    }
}

impl From<PathBuf> for ModelSource {
    fn from(p: PathBuf) -> Self {
        ModelSource::Path(p)
    }
}

impl From<Model> for ModelSource {
    fn from(m: Model) -> Self {
        ModelSource::Model(Box::new(m))
    }
}

/// Where the artifacts of a compilation live.
#[derive(Debug)]
pub enum Artifacts {
    /// A directory the caller chose, or a temporary one kept for debugging.
    Kept(PathBuf),
    /// A temporary directory removed on drop.
    Temporary(tempfile::TempDir),
}

impl Artifacts {
    pub fn path(&self) -> &Path {
        match self {
            Artifacts::Kept(p) => p,
            Artifacts::Temporary(t) => t.path(),
        }
    }
}

/// A model ready to run.
#[derive(Debug)]
pub struct CompiledModel {
    pub model: Model,
    pub operation_set: OperationSet,
    /// The sha256 of the model file, when compiled from a file.
    pub model_sha256: Option<String>,
    /// The model file and its external tensor files, when compiled from a file.
    pub model_files: Vec<PathBuf>,
    pub passes: Vec<PassReport>,
    pub artifacts: Artifacts,
    executor: Executor,
    /// Plans specialised to the input shapes runs have used (`specialised.rs`).
    specialisations: Specialisations,
}

/// Imports (when given a path), optimises, plans and writes artifacts.
pub fn compile(source: impl Into<ModelSource>, options: &CompileOptions) -> Result<CompiledModel> {
    let operation_set = options.resolved_operation_set()?;
    let artifacts = match &options.artifacts_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| RuntimeError::io(dir, e))?;
            Artifacts::Kept(dir.clone())
        }
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("samebits-")
                .tempdir()
                .map_err(|e| RuntimeError::io(&std::env::temp_dir(), e))?;
            if std::env::var_os("SAMEBITS_DEBUG").is_some() {
                let kept = tmp.keep();
                eprintln!("samebits: artifacts kept in {}", kept.display());
                Artifacts::Kept(kept)
            } else {
                Artifacts::Temporary(tmp)
            }
        }
    };
    let (mut model, model_sha256, model_files) = match source.into() {
        ModelSource::Path(path) => {
            let proto = samebits_onnx::read_model_proto(&path)?;
            let folder = path.parent().unwrap_or(Path::new("")).to_path_buf();
            let externals: Vec<PathBuf> = samebits_onnx::external_data_files(&proto)
                .into_iter()
                .map(|rel| folder.join(rel))
                .collect();
            let model = samebits_onnx::model_from_proto(proto, Some(&folder))?;
            place_tensor_files(
                &externals,
                &path,
                artifacts.path(),
                options.colocate_tensors,
            )?;
            let mut files = vec![path.clone()];
            files.extend(externals);
            (model, Some(sha256_file(&path)?), files)
        }
        ModelSource::Model(model) => (*model, None, Vec::new()),
    };
    let passes = Pipeline {
        operation_set,
        dump_dir: Some(artifacts.path().to_path_buf()),
    }
    .run(&mut model)?;
    let plan = Plan::build(&model.graph, &model.opset_imports, operation_set, &[])?;
    let executor = Executor::new(Arc::new(plan), options.device)?;
    let specialisations = Specialisations::new(&model);
    let compiled = CompiledModel {
        model,
        operation_set,
        model_sha256,
        model_files,
        passes,
        artifacts,
        executor,
        specialisations,
    };
    compiled.write_plan()?;
    Ok(compiled)
}

/// Copies or symlinks external tensor files into `<artifacts>/tensors/`, keeping their paths
/// relative to the model's folder.
fn place_tensor_files(files: &[PathBuf], model: &Path, artifacts: &Path, copy: bool) -> Result<()> {
    let base = model.parent().unwrap_or(Path::new("."));
    for file in files {
        let rel = file.strip_prefix(base).unwrap_or(file);
        let dest = artifacts.join("tensors").join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| RuntimeError::io(parent, e))?;
        }
        let _ = std::fs::remove_file(&dest);
        let placed = if copy {
            std::fs::copy(file, &dest).map(|_| ())
        } else {
            let target = std::fs::canonicalize(file).map_err(|e| RuntimeError::io(file, e))?;
            symlink(&target, &dest)
        };
        placed.map_err(|e| RuntimeError::io(&dest, e))?;
    }
    Ok(())
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::fs::copy(target, link).map(|_| ())
}

impl CompiledModel {
    /// The names of the inputs a run needs, in order.
    pub fn input_names(&self) -> Vec<String> {
        self.executor
            .plan()
            .inputs()
            .map(|(n, _)| n.to_string())
            .collect()
    }

    /// The names of the outputs a run returns, in order.
    pub fn output_names(&self) -> Vec<String> {
        self.executor
            .plan()
            .output_names()
            .map(str::to_string)
            .collect()
    }

    /// Runs on named inputs; every model input must be given exactly once and no other name.
    pub fn run(&self, inputs: &BTreeMap<String, Value>) -> Result<Vec<(String, Value)>> {
        self.run_with(inputs, RunOptions::default())
    }

    /// [`CompiledModel::run`] with interpreter options (a per-step observer, for profiling).
    pub fn run_with(
        &self,
        inputs: &BTreeMap<String, Value>,
        options: RunOptions,
    ) -> Result<Vec<(String, Value)>> {
        Ok(self.run_counted(inputs, options)?.0)
    }

    /// [`CompiledModel::run_with`], with the GPU executor's counts of device and fallback steps
    /// (`None` on the CPU).
    #[allow(clippy::type_complexity)]
    pub fn run_counted(
        &self,
        inputs: &BTreeMap<String, Value>,
        options: RunOptions,
    ) -> Result<(Vec<(String, Value)>, Option<RunStats>)> {
        let ordered = self.ordered_inputs(inputs)?;
        let (outputs, stats) =
            self.specialisations
                .run(&self.model, &self.executor, ordered, options)?;
        Ok((
            self.output_names().into_iter().zip(outputs).collect(),
            stats,
        ))
    }

    /// The values of `inputs` in the order of the plan's inputs; an error for an unknown or a
    /// missing name.
    fn ordered_inputs(&self, inputs: &BTreeMap<String, Value>) -> Result<Vec<Value>> {
        for name in inputs.keys() {
            if !self.executor.plan().inputs().any(|(n, _)| n == name) {
                return Err(RuntimeError::Usage(format!(
                    "the model has no input named \"{name}\" (its inputs: {})",
                    self.input_names().join(", ")
                )));
            }
        }
        self.executor
            .plan()
            .inputs()
            .map(|(name, _)| {
                inputs
                    .get(name)
                    .cloned()
                    .ok_or_else(|| RuntimeError::Usage(format!("missing input \"{name}\"")))
            })
            .collect()
    }

    /// Where the model runs, as receipts record it (`cpu`, `cuda:0 (<GPU name>)`).
    pub fn device_description(&self) -> String {
        self.executor.description()
    }

    /// The step count of the compiled plan, and of the plan specialised to the shapes of
    /// `inputs` (`specialised.rs`) when runs with such inputs made one.
    pub fn step_counts(&self, inputs: &BTreeMap<String, Value>) -> Result<(usize, Option<usize>)> {
        let ordered = self.ordered_inputs(inputs)?;
        let steps = self.executor.plan().steps().len();
        Ok((steps, self.specialisations.steps_for(&ordered)))
    }

    /// The same compiled plan bound to another device (no recompilation).
    pub fn executor_on(&self, device: Device) -> Result<Executor> {
        Executor::new(Arc::clone(self.executor.plan()), device)
    }

    fn write_plan(&self) -> Result<()> {
        let path = self.artifacts.path().join("plan.json");
        let plan = serde_json::json!({
            "engine": crate::ENGINE,
            "operation_set": self.operation_set,
            "model_sha256": self.model_sha256,
            "inputs": self.executor.plan().inputs().map(|(n, t)| serde_json::json!({
                "name": n, "type": t.map(|t| t.to_string()),
            })).collect::<Vec<_>>(),
            "outputs": self.output_names(),
            "passes": self.passes.iter().map(|p| serde_json::json!({
                "pass": p.pass, "nodes_after": p.nodes_after, "note": p.note,
            })).collect::<Vec<_>>(),
            "steps": self.executor.plan().step_nodes().collect::<Vec<_>>(),
        });
        let text = serde_json::to_string_pretty(&plan).expect("plan serialises");
        std::fs::write(&path, text).map_err(|e| RuntimeError::io(&path, e))
    }
}
