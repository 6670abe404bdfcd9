//! [`Value`]: what flows along a graph edge at run time: a tensor, a sequence of tensors, or an
//! optional value (ONNX's Sequence and Optional types).

use crate::{Result, Tensor, invalid};

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Tensor(Tensor),
    Sequence(Vec<Tensor>),
    Optional(Option<Box<Value>>),
}

impl Value {
    /// The tensor inside, or an error naming what the value is instead.
    pub fn as_tensor(&self) -> Result<&Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(invalid!("expected a tensor, got {}", other.kind())),
        }
    }

    pub fn into_tensor(self) -> Result<Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(invalid!("expected a tensor, got {}", other.kind())),
        }
    }

    /// "tensor", "sequence" or "optional", for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Tensor(_) => "tensor",
            Value::Sequence(_) => "sequence",
            Value::Optional(_) => "optional",
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value::Tensor(t)
    }
}
