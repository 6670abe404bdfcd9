//! Sequence ops: SequenceConstruct, SequenceEmpty, SequenceAt, SequenceInsert, SequenceErase,
//! SequenceLength, SplitToSequence, ConcatFromSequence and SequenceMap. A sequence is a
//! [`Value::Sequence`] of tensors; these ops only move tensors and elements, never compute.
//!
//! Positions follow ONNX: negative positions count from the back; SequenceAt and SequenceErase
//! accept `-n..n`, SequenceInsert `-n..=n` (where `n` appends).

use super::cast::onnx_dtype;
use super::control_flow::Subgraph;
use crate::along_axis::{concat, narrow, stack};
use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, OpError, Result, bail, normalize_axis};
use samebits_ir::{DType, Shape, Tensor, Value, ValueType};

pub fn register(r: &mut Registry) {
    r.register("", "SequenceConstruct", |_| Ok(Box::new(SequenceConstruct)));
    r.register("", "SequenceEmpty", sequence_empty);
    r.register("", "SequenceAt", |_| Ok(Box::new(SequenceAt)));
    r.register("", "SequenceInsert", |_| Ok(Box::new(SequenceInsert)));
    r.register("", "SequenceErase", |_| Ok(Box::new(SequenceErase)));
    r.register("", "SequenceLength", |_| Ok(Box::new(SequenceLength)));
    r.register("", "SplitToSequence", split_to_sequence);
    r.register("", "ConcatFromSequence", concat_from_sequence);
    r.register("", "SequenceMap", sequence_map);
}

/// Input `i` as a sequence.
fn sequence<'a>(inputs: &'a Inputs, i: usize) -> Result<&'a [Tensor]> {
    match inputs.value(i)? {
        Value::Sequence(s) => Ok(s),
        other => bail!("input {i} must be a sequence, got a {}", other.kind()),
    }
}

/// The type of a sequence's elements, from the sequence's type.
fn element_type(ty: Option<&Option<ValueType>>) -> Option<ValueType> {
    match ty?.as_ref()? {
        ValueType::Sequence(t) => Some((**t).clone()),
        _ => None,
    }
}

/// Reads the position in input `i` (a one-element integer tensor) and resolves it against a
/// sequence of `len`; `len` itself is allowed when `allow_end` (insertion at the back).
fn position(inputs: &Inputs, i: usize, len: usize, allow_end: bool) -> Result<usize> {
    let t = inputs.tensor(i)?;
    if !matches!(t.dtype(), DType::I32 | DType::I64) {
        bail!(
            "input {i} (position) must be int32 or int64, got {}",
            t.dtype()
        );
    }
    let p = match t.to_i64_vec()?.as_slice() {
        [p] => *p,
        _ => bail!(
            "input {i} (position) must hold one value, has shape {:?}",
            t.shape()
        ),
    };
    let n = len as i64;
    let max = if allow_end { n } else { n - 1 };
    if p < -n || p > max {
        bail!(
            "position {p} is out of range [{}, {max}] for a sequence of length {len}",
            -n
        );
    }
    Ok(if p < 0 { p + n } else { p } as usize)
}

fn check_dtype(seq: &[Tensor], t: &Tensor) -> Result<()> {
    if let Some(first) = seq.first()
        && first.dtype() != t.dtype()
    {
        bail!(
            "tensor of dtype {} does not fit a sequence of {}",
            t.dtype(),
            first.dtype()
        );
    }
    Ok(())
}

#[derive(Debug)]
struct SequenceConstruct;

impl Op for SequenceConstruct {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().cloned().flatten().and_then(|t| t.dtype());
        Ok(vec![dtype.map(|d| {
            ValueType::Sequence(Box::new(ValueType::tensor(d, None)))
        })])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let mut seq = Vec::with_capacity(inputs.len());
        for i in 0..inputs.len() {
            let t = inputs.tensor(i)?;
            check_dtype(&seq, t).map_err(|e| OpError::Invalid(format!("input {i}: {e}")))?;
            seq.push(t.clone());
        }
        Ok(vec![Value::Sequence(seq)])
    }
}

/// SequenceEmpty: the dtype only types the (elementless) result.
#[derive(Debug)]
struct SequenceEmpty(DType);

fn sequence_empty(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let code = NodeArgs::new(ctx.node).int_or("dtype", 1)?;
    Ok(Box::new(SequenceEmpty(onnx_dtype(code, "dtype")?)))
}

impl Op for SequenceEmpty {
    fn infer(&self, _: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(ValueType::Sequence(Box::new(
            ValueType::tensor(self.0, None),
        )))])
    }

    fn eval(&self, _: &Inputs) -> Result<Vec<Value>> {
        Ok(vec![Value::Sequence(Vec::new())])
    }
}

#[derive(Debug)]
struct SequenceAt;

impl Op for SequenceAt {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![element_type(inputs.first())])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let seq = sequence(inputs, 0)?;
        let p = position(inputs, 1, seq.len(), false)?;
        Ok(vec![seq[p].clone().into()])
    }
}

#[derive(Debug)]
struct SequenceInsert;

impl Op for SequenceInsert {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let mut seq = sequence(inputs, 0)?.to_vec();
        let t = inputs.tensor(1)?;
        check_dtype(&seq, t).map_err(|e| OpError::Invalid(format!("input 1: {e}")))?;
        let p = match inputs.opt_tensor(2)? {
            Some(_) => position(inputs, 2, seq.len(), true)?,
            None => seq.len(),
        };
        seq.insert(p, t.clone());
        Ok(vec![Value::Sequence(seq)])
    }
}

#[derive(Debug)]
struct SequenceErase;

impl Op for SequenceErase {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let mut seq = sequence(inputs, 0)?.to_vec();
        if seq.is_empty() {
            bail!("cannot erase from an empty sequence");
        }
        let p = match inputs.opt_tensor(1)? {
            Some(_) => position(inputs, 1, seq.len(), false)?,
            None => seq.len() - 1,
        };
        seq.remove(p);
        Ok(vec![Value::Sequence(seq)])
    }
}

#[derive(Debug)]
struct SequenceLength;

impl Op for SequenceLength {
    fn infer(&self, _: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(ValueType::tensor(
            DType::I64,
            Some(Shape::known(&[])),
        ))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        Ok(vec![
            Tensor::scalar(sequence(inputs, 0)?.len() as i64).into(),
        ])
    }
}

/// SplitToSequence: pieces of input 0 along `axis`, sized by input 1 (`split`): a scalar
/// chunk size (the last piece takes the remainder), a list of lengths summing to the axis
/// size, or absent for pieces of size 1 (whose axis is dropped when `keepdims` is 0).
#[derive(Debug)]
struct SplitToSequence {
    axis: i64,
    keepdims: bool,
}

fn split_to_sequence(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    Ok(Box::new(SplitToSequence {
        axis: args.int_or("axis", 0)?,
        keepdims: args.int_or("keepdims", 1)? != 0,
    }))
}

impl Op for SplitToSequence {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().cloned().flatten().and_then(|t| t.dtype());
        Ok(vec![dtype.map(|d| {
            ValueType::Sequence(Box::new(ValueType::tensor(d, None)))
        })])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let axis = normalize_axis(self.axis, x.rank())
            .map_err(|e| OpError::Invalid(format!("attribute \"axis\": {e}")))?;
        let dim = x.shape()[axis];
        let split = inputs.opt_tensor(1)?;
        let lengths: Vec<usize> = match split {
            None => vec![1; dim],
            Some(s) => {
                let values = s
                    .to_i64_vec()
                    .map_err(|e| OpError::Invalid(format!("input 1 (split): {e}")))?;
                if s.rank() == 0 {
                    let chunk = values[0];
                    if chunk <= 0 {
                        bail!("input 1 (split) is {chunk}, a chunk size must be positive");
                    }
                    let chunk = chunk as usize;
                    let mut lengths = vec![chunk; dim / chunk];
                    if dim % chunk != 0 {
                        lengths.push(dim % chunk);
                    }
                    lengths
                } else {
                    if s.rank() != 1 || values.iter().any(|&v| v < 0) {
                        bail!(
                            "input 1 (split) must be a scalar or a list of lengths >= 0, got {values:?}"
                        );
                    }
                    if values.iter().sum::<i64>() != dim as i64 {
                        bail!(
                            "input 1 (split) lengths {values:?} do not sum to {dim}, the size of axis {axis}"
                        );
                    }
                    values.into_iter().map(|v| v as usize).collect()
                }
            }
        };
        let drop_axis = split.is_none() && !self.keepdims;
        let mut start = 0;
        let mut pieces = Vec::with_capacity(lengths.len());
        for len in lengths {
            let mut piece = narrow(x, axis, start, len)?;
            if drop_axis {
                let mut shape = piece.shape().to_vec();
                shape.remove(axis);
                piece = piece.reshaped(shape)?;
            }
            pieces.push(piece);
            start += len;
        }
        Ok(vec![Value::Sequence(pieces)])
    }
}

/// ConcatFromSequence: concatenates along `axis`, or stacks along a new `axis` (`new_axis`).
#[derive(Debug)]
struct ConcatFromSequence {
    axis: i64,
    new_axis: bool,
}

fn concat_from_sequence(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let new_axis = match args.int_or("new_axis", 0)? {
        0 => false,
        1 => true,
        other => bail!("attribute \"new_axis\" must be 0 or 1, got {other}"),
    };
    Ok(Box::new(ConcatFromSequence {
        axis: args.req_int("axis")?,
        new_axis,
    }))
}

impl Op for ConcatFromSequence {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = element_type(inputs.first()).and_then(|t| t.dtype());
        Ok(vec![dtype.map(|d| ValueType::tensor(d, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let seq = sequence(inputs, 0)?;
        let Some(first) = seq.first() else {
            bail!("cannot concatenate an empty sequence");
        };
        let rank = first.rank() + usize::from(self.new_axis);
        let axis = normalize_axis(self.axis, rank)
            .map_err(|e| OpError::Invalid(format!("attribute \"axis\": {e}")))?;
        let parts: Vec<&Tensor> = seq.iter().collect();
        let out = if self.new_axis {
            stack(&parts, axis)?
        } else {
            concat(&parts, axis)?
        };
        Ok(vec![out.into()])
    }
}

/// SequenceMap: runs `body` once per element of the input sequence; additional inputs are
/// sequences of the same length (element `i` goes to run `i`) or tensors (the same for every
/// run). Each body output is collected into an output sequence.
#[derive(Debug)]
struct SequenceMap {
    body: Subgraph,
    declared_inputs: usize,
}

fn sequence_map(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let body = Subgraph::build(ctx, "body")?;
    let declared_inputs = ctx.node.inputs.len();
    if body.input_count != declared_inputs {
        bail!(
            "body declares {} inputs, the node has {declared_inputs}",
            body.input_count
        );
    }
    if ctx.node.outputs.len() > body.output_count() {
        bail!(
            "the node has {} outputs, its body {}",
            ctx.node.outputs.len(),
            body.output_count()
        );
    }
    Ok(Box::new(SequenceMap {
        body,
        declared_inputs,
    }))
}

impl Op for SequenceMap {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let length = sequence(inputs, 0)?.len();
        for i in 1..self.declared_inputs {
            if let Value::Sequence(s) = inputs.value(i)?
                && s.len() != length
            {
                bail!(
                    "input {i} is a sequence of length {}, input 0 has length {length}",
                    s.len()
                );
            }
        }
        let captures = &inputs[self.declared_inputs..];
        let mut outputs: Vec<Vec<Tensor>> = vec![Vec::new(); self.body.output_count()];
        for step in 0..length {
            let arguments = (0..self.declared_inputs)
                .map(|i| {
                    Ok(match inputs.value(i)? {
                        Value::Sequence(s) => s[step].clone().into(),
                        other => other.clone(),
                    })
                })
                .collect::<Result<Vec<Value>>>()?;
            for (k, (out, value)) in outputs
                .iter_mut()
                .zip(self.body.run(&arguments, captures)?)
                .enumerate()
            {
                let t = value
                    .into_tensor()
                    .map_err(|e| OpError::Invalid(format!("body output {k}: {e}")))?;
                out.push(t);
            }
        }
        Ok(outputs.into_iter().map(Value::Sequence).collect())
    }
}
