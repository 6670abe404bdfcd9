//! Ops of the `ai.onnx.ml` domain: LabelEncoder (opsets 1 to 4).
//!
//! LabelEncoder looks every element up in a key → value table given by attributes
//! (`keys_*` / `values_*`, or `keys_tensor` / `values_tensor` from opset 4) and writes the
//! value, or the default for a missing key. No arithmetic: values are copied as they are, so
//! the result is the same everywhere. Float keys compare by value, `-0.0` equal to `+0.0` and
//! every NaN equal to every NaN.

use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Tensor, Value, ValueType};
use std::collections::HashMap;

pub fn register(r: &mut Registry) {
    r.register("ai.onnx.ml", "LabelEncoder", LabelEncoder::build);
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
