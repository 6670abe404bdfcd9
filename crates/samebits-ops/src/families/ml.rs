//! Ops of the `ai.onnx.ml` domain: LabelEncoder (opsets 1 to 4), Binarizer and
//! ArrayFeatureExtractor (opset 1).
//!
//! LabelEncoder looks every element up in a key → value table given by attributes
//! (`keys_*` / `values_*`, or `keys_tensor` / `values_tensor` from opset 4) and writes the
//! value, or the default for a missing key. No arithmetic: values are copied as they are, so
//! the result is the same everywhere. Float keys compare by value, `-0.0` equal to `+0.0` and
//! every NaN equal to every NaN.
//!
//! Binarizer writes 1 where an element is greater than the `threshold` attribute (default 0;
//! compared exactly, as float64 for every input dtype) and 0 elsewhere, NaN included, in the
//! input's dtype. ArrayFeatureExtractor copies the elements at the given indices of the last
//! axis: output shape `X.shape[..-1] + [number of indices]` (`[1, number]` for a 1-D `X`, as
//! ONNX Runtime does); an index outside `0 .. X.shape[-1]` is an error naming it.

use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Tensor, Value, ValueType};
use std::collections::HashMap;

pub fn register(r: &mut Registry) {
    r.register("ai.onnx.ml", "LabelEncoder", LabelEncoder::build);
    r.register("ai.onnx.ml", "Binarizer", Binarizer::build);
    r.register(
        "ai.onnx.ml",
        "ArrayFeatureExtractor",
        ArrayFeatureExtractor::build,
    );
}

/// A key as the table compares it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Text(String),
    Int(i64),
    /// The bits of the f64 value, `-0.0` and NaNs canonicalized.
    Float(u64),
}

/// The keys of a tensor's elements, in order.
fn keys_of(t: &Tensor, what: &str) -> Result<Vec<Key>> {
    let dtype = t.dtype();
    Ok(match dtype {
        DType::String => t.as_strings()?.iter().cloned().map(Key::Text).collect(),
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => t
            .to_f64_vec()?
            .into_iter()
            .map(|v| {
                let v = if v.is_nan() { f64::NAN } else { v + 0.0 };
                Key::Float(v.to_bits())
            })
            .collect(),
        DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8 | DType::U16 | DType::U32 => {
            t.to_i64_vec()?.into_iter().map(Key::Int).collect()
        }
        other => unsupported!("LabelEncoder {what} of dtype {other}"),
    })
}

#[derive(Debug)]
struct LabelEncoder {
    keys: Tensor,
    values: Tensor,
    /// One element of the values' dtype.
    default: Tensor,
    table: HashMap<Key, usize>,
}

/// The one tensor of the `keys_*` (or `values_*`) attributes that is set.
fn table_tensor(args: &NodeArgs, kind: &str) -> Result<Tensor> {
    let mut found = Vec::new();
    if let Some(s) = args.strings(&format!("{kind}_strings"))? {
        found.push(Tensor::from_strings(vec![s.len()], s)?);
    }
    if let Some(v) = args.ints(&format!("{kind}_int64s"))? {
        found.push(Tensor::from_vec(vec![v.len()], v)?);
    }
    if let Some(v) = args.floats(&format!("{kind}_floats"))? {
        found.push(Tensor::from_vec(vec![v.len()], v)?);
    }
    if let Some(t) = args.tensor(&format!("{kind}_tensor"))? {
        found.push(t.reshaped(vec![t.numel()])?);
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        n => bail!(
            "LabelEncoder: exactly one of the attributes {kind}_strings, {kind}_int64s, \
             {kind}_floats and {kind}_tensor must be set, got {n}"
        ),
    }
}

impl LabelEncoder {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let keys = table_tensor(&args, "keys")?;
        let values = table_tensor(&args, "values")?;
        if keys.numel() != values.numel() {
            bail!(
                "LabelEncoder: {} keys but {} values",
                keys.numel(),
                values.numel()
            );
        }
        let default = match args.tensor("default_tensor")? {
            Some(t) if t.numel() == 1 && t.dtype() == values.dtype() => t.reshaped(vec![])?,
            Some(t) => bail!(
                "LabelEncoder: attribute \"default_tensor\" must be one {} element, got {} of \
                 shape {:?}",
                values.dtype(),
                t.dtype(),
                t.shape()
            ),
            None => match values.dtype() {
                DType::String => Tensor::from_strings(
                    vec![],
                    vec![args.string_or("default_string", "_Unused".into())?],
                )?,
                DType::I64 => Tensor::scalar(args.int_or("default_int64", -1)?),
                DType::F32 => Tensor::scalar(args.float_or("default_float", -0.0)?),
                other => bail!(
                    "LabelEncoder: values of dtype {other} need the attribute \"default_tensor\""
                ),
            },
        };
        let mut table = HashMap::new();
        for (i, key) in keys_of(&keys, "keys")?.into_iter().enumerate() {
            // The first of repeated keys wins.
            table.entry(key).or_insert(i);
        }
        Ok(Box::new(LabelEncoder {
            keys,
            values,
            default,
            table,
        }))
    }
}

impl Op for LabelEncoder {
    fn infer(&self, _: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(ValueType::tensor(self.values.dtype(), None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let key_kind = |d: DType| match d {
            DType::String => 0,
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 => 1,
            _ => 2,
        };
        if key_kind(x.dtype()) != key_kind(self.keys.dtype()) {
            bail!(
                "LabelEncoder: input 0 of dtype {} does not match the keys' dtype {}",
                x.dtype(),
                self.keys.dtype()
            );
        }
        let shape = x.shape().to_vec();
        check_tensor_size("LabelEncoder output", &shape, self.values.dtype())?;
        let picks: Vec<Option<usize>> = keys_of(x, "input 0")?
            .iter()
            .map(|k| self.table.get(k).copied())
            .collect();
        let out = match self.values.dtype() {
            DType::String => {
                let (values, default) = (self.values.as_strings()?, &self.default.as_strings()?[0]);
                let data = picks
                    .iter()
                    .map(|p| p.map_or(default, |i| &values[i]).clone())
                    .collect();
                Tensor::from_strings(shape, data)?
            }
            dtype => {
                let size = dtype.size();
                let (values, default) = (self.values.bytes()?, self.default.bytes()?);
                let mut bytes = Vec::with_capacity(picks.len() * size);
                for p in &picks {
                    bytes.extend_from_slice(p.map_or(default, |i| &values[i * size..][..size]));
                }
                Tensor::from_le_bytes(dtype, shape, &bytes)?
            }
        };
        Ok(vec![out.into()])
    }
}

#[derive(Debug)]
struct Binarizer {
    threshold: f64,
}

impl Binarizer {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(Binarizer {
            threshold: f64::from(args.float_or("threshold", 0.0)?),
        }))
    }
}

impl Op for Binarizer {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let shape = x.shape().to_vec();
        let above = |v: f64| v > self.threshold;
        let out = match x.dtype() {
            DType::F32 => {
                let data = x.as_slice::<f32>()?;
                Tensor::from_vec(
                    shape,
                    data.iter()
                        .map(|&v| f32::from(u8::from(above(v.into()))))
                        .collect(),
                )?
            }
            DType::F64 => {
                let data = x.as_slice::<f64>()?;
                Tensor::from_vec(
                    shape,
                    data.iter()
                        .map(|&v| f64::from(u8::from(above(v))))
                        .collect(),
                )?
            }
            DType::I64 => {
                let data = x.as_slice::<i64>()?;
                Tensor::from_vec(
                    shape,
                    data.iter().map(|&v| i64::from(above(v as f64))).collect(),
                )?
            }
            DType::I32 => {
                let data = x.as_slice::<i32>()?;
                Tensor::from_vec(
                    shape,
                    data.iter().map(|&v| i32::from(above(v.into()))).collect(),
                )?
            }
            other => bail!("Binarizer: input 0 of dtype {other} (float, double, int64 or int32)"),
        };
        Ok(vec![out.into()])
    }
}

#[derive(Debug)]
struct ArrayFeatureExtractor;

impl ArrayFeatureExtractor {
    fn build(_: &BuildContext) -> Result<Box<dyn Op>> {
        Ok(Box::new(ArrayFeatureExtractor))
    }
}

impl Op for ArrayFeatureExtractor {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().cloned().flatten().and_then(|t| t.dtype());
        Ok(vec![dtype.map(|d| ValueType::tensor(d, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let indices = inputs.ints(1, "Y, the indices")?;
        let width = match x.shape().last() {
            Some(&w) => w,
            None => bail!("ArrayFeatureExtractor: input 0 is a scalar (it needs a last axis)"),
        };
        let picks = indices
            .iter()
            .map(|&i| match usize::try_from(i) {
                Ok(i) if i < width => Ok(i),
                _ => bail!("ArrayFeatureExtractor: index {i} is outside 0 .. {width}"),
            })
            .collect::<Result<Vec<usize>>>()?;
        let mut shape = match x.shape().len() {
            1 => vec![1],
            _ => x.shape()[..x.shape().len() - 1].to_vec(),
        };
        shape.push(picks.len());
        check_tensor_size("ArrayFeatureExtractor output", &shape, x.dtype())?;
        let rows = x.numel().checked_div(width).unwrap_or(0);
        let out = match x.dtype() {
            DType::String => {
                let data = x.as_strings()?;
                let picked = (0..rows)
                    .flat_map(|r| picks.iter().map(move |&i| data[r * width + i].clone()))
                    .collect();
                Tensor::from_strings(shape, picked)?
            }
            dtype => {
                let size = dtype.size();
                let data = x.bytes()?;
                let mut bytes = Vec::with_capacity(rows * picks.len() * size);
                for r in 0..rows {
                    for &i in &picks {
                        bytes.extend_from_slice(&data[(r * width + i) * size..][..size]);
                    }
                }
                Tensor::from_le_bytes(dtype, shape, &bytes)?
            }
        };
        Ok(vec![out.into()])
    }
}
