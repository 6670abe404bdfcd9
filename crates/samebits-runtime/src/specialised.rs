//! Runs a compiled model through plans specialised to its inputs' shapes (samebits-passes'
//! `specialization.rs`): exporters write dynamic axes as Shape / Gather / Concat arithmetic
//! that every run recomputes, and on a GPU each of those integer steps is a host round trip.
//!
//! The first run with a new set of input shapes runs the compiled plan, recording the shapes
//! of the values Shape / Size nodes read; the model is then specialised to them (those nodes
//! and the arithmetic after them become constants) and later runs with the same input shapes
//! use the specialised plan, bound to the same device. It shares the compiled plan's op of
//! every node built for the same inputs (what an op prepares once, a packed weight matrix, is
//! not prepared again) and, on a GPU, its uploaded weights. A run whose guarded value comes out
//! with another shape (a shape that depends on data) is rerun with the compiled plan, and that
//! set of shapes is not specialised again.
//! Specialised plans evaluate every data value with the same ops in the same order, so the
//! outputs have the same bits whichever plan ran (tested in samebits-passes and the CLI's
//! zoo test). Up to [`KEPT`] sets of shapes are kept per model, the least recently used
//! going first.

use crate::device::Executor;
use crate::{Result, RuntimeError};
use samebits_ir::{Model, Value};
use samebits_ops::{OperationSet, Plan, PlanStep, RunOptions, RunStats};
use samebits_passes::specialization::{shape_probes, specialize};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// How many sets of input shapes keep a specialised plan.
pub const KEPT: usize = 8;

/// Input shapes, in the order of the plan's inputs.
type Signature = Vec<Vec<usize>>;

/// The specialised plans of one compiled model.
#[derive(Debug)]
pub(crate) struct Specialisations {
    /// Values whose shapes the graph reads (empty: nothing to specialise).
    probes: BTreeSet<String>,
    /// Most recently used last; `None`: this set of shapes runs the compiled plan.
    plans: Mutex<Vec<(Signature, Option<Arc<Executor>>)>>,
}

impl Specialisations {
    pub(crate) fn new(model: &Model) -> Self {
        Specialisations {
            probes: shape_probes(model).into_iter().collect(),
            plans: Mutex::new(Vec::new()),
        }
    }

    /// The step count of the plan specialised to inputs of these shapes, if runs made one.
    pub(crate) fn steps_for(&self, inputs: &[Value]) -> Option<usize> {
        let signature = signature_of(inputs)?;
        let plans = self.plans.lock().expect("specialisations lock");
        let (_, executor) = plans.iter().find(|(s, _)| *s == signature)?;
        Some(executor.as_ref()?.plan().steps().len())
    }

    /// Runs `inputs` (in the order of the compiled plan's inputs) with the plan specialised to
    /// their shapes, making it on the first run with these shapes.
    pub(crate) fn run(
        &self,
        model: &Model,
        compiled: &Executor,
        inputs: Vec<Value>,
        mut options: RunOptions,
    ) -> Result<(Vec<Value>, Option<RunStats>)> {
        let signature = signature_of(&inputs).filter(|_| !self.probes.is_empty());
        let Some(signature) = signature else {
            return compiled.run_counted(inputs, options);
        };
        match self.lookup(&signature) {
            Some(Some(special)) => {
                let reborrowed = RunOptions {
                    observer: options.observer.as_mut().map(|o| &mut **o as _),
                };
                // Specialisation keeps the graph's inputs, so the order is the same.
                match special.run_counted(inputs.clone(), reborrowed) {
                    Err(RuntimeError::Op(e)) if e.is_shape_guard() => {
                        self.insert(signature, None);
                        compiled.run_counted(inputs, options)
                    }
                    result => result,
                }
            }
            Some(None) => compiled.run_counted(inputs, options),
            None => {
                let mut shapes: HashMap<String, Vec<usize>> = compiled
                    .plan()
                    .inputs()
                    .zip(&signature)
                    .map(|((name, _), shape)| (name.to_string(), shape.clone()))
                    .collect();
                let mut caller = options.observer;
                let mut record = |step: &PlanStep<'_>, outputs: &[Value]| {
                    for (name, value) in step.output_names.iter().zip(outputs) {
                        if let (true, Ok(t)) = (self.probes.contains(name), value.as_tensor()) {
                            shapes.insert(name.clone(), t.shape().to_vec());
                        }
                    }
                    if let Some(caller) = caller.as_mut() {
                        caller(step, outputs);
                    }
                };
                let recorded = RunOptions {
                    observer: Some(&mut record),
                };
                let result = compiled.run_counted(inputs, recorded)?;
                let special = specialised_executor(model, compiled, &shapes);
                if let Err(e) = &special
                    && std::env::var_os("SAMEBITS_DEBUG").is_some()
                {
                    eprintln!("samebits: no shape specialisation for {signature:?}: {e}");
                }
                self.insert(signature, special.ok().flatten().map(Arc::new));
                Ok(result)
            }
        }
    }

    fn lookup(&self, signature: &Signature) -> Option<Option<Arc<Executor>>> {
        let mut plans = self.plans.lock().expect("specialisations lock");
        let i = plans.iter().position(|(s, _)| s == signature)?;
        let entry = plans.remove(i);
        let executor = entry.1.clone();
        plans.push(entry);
        Some(executor)
    }

    fn insert(&self, signature: Signature, executor: Option<Arc<Executor>>) {
        let mut plans = self.plans.lock().expect("specialisations lock");
        plans.retain(|(s, _)| *s != signature);
        if plans.len() >= KEPT {
            plans.remove(0);
        }
        plans.push((signature, executor));
    }
}

/// The shapes of `inputs`; `None` when one is not a tensor (a sequence input).
fn signature_of(inputs: &[Value]) -> Option<Signature> {
    inputs
        .iter()
        .map(|v| Some(v.as_tensor().ok()?.shape().to_vec()))
        .collect()
}

/// The compiled model specialised to `shapes`, bound to the compiled plan's device, with its
/// guards; `None` when the specialisation changes nothing.
fn specialised_executor(
    model: &Model,
    compiled: &Executor,
    shapes: &HashMap<String, Vec<usize>>,
) -> Result<Option<Executor>> {
    let operation_set: OperationSet = compiled.plan().operation_set();
    let Some(special) = specialize(model, operation_set, shapes)? else {
        return Ok(None);
    };
    let graph = &special.model.graph;
    let opsets = &special.model.opset_imports;
    let donor = Some(compiled.plan().as_ref());
    let mut plan = Plan::build_sharing(graph, opsets, operation_set, &[], donor)?;
    plan.guard_shapes(&special.guards)?;
    Ok(Some(compiled.specialised(Arc::new(plan))))
}
