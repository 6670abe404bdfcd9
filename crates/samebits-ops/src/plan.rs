//! [`Plan`]: a graph compiled for the CPU interpreter: op instances in topological order over
//! numbered value slots, with each slot freed after its last use.
//!
//! Subgraphs (If/Loop/Scan bodies) may read values of enclosing graphs; the plan builder finds
//! those free variables and hands them to the owning node as extra trailing inputs
//! ([`BuildContext::captures`]).

use crate::registry;
use crate::{BuildContext, Op, OpError, OperationSet, Result};
use rayon::prelude::*;
use samebits_ir::{Attribute, Dim, Graph, Node, OpsetImports, Value, ValueType};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

/// Called after each step with the step (its node's description, output names, ...) and its
/// outputs (tracing, dumps, shape specialisation); `Send` so that a run may move to a thread of
/// the rayon pool.
pub type StepObserver<'a> = &'a mut (dyn FnMut(&PlanStep<'_>, &[Value]) + Send);

/// Options for one [`Plan::run`].
#[derive(Default)]
pub struct RunOptions<'a> {
    pub observer: Option<StepObserver<'a>>,
}

#[derive(Debug)]
struct Step {
    /// Shared with the plans that [`Plan::build_sharing`] built from this one.
    op: Arc<dyn Op>,
    /// What the op was built from besides the node: its inputs' names, whether each is a
    /// constant, and their types.
    built_from: BuiltFrom,
    node: String,
    op_type: String,
    domain: String,
    inputs: Vec<Option<usize>>,
    outputs: Vec<usize>,
    /// The graph's names of the outputs.
    output_names: Vec<String>,
    /// Slots whose last reader is this step.
    release: Vec<usize>,
    /// Shape guards of a specialised plan ([`Plan::guard_shapes`]): an output index and the
    /// shape that output must have.
    guards: Vec<(usize, Vec<usize>)>,
}

/// The inputs a step's op was built for: two steps of one node built for the same inputs hold
/// the same op.
#[derive(Debug, PartialEq)]
struct BuiltFrom {
    inputs: Vec<String>,
    constant: Vec<bool>,
    types: Vec<Option<ValueType>>,
}

/// One step of a [`Plan`] as other executors see it (the CUDA executor runs the same steps,
/// choosing a device kernel by [`Op::device_kernel`] and falling back to [`Op::eval`]).
#[derive(Clone, Copy, Debug)]
pub struct PlanStep<'a> {
    /// The node's description (`Add node "add_1"`), as errors name it.
    pub node: &'a str,
    pub op_type: &'a str,
    pub domain: &'a str,
    /// The op instance, attributes parsed.
    pub op: &'a dyn Op,
    /// Value slots read, in the op's input order (`None`: an omitted optional input); captured
    /// outer values of subgraphs follow the node's own inputs.
    pub inputs: &'a [Option<usize>],
    /// Value slots written, in the op's output order.
    pub outputs: &'a [usize],
    /// The graph's names of the outputs, in the same order.
    pub output_names: &'a [String],
    /// Slots whose last reader is this step (free them after it).
    pub release: &'a [usize],
    /// Shape guards ([`Plan::guard_shapes`]): an output index and the shape it must have;
    /// executors check them with [`PlanStep::check_guards`].
    pub guards: &'a [(usize, Vec<usize>)],
}

impl Step {
    fn view(&self) -> PlanStep<'_> {
        PlanStep {
            node: &self.node,
            op_type: &self.op_type,
            domain: &self.domain,
            op: self.op.as_ref(),
            inputs: &self.inputs,
            outputs: &self.outputs,
            output_names: &self.output_names,
            release: &self.release,
            guards: &self.guards,
        }
    }
}

impl PlanStep<'_> {
    /// [`Op::eval`] of the step on its inputs' values `args`, errors naming the node, and an
    /// error when the op gives fewer outputs than the graph expects.
    pub fn eval(&self, args: &[Option<&Value>]) -> Result<Vec<Value>> {
        let outputs = self.op.eval(args).map_err(|e| e.at(self.node))?;
        if outputs.len() < self.outputs.len() {
            return Err(OpError::Invalid(format!(
                "{}: produced {} outputs, the graph expects {}",
                self.node,
                outputs.len(),
                self.outputs.len()
            )));
        }
        Ok(outputs)
    }

    /// Checks the step's shape guards, given the shape of the value of output `i` (`None`:
    /// not a tensor): an [`OpError::ShapeGuard`] naming the value when one differs.
    pub fn check_guards(
        &self,
        mut shape_of: impl FnMut(usize) -> Option<Vec<usize>>,
    ) -> Result<()> {
        for (output, expected) in self.guards {
            let got = shape_of(*output).unwrap_or_default();
            if got != *expected {
                return Err(OpError::ShapeGuard {
                    value: self.output_names[*output].clone(),
                    expected: expected.clone(),
                    got,
                }
                .at(self.node));
            }
        }
        Ok(())
    }
}

/// A graph ready to run on the CPU.
#[derive(Debug)]
pub struct Plan {
    steps: Vec<Step>,
    slot_count: usize,
    inputs: Vec<(String, usize, Option<ValueType>)>,
    outputs: Vec<(String, usize)>,
    /// Initializer values by slot (`None` for the other slots); runs borrow them, never copy.
    constants: Vec<Option<Value>>,
    /// The initializers' names and slots.
    constant_names: Vec<(String, usize)>,
    /// The promise its ops were built for.
    operation_set: OperationSet,
    /// [`Plan::independent_runs`], once a body run asked for them.
    independent_runs: OnceLock<Vec<std::ops::Range<usize>>>,
}

/// Names a graph's nodes read from enclosing scopes (recursively through nested subgraphs).
pub fn free_variables(graph: &Graph) -> BTreeSet<String> {
    let mut defined: BTreeSet<&str> = graph.inputs.iter().map(|v| v.name.as_str()).collect();
    defined.extend(graph.initializers.keys().map(String::as_str));
    for node in &graph.nodes {
        defined.extend(node.outputs.iter().map(String::as_str));
    }
    let mut free = BTreeSet::new();
    for node in &graph.nodes {
        for input in node.inputs.iter().filter(|n| !n.is_empty()) {
            if !defined.contains(input.as_str()) {
                free.insert(input.clone());
            }
        }
        for name in node_captures(node) {
            if !defined.contains(name.as_str()) {
                free.insert(name);
            }
        }
    }
    for out in &graph.outputs {
        if !defined.contains(out.name.as_str()) {
            free.insert(out.name.clone());
        }
    }
    free
}

/// Outer values read by the subgraphs of `node`.
pub fn node_captures(node: &Node) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for attr in node.attributes.values() {
        match attr {
            Attribute::Graph(g) => names.extend(free_variables(g)),
            Attribute::Graphs(gs) => gs.iter().for_each(|g| names.extend(free_variables(g))),
            _ => {}
        }
    }
    names
}

/// Orders nodes so that each comes after the producers of its inputs; errors on a cycle or on
/// an input nobody produces.
pub fn topological_order(graph: &Graph, available: &BTreeSet<String>) -> Result<Vec<usize>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for o in node.outputs.iter().filter(|o| !o.is_empty()) {
            if producer.insert(o.as_str(), i).is_some() {
                return Err(OpError::Invalid(format!(
                    "value \"{o}\" is produced by more than one node"
                )));
            }
        }
    }
    let deps: Vec<Vec<usize>> = graph
        .nodes
        .iter()
        .map(|node| {
            let mut reads: BTreeSet<String> = node
                .inputs
                .iter()
                .filter(|n| !n.is_empty())
                .cloned()
                .collect();
            reads.extend(node_captures(node));
            let mut d = Vec::new();
            for name in reads {
                match producer.get(name.as_str()) {
                    Some(&p) => d.push(p),
                    None if available.contains(&name) => {}
                    None => {
                        return Err(OpError::Invalid(format!(
                            "{}: input \"{name}\" is neither a graph input, an initializer nor \
                             the output of any node",
                            node.describe()
                        )));
                    }
                }
            }
            Ok(d)
        })
        .collect::<Result<_>>()?;
    // Depth-first post-order keeps the original order where it is already valid.
    let mut state = vec![0u8; graph.nodes.len()];
    let mut order = Vec::with_capacity(graph.nodes.len());
    for root in 0..graph.nodes.len() {
        let mut stack = vec![(root, 0usize)];
        while let Some((n, next)) = stack.pop() {
            if next == 0 {
                if state[n] == 2 {
                    continue;
                }
                if state[n] == 1 {
                    return Err(OpError::Invalid(format!(
                        "{} is part of a cycle",
                        graph.nodes[n].describe()
                    )));
                }
                state[n] = 1;
            }
            if let Some(&d) = deps[n].get(next) {
                stack.push((n, next + 1));
                if state[d] == 1 {
                    return Err(OpError::Invalid(format!(
                        "{} is part of a cycle",
                        graph.nodes[d].describe()
                    )));
                }
                if state[d] == 0 {
                    stack.push((d, 0));
                }
            } else {
                state[n] = 2;
                order.push(n);
            }
        }
    }
    Ok(order)
}

impl Plan {
    /// Compiles `graph`. `outer` lists the names this graph may read from enclosing scopes
    /// (empty for a main graph); they become trailing inputs of the plan, after the graph's
    /// own runtime inputs.
    pub fn build(
        graph: &Graph,
        opsets: &OpsetImports,
        operation_set: OperationSet,
        outer: &[String],
    ) -> Result<Plan> {
        Plan::build_sharing(graph, opsets, operation_set, outer, None)
    }

    /// [`Plan::build`], taking from `donor` (a plan of a graph this one derives from, in the
    /// same operation set: a shape specialisation) the op of each step whose node, by its
    /// first output, was built there for the same inputs, so that what an op prepares once
    /// (a packed constant matrix) is not prepared and held twice.
    pub fn build_sharing(
        graph: &Graph,
        opsets: &OpsetImports,
        operation_set: OperationSet,
        outer: &[String],
        donor: Option<&Plan>,
    ) -> Result<Plan> {
        let donated: HashMap<&str, &Step> = donor
            .filter(|d| d.operation_set == operation_set)
            .map(|d| {
                d.steps
                    .iter()
                    .filter_map(|s| Some((s.output_names.first()?.as_str(), s)))
                    .collect()
            })
            .unwrap_or_default();
        let mut slots: HashMap<String, usize> = HashMap::new();
        let mut next_slot = 0usize;
        let mut slot_of = |name: &str, slots: &mut HashMap<String, usize>| -> usize {
            *slots.entry(name.to_string()).or_insert_with(|| {
                next_slot += 1;
                next_slot - 1
            })
        };
        let mut constants = Vec::new();
        let mut constant_names = Vec::new();
        for (name, t) in &graph.initializers {
            let s = slot_of(name, &mut slots);
            constants.push((s, Value::Tensor(t.clone())));
            constant_names.push((name.clone(), s));
        }
        let mut constant_slots: Vec<Option<Value>> = Vec::new();
        let mut inputs = Vec::new();
        for vi in graph.runtime_inputs() {
            let s = slot_of(&vi.name, &mut slots);
            inputs.push((vi.name.clone(), s, vi.ty.clone()));
        }
        for name in outer {
            if !slots.contains_key(name) {
                let s = slot_of(name, &mut slots);
                inputs.push((name.clone(), s, None));
            }
        }
        let available: BTreeSet<String> = slots.keys().cloned().collect();
        let order = topological_order(graph, &available)?;
        let mut steps = Vec::with_capacity(order.len());
        for &n in &order {
            let node = &graph.nodes[n];
            let desc = node.describe();
            let captures: Vec<String> = node_captures(node).into_iter().collect();
            let input_types: Vec<Option<ValueType>> =
                node.inputs.iter().map(|i| graph.value_type(i)).collect();
            let constant_inputs: Vec<bool> = node
                .inputs
                .iter()
                .map(|i| graph.initializers.contains_key(i))
                .collect();
            let opset = registry::opset_of(opsets, &node.domain);
            let ctx = BuildContext {
                node,
                opset,
                operation_set,
                opsets,
                input_types: &input_types,
                constant_inputs: &constant_inputs,
                captures: &captures,
            };
            let built_from = BuiltFrom {
                inputs: node.inputs.clone(),
                constant: constant_inputs.clone(),
                types: input_types.clone(),
            };
            let same = |s: &&&Step| {
                s.op_type == node.op_type
                    && s.domain == node.domain
                    && s.output_names == node.outputs
                    && s.built_from == built_from
            };
            let op = match node.outputs.first().and_then(|o| donated.get(o.as_str())) {
                Some(step) if same(&step) && captures.is_empty() => Arc::clone(&step.op),
                _ => Arc::from(registry::global().build(&ctx).map_err(|e| e.at(&desc))?),
            };
            let mut step_inputs: Vec<Option<usize>> = node
                .inputs
                .iter()
                .map(|i| (!i.is_empty()).then(|| slot_of(i, &mut slots)))
                .collect();
            step_inputs.extend(captures.iter().map(|c| Some(slot_of(c, &mut slots))));
            let outputs = node
                .outputs
                .iter()
                .map(|o| slot_of(o, &mut slots))
                .collect();
            steps.push(Step {
                op,
                built_from,
                node: desc,
                op_type: node.op_type.clone(),
                domain: node.domain.clone(),
                inputs: step_inputs,
                outputs,
                output_names: node.outputs.clone(),
                release: Vec::new(),
                guards: Vec::new(),
            });
        }
        let mut outputs = Vec::new();
        for out in &graph.outputs {
            let s = *slots.get(&out.name).ok_or_else(|| {
                OpError::Invalid(format!(
                    "graph output \"{}\" is not produced by any node",
                    out.name
                ))
            })?;
            outputs.push((out.name.clone(), s));
        }
        // Release each intermediate slot after its last reader, unless it is a graph output.
        let keep: BTreeSet<usize> = outputs.iter().map(|(_, s)| *s).collect();
        let mut last_use: HashMap<usize, usize> = HashMap::new();
        for (i, step) in steps.iter().enumerate() {
            for s in step.inputs.iter().flatten().chain(&step.outputs) {
                last_use.insert(*s, i);
            }
        }
        for (slot, step) in last_use {
            if !keep.contains(&slot) {
                steps[step].release.push(slot);
            }
        }
        constant_slots.resize(slots.len(), None);
        for (slot, value) in constants {
            constant_slots[slot] = Some(value);
        }
        Ok(Plan {
            steps,
            slot_count: slots.len(),
            inputs,
            outputs,
            constants: constant_slots,
            constant_names,
            operation_set,
            independent_runs: OnceLock::new(),
        })
    }

    /// The initializers' names and value slots.
    pub fn constant_slots(&self) -> impl Iterator<Item = (&str, usize)> {
        self.constant_names.iter().map(|(n, s)| (n.as_str(), *s))
    }

    /// Makes the plan a specialisation: each named value must have the given shape when its
    /// step produces it, or the run stops with [`OpError::ShapeGuard`] (shape specialisation,
    /// samebits-passes' `specialization.rs`, folds values computed from shapes; a guard stands
    /// for a shape it assumed). An error when no step produces a named value.
    pub fn guard_shapes(&mut self, guards: &[(String, Vec<usize>)]) -> Result<()> {
        for (name, shape) in guards {
            let (step, output) = self
                .steps
                .iter_mut()
                .find_map(|step| {
                    let i = step.output_names.iter().position(|o| o == name)?;
                    Some((step, i))
                })
                .ok_or_else(|| {
                    OpError::Invalid(format!("no step of the plan produces \"{name}\""))
                })?;
            step.guards.push((output, shape.clone()));
        }
        Ok(())
    }

    /// The operation set the plan's ops were built for (other backends pick their kernels by
    /// it).
    pub fn operation_set(&self) -> OperationSet {
        self.operation_set
    }

    /// The names of the values `run` expects, in order, with their declared types.
    pub fn inputs(&self) -> impl Iterator<Item = (&str, Option<&ValueType>)> {
        self.inputs.iter().map(|(n, _, t)| (n.as_str(), t.as_ref()))
    }

    /// The names of the values `run` returns, in order.
    pub fn output_names(&self) -> impl Iterator<Item = &str> {
        self.outputs.iter().map(|(n, _)| n.as_str())
    }

    /// The description of each step's node, in execution order.
    pub fn step_nodes(&self) -> impl Iterator<Item = &str> {
        self.steps.iter().map(|s| s.node.as_str())
    }

    /// The steps in execution order, for executors other than [`Plan::run`].
    pub fn steps(&self) -> impl ExactSizeIterator<Item = PlanStep<'_>> {
        self.steps.iter().map(Step::view)
    }

    /// Number of value slots the steps address.
    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// The constant values (initializers) and the slots they live in.
    pub fn constants(&self) -> impl Iterator<Item = (usize, &Value)> {
        self.constants
            .iter()
            .enumerate()
            .filter_map(|(s, v)| v.as_ref().map(|v| (s, v)))
    }

    /// The slot of each input of [`Plan::inputs`], in order.
    pub fn input_slots(&self) -> impl Iterator<Item = usize> {
        self.inputs.iter().map(|(_, s, _)| *s)
    }

    /// The slot of each output of [`Plan::output_names`], in order.
    pub fn output_slots(&self) -> impl Iterator<Item = usize> {
        self.outputs.iter().map(|(_, s)| *s)
    }

    /// Checks `inputs` (in the order of [`Plan::inputs`]) as [`Plan::run`] does: their count,
    /// and each against its declared dtype and shape.
    pub fn check_inputs(&self, inputs: &[Value]) -> Result<()> {
        if inputs.len() != self.inputs.len() {
            return Err(OpError::Invalid(format!(
                "expected {} inputs, got {}",
                self.inputs.len(),
                inputs.len()
            )));
        }
        let mut bindings = HashMap::new();
        for ((name, _, ty), value) in self.inputs.iter().zip(inputs) {
            if let Some(ty) = ty {
                check_input(name, ty, value, &mut bindings)?;
            }
        }
        Ok(())
    }

    /// Runs the plan on `inputs` (in the order of [`Plan::inputs`]).
    pub fn run(&self, inputs: Vec<Value>, mut options: RunOptions) -> Result<Vec<Value>> {
        if inputs.len() != self.inputs.len() {
            return Err(OpError::Invalid(format!(
                "expected {} inputs ({}), got {}",
                self.inputs.len(),
                self.inputs
                    .iter()
                    .map(|(n, _, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                inputs.len()
            )));
        }
        let mut bindings = HashMap::new();
        for ((name, _, ty), value) in self.inputs.iter().zip(&inputs) {
            if let Some(ty) = ty {
                check_input(name, ty, value, &mut bindings)?;
            }
        }
        let mut slots = self.fed_slots(inputs);
        for step in &self.steps {
            let outputs = self.eval_step(step, &slots)?;
            step.view()
                .check_guards(|i| Some(outputs.get(i)?.as_tensor().ok()?.shape().to_vec()))?;
            if let Some(observer) = options.observer.as_mut() {
                observer(&step.view(), &outputs);
            }
            for (slot, value) in step.outputs.iter().zip(outputs) {
                slots[*slot] = Some(value);
            }
            for slot in &step.release {
                slots[*slot] = None;
            }
        }
        self.outputs_of(slots)
    }

    /// [`Plan::run`] for a fused op's body, on inputs its node's plan typed (not checked
    /// again): consecutive steps that read none of each other's outputs (the products of one
    /// normalized row) are evaluated at once on the thread pool, with the calling thread's ISA,
    /// then stored in order. Each op computes what it computes alone, so the bits are those of
    /// [`Plan::run`].
    pub fn run_body(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
        let mut slots = self.fed_slots(inputs);
        let isa = samebits_kernels::Isa::active();
        for range in self.independent_runs() {
            let group = &self.steps[range.clone()];
            let results: Vec<Result<Vec<Value>>> = match group {
                [step] => vec![self.eval_step(step, &slots)],
                _ => group
                    .par_iter()
                    .map(|step| samebits_kernels::with_isa(isa, || self.eval_step(step, &slots)))
                    .collect(),
            };
            for (step, outputs) in group.iter().zip(results) {
                for (slot, value) in step.outputs.iter().zip(outputs?) {
                    slots[*slot] = Some(value);
                }
            }
            for step in group {
                for slot in &step.release {
                    slots[*slot] = None;
                }
            }
        }
        self.outputs_of(slots)
    }

    /// The steps cut into runs of consecutive steps that read none of each other's outputs,
    /// worked out on the first [`Plan::run_body`] and kept.
    fn independent_runs(&self) -> &[std::ops::Range<usize>] {
        self.independent_runs.get_or_init(|| {
            let mut runs = Vec::new();
            let mut first = 0;
            let mut written = BTreeSet::new();
            for (i, step) in self.steps.iter().enumerate() {
                if step.inputs.iter().flatten().any(|s| written.contains(s)) {
                    runs.push(first..i);
                    first = i;
                    written.clear();
                }
                written.extend(step.outputs.iter().copied());
            }
            if first < self.steps.len() {
                runs.push(first..self.steps.len());
            }
            runs
        })
    }

    /// Value slots with the plan's inputs placed (constants are read from `self.constants`).
    fn fed_slots(&self, inputs: Vec<Value>) -> Vec<Option<Value>> {
        let mut slots: Vec<Option<Value>> = vec![None; self.slot_count];
        for ((_, slot, _), value) in self.inputs.iter().zip(inputs) {
            slots[*slot] = Some(value);
        }
        slots
    }

    /// Evaluates one step on the values of `slots` (and the constants).
    fn eval_step(&self, step: &Step, slots: &[Option<Value>]) -> Result<Vec<Value>> {
        let args: Vec<Option<&Value>> = step
            .inputs
            .iter()
            .map(|s| s.and_then(|s| slots[s].as_ref().or(self.constants[s].as_ref())))
            .collect();
        step.view().eval(&args)
    }

    /// The plan's outputs from the slots of a finished run.
    fn outputs_of(&self, slots: Vec<Option<Value>>) -> Result<Vec<Value>> {
        self.outputs
            .iter()
            .map(|(name, slot)| {
                let value = slots[*slot]
                    .clone()
                    .or_else(|| self.constants[*slot].clone());
                value.ok_or_else(|| {
                    OpError::Invalid(format!("graph output \"{name}\" was not computed"))
                })
            })
            .collect()
    }
}

/// Checks a fed value against its declared type: dtype, rank, known dims, and symbolic dims
/// bound consistently across inputs.
fn check_input(
    name: &str,
    ty: &ValueType,
    value: &Value,
    bindings: &mut HashMap<String, usize>,
) -> Result<()> {
    let (ValueType::Tensor { dtype, shape }, Value::Tensor(t)) = (ty, value) else {
        return Ok(());
    };
    if t.dtype() != *dtype {
        return Err(OpError::Invalid(format!(
            "input \"{name}\" has dtype {}, the model declares {dtype}",
            t.dtype()
        )));
    }
    let Some(shape) = shape else { return Ok(()) };
    let mismatch = || {
        OpError::Invalid(format!(
            "input \"{name}\" has shape {:?}, the model declares {shape}",
            t.shape()
        ))
    };
    if shape.rank() != t.rank() {
        return Err(mismatch());
    }
    for (dim, &actual) in shape.0.iter().zip(t.shape()) {
        match dim {
            Dim::Known(d) if *d != actual => return Err(mismatch()),
            // "?" and "" are anonymous (exporters write "?" for "any size"), not shared symbols.
            Dim::Symbol(s)
                if !matches!(s.as_str(), "" | "?")
                    && *bindings.entry(s.clone()).or_insert(actual) != actual =>
            {
                return Err(OpError::Invalid(format!(
                    "input \"{name}\" binds dim \"{s}\" to {actual}, another input bound it to {}",
                    bindings[s]
                )));
            }
            _ => {}
        }
    }
    Ok(())
}
