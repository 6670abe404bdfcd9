//! Control flow: If, Loop and Scan (opset 9+ form), and [`Subgraph`], the compiled body graph
//! these ops and SequenceMap run. Bodies are compiled into sub-[`Plan`]s once, when the node is
//! built, against the model's opsets and the node's operation set; outer-scope values a body
//! reads arrive as the node's trailing capture inputs ([`BuildContext::captures`]).
//!
//! No arithmetic happens here: results are the bodies' results, moved and stacked.

use crate::along_axis::{index_axis, stack};
use crate::registry::Registry;
use crate::{
    BuildContext, Inputs, InputsExt, NodeArgs, Op, OpError, Plan, Result, RunOptions, bail,
    normalize_axis, unsupported,
};
use samebits_ir::limits::{max_loop_iterations, max_tensor_bytes};
use samebits_ir::{DType, Graph, Tensor, Value, ValueType};

pub fn register(r: &mut Registry) {
    r.register("", "If", if_op);
    r.register("", "Loop", loop_op);
    r.register("", "Scan", scan_op);
}

/// Where one input of a compiled body comes from when it runs.
#[derive(Debug)]
enum Source {
    /// The body's own input at this position (what the op feeds each run).
    Argument(usize),
    /// The node's capture at this position (an outer-scope value), and its name.
    Capture(usize, String),
}

/// A graph attribute compiled into a plan, with the routing of its inputs.
#[derive(Debug)]
pub(super) struct Subgraph {
    attribute: String,
    plan: Plan,
    sources: Vec<Source>,
    /// Declared input count: the arity of [`Subgraph::run`]'s `arguments`.
    pub(super) input_count: usize,
    /// Declared output types, in order (`None` where undeclared).
    pub(super) output_types: Vec<Option<ValueType>>,
}

impl Subgraph {
    /// Compiles the graph attribute `attribute` of `ctx.node`.
    pub(super) fn build(ctx: &BuildContext, attribute: &str) -> Result<Subgraph> {
        let graph: &Graph = NodeArgs::new(ctx.node).graph(attribute)?;
        let plan = Plan::build(graph, ctx.opsets, ctx.operation_set, ctx.captures)?;
        let sources = plan
            .inputs()
            .map(|(name, _)| {
                if let Some(k) = graph.inputs.iter().position(|v| v.name == name) {
                    Ok(Source::Argument(k))
                } else if let Some(j) = ctx.captures.iter().position(|c| c == name) {
                    Ok(Source::Capture(j, name.to_string()))
                } else {
                    bail!("subgraph \"{attribute}\" reads \"{name}\", which is not in scope")
                }
            })
            .collect::<Result<_>>()?;
        Ok(Subgraph {
            attribute: attribute.to_string(),
            plan,
            sources,
            input_count: graph.inputs.len(),
            output_types: graph.outputs.iter().map(|o| o.ty.clone()).collect(),
        })
    }

    pub(super) fn output_count(&self) -> usize {
        self.output_types.len()
    }

    /// Runs the body on its declared inputs `arguments` and the node's `captures`.
    pub(super) fn run(&self, arguments: &[Value], captures: &Inputs) -> Result<Vec<Value>> {
        if arguments.len() != self.input_count {
            bail!(
                "subgraph \"{}\" declares {} inputs, it was given {}",
                self.attribute,
                self.input_count,
                arguments.len()
            );
        }
        let fed = self
            .sources
            .iter()
            .map(|source| match source {
                Source::Argument(k) => Ok(arguments[*k].clone()),
                Source::Capture(j, name) => {
                    captures.get(*j).copied().flatten().cloned().ok_or_else(|| {
                        OpError::Invalid(format!(
                            "subgraph \"{}\": outer value \"{name}\" has no value",
                            self.attribute
                        ))
                    })
                }
            })
            .collect::<Result<Vec<_>>>()?;
        self.plan.run(fed, RunOptions::default())
    }
}

/// The value of a one-element bool tensor (a condition).
fn condition(value: &Value, what: &str) -> Result<bool> {
    let t = value
        .as_tensor()
        .map_err(|e| OpError::Invalid(format!("{what}: {e}")))?;
    match t.as_bools() {
        Ok([b]) => Ok(*b != 0),
        _ => bail!(
            "{what} must be a bool tensor with one element, got {} {:?}",
            t.dtype(),
            t.shape()
        ),
    }
}

/// Stacks one scan output's per-iteration tensors along the new axis `axis` (as written in the
/// node: negative counts from the end of the stacked rank). With no iterations the result is
/// empty, its dtype and remaining dims taken from the body's declared output type.
fn stack_scan_output(
    elements: &[Tensor],
    axis: i64,
    declared: Option<&ValueType>,
    what: &str,
) -> Result<Tensor> {
    match elements.first() {
        Some(first) => {
            let axis = normalize_axis(axis, first.rank() + 1)?;
            stack(&elements.iter().collect::<Vec<_>>(), axis)
                .map_err(|e| OpError::Invalid(format!("{what}: {e}")))
        }
        None => {
            let Some(ValueType::Tensor { dtype, shape }) = declared else {
                bail!("{what} is empty and the body does not declare its type");
            };
            let mut dims: Vec<usize> = shape
                .as_ref()
                .map(|s| s.0.iter().map(|d| d.known().unwrap_or(0)).collect())
                .unwrap_or_default();
            let axis = normalize_axis(axis, dims.len() + 1)?;
            dims.insert(axis, 0);
            empty_tensor(*dtype, dims)
        }
    }
}

fn empty_tensor(dtype: DType, shape: Vec<usize>) -> Result<Tensor> {
    Ok(match dtype {
        DType::String => Tensor::from_strings(shape, Vec::new())?,
        d => Tensor::from_le_bytes(d, shape, &[])?,
    })
}

/// If: runs `then_branch` or `else_branch` on the captures.
#[derive(Debug)]
struct If {
    then_branch: Subgraph,
    else_branch: Subgraph,
    declared_inputs: usize,
}

fn if_op(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let outputs = ctx.node.outputs.len();
    let branch = |name: &str| -> Result<Subgraph> {
        let g = Subgraph::build(ctx, name)?;
        if g.input_count != 0 {
            bail!(
                "{name} declares {} inputs, If branches take none",
                g.input_count
            );
        }
        if g.output_count() != outputs {
            bail!(
                "{name} has {} outputs, the If node {outputs}",
                g.output_count()
            );
        }
        Ok(g)
    };
    Ok(Box::new(If {
        then_branch: branch("then_branch")?,
        else_branch: branch("else_branch")?,
        declared_inputs: ctx.node.inputs.len(),
    }))
}

impl Op for If {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let branch = if condition(inputs.value(0)?, "input 0 (cond)")? {
            &self.then_branch
        } else {
            &self.else_branch
        };
        branch.run(&[], &inputs[self.declared_inputs..])
    }
}

/// The per-iteration elements of a Loop's or Scan's scan outputs, collected for stacking. The
/// stacked output is as large as all its elements together, so that sum is bounded as it grows
/// (`samebits_ir::limits`), not once the body has run for every iteration.
struct ScanElements {
    elements: Vec<Vec<Tensor>>,
    bytes: Vec<u64>,
}

impl ScanElements {
    fn new(outputs: usize) -> ScanElements {
        ScanElements {
            elements: vec![Vec::new(); outputs],
            bytes: vec![0; outputs],
        }
    }

    /// Adds one iteration's element of scan output `k`.
    fn push(&mut self, k: usize, value: Value) -> Result<()> {
        let t = value
            .into_tensor()
            .map_err(|e| OpError::Invalid(format!("body scan output {k}: {e}")))?;
        self.bytes[k] += (t.numel() as u64).saturating_mul(t.dtype().size().max(1) as u64);
        if self.bytes[k] > max_tensor_bytes() {
            bail!(
                "scan output {k} would exceed {} bytes after {} iterations (the limit \
                 SAMEBITS_MAX_TENSOR_BYTES sets)",
                max_tensor_bytes(),
                self.elements[k].len() + 1
            );
        }
        self.elements[k].push(t);
        Ok(())
    }
}

/// Loop: `M` (max trip count) and `cond` bound the iterations; the body maps
/// `(iteration_num, cond, carried...)` to `(cond, carried..., scan_elements...)`.
#[derive(Debug)]
struct Loop {
    body: Subgraph,
    carried: usize,
    scan_outputs: usize,
    has_trip_count: bool,
    has_condition: bool,
    declared_inputs: usize,
}

fn loop_op(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let node = ctx.node;
    let present = |i: usize| node.inputs.get(i).is_some_and(|n| !n.is_empty());
    let (has_trip_count, has_condition) = (present(0), present(1));
    if !has_trip_count && !has_condition {
        bail!("Loop has neither input M (trip count) nor cond, so it would never end");
    }
    let carried = node.inputs.len().saturating_sub(2);
    let body = Subgraph::build(ctx, "body")?;
    if body.input_count != carried + 2 {
        bail!(
            "body declares {} inputs, expected {} (iteration_num, cond and {carried} carried values)",
            body.input_count,
            carried + 2
        );
    }
    if body.output_count() < carried + 1 {
        bail!(
            "body has {} outputs, expected at least {} (cond and {carried} carried values)",
            body.output_count(),
            carried + 1
        );
    }
    let scan_outputs = body.output_count() - 1 - carried;
    if node.outputs.len() > carried + scan_outputs {
        bail!(
            "Loop has {} outputs, its body yields {carried} carried values and {scan_outputs} \
             scan outputs",
            node.outputs.len()
        );
    }
    Ok(Box::new(Loop {
        body,
        carried,
        scan_outputs,
        has_trip_count,
        has_condition,
        declared_inputs: node.inputs.len(),
    }))
}

impl Op for Loop {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let trip_count = if self.has_trip_count {
            let m = inputs.tensor(0)?;
            match m.to_i64_vec()?.as_slice() {
                [m] => Some(*m),
                _ => bail!(
                    "input 0 (M) must hold one integer, has shape {:?}",
                    m.shape()
                ),
            }
        } else {
            None
        };
        let mut keep_going = if self.has_condition {
            condition(inputs.value(1)?, "input 1 (cond)")?
        } else {
            true
        };
        let captures = &inputs[self.declared_inputs..];
        let mut carried: Vec<Value> = (2..2 + self.carried)
            .map(|i| inputs.value(i).cloned())
            .collect::<Result<_>>()?;
        let mut scans = ScanElements::new(self.scan_outputs);
        let max_iterations = max_loop_iterations();
        let mut iteration = 0i64;
        while keep_going && trip_count.is_none_or(|m| iteration < m) {
            if iteration as u64 >= max_iterations {
                bail!(
                    "Loop would run more than {max_iterations} iterations (the limit \
                     SAMEBITS_MAX_LOOP_ITERATIONS sets; M = {})",
                    trip_count.map_or("absent".to_string(), |m| m.to_string())
                );
            }
            let mut arguments = vec![
                Tensor::scalar(iteration).into(),
                Tensor::from_bools(vec![], vec![keep_going])?.into(),
            ];
            arguments.append(&mut carried);
            let mut outputs = self.body.run(&arguments, captures)?.into_iter();
            let cond_out = outputs.next().expect("body output count checked at build");
            if self.has_condition {
                keep_going = condition(&cond_out, "body output 0 (cond)")?;
            }
            carried = outputs.by_ref().take(self.carried).collect();
            for (k, value) in outputs.enumerate() {
                scans.push(k, value)?;
            }
            iteration += 1;
        }
        let mut results = carried;
        for (k, scan) in scans.elements.iter().enumerate() {
            let declared = self.body.output_types[1 + self.carried + k].as_ref();
            let what = format!("scan output {k}");
            results.push(stack_scan_output(scan, 0, declared, &what)?.into());
        }
        Ok(results)
    }
}

/// Scan (opset 9+): iterates the body over slices of the scan inputs along their scan axes,
/// threading the state values and stacking the per-iteration scan outputs.
#[derive(Debug)]
struct Scan {
    body: Subgraph,
    states: usize,
    input_axes: Vec<i64>,
    input_reversed: Vec<bool>,
    output_axes: Vec<i64>,
    output_reversed: Vec<bool>,
    declared_inputs: usize,
}

/// A per-scan-input or per-scan-output int list attribute: `count` values, default 0.
fn per_scan(args: &NodeArgs, name: &str, count: usize) -> Result<Vec<i64>> {
    match args.ints(name)? {
        None => Ok(vec![0; count]),
        Some(v) if v.len() == count => Ok(v),
        Some(v) => bail!(
            "attribute \"{name}\" has {} values, expected {count}",
            v.len()
        ),
    }
}

fn directions(args: &NodeArgs, name: &str, count: usize) -> Result<Vec<bool>> {
    per_scan(args, name, count)?
        .into_iter()
        .map(|d| match d {
            0 => Ok(false),
            1 => Ok(true),
            other => bail!("attribute \"{name}\" holds {other}, directions are 0 or 1"),
        })
        .collect()
}

fn scan_op(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    if ctx.opset < 9 {
        unsupported!("Scan-8 (batched, with sequence_lens) is not implemented; opset 9+ only");
    }
    let args = NodeArgs::new(ctx.node);
    let declared_inputs = ctx.node.inputs.len();
    let scan_inputs = args.req_int("num_scan_inputs")?;
    if scan_inputs < 1 || scan_inputs as usize > declared_inputs {
        bail!(
            "attribute \"num_scan_inputs\" is {scan_inputs}, the node has {declared_inputs} inputs"
        );
    }
    let scan_inputs = scan_inputs as usize;
    let states = declared_inputs - scan_inputs;
    let body = Subgraph::build(ctx, "body")?;
    if body.input_count != declared_inputs {
        bail!(
            "body declares {} inputs, expected {states} states + {scan_inputs} scan inputs",
            body.input_count
        );
    }
    if body.output_count() < states {
        bail!(
            "body has {} outputs, fewer than the {states} states",
            body.output_count()
        );
    }
    let scan_outputs = body.output_count() - states;
    Ok(Box::new(Scan {
        input_axes: per_scan(&args, "scan_input_axes", scan_inputs)?,
        input_reversed: directions(&args, "scan_input_directions", scan_inputs)?,
        output_axes: per_scan(&args, "scan_output_axes", scan_outputs)?,
        output_reversed: directions(&args, "scan_output_directions", scan_outputs)?,
        body,
        states,
        declared_inputs,
    }))
}

impl Op for Scan {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let mut states: Vec<Value> = (0..self.states)
            .map(|i| inputs.value(i).cloned())
            .collect::<Result<_>>()?;
        let mut sequences = Vec::with_capacity(self.input_axes.len());
        let mut length = None;
        for (j, &axis) in self.input_axes.iter().enumerate() {
            let i = self.states + j;
            let t = inputs.tensor(i)?;
            let axis = normalize_axis(axis, t.rank())
                .map_err(|e| OpError::Invalid(format!("scan_input_axes[{j}]: {e}")))?;
            let n = t.shape()[axis];
            match length {
                None => length = Some(n),
                Some(len) if len != n => bail!(
                    "scan input {j} (input {i}) has {n} steps along axis {axis}, scan input 0 \
                     has {len}"
                ),
                _ => {}
            }
            sequences.push((t, axis));
        }
        let length = length.unwrap_or(0);
        let captures = &inputs[self.declared_inputs..];
        let mut scans = ScanElements::new(self.output_axes.len());
        for step in 0..length {
            let mut arguments = std::mem::take(&mut states);
            for (&(t, axis), &reversed) in sequences.iter().zip(&self.input_reversed) {
                let index = if reversed { length - 1 - step } else { step };
                arguments.push(index_axis(t, axis, index)?.into());
            }
            let mut outputs = self.body.run(&arguments, captures)?.into_iter();
            states = outputs.by_ref().take(self.states).collect();
            for (k, value) in outputs.enumerate() {
                scans.push(k, value)?;
            }
        }
        let mut results = states;
        for (k, mut scan) in scans.elements.into_iter().enumerate() {
            if self.output_reversed[k] {
                scan.reverse();
            }
            let declared = self.body.output_types[self.states + k].as_ref();
            let what = format!("scan output {k}");
            results.push(stack_scan_output(&scan, self.output_axes[k], declared, &what)?.into());
        }
        Ok(results)
    }
}
