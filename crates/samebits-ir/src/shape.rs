//! Shapes with symbolic dims ([`Dim`], [`Shape`]) and the static type of a graph value
//! ([`ValueType`]): a tensor of a dtype and (maybe unknown) shape, or a sequence / optional of one.

use crate::DType;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One dimension: a known size, or a named symbol such as `batch` or `seq_len`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Dim {
    Known(usize),
    Symbol(String),
}

impl Dim {
    pub fn known(&self) -> Option<usize> {
        match self {
            Dim::Known(n) => Some(*n),
            Dim::Symbol(_) => None,
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Symbol(s) => f.write_str(s),
        }
    }
}

/// A shape whose dims may be symbolic.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Shape(pub Vec<Dim>);

impl Shape {
    pub fn known(dims: &[usize]) -> Shape {
        Shape(dims.iter().map(|&d| Dim::Known(d)).collect())
    }

    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The concrete dims when every dim is known.
    pub fn concrete(&self) -> Option<Vec<usize>> {
        self.0.iter().map(Dim::known).collect()
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// The static type of a value flowing along a graph edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueType {
    /// A tensor; `shape` is `None` when even the rank is unknown.
    Tensor {
        dtype: DType,
        shape: Option<Shape>,
    },
    Sequence(Box<ValueType>),
    Optional(Box<ValueType>),
}

impl ValueType {
    pub fn tensor(dtype: DType, shape: Option<Shape>) -> ValueType {
        ValueType::Tensor { dtype, shape }
    }

    /// The dtype of a tensor type.
    pub fn dtype(&self) -> Option<DType> {
        match self {
            ValueType::Tensor { dtype, .. } => Some(*dtype),
            _ => None,
        }
    }

    /// The shape of a tensor type, when known.
    pub fn shape(&self) -> Option<&Shape> {
        match self {
            ValueType::Tensor { shape, .. } => shape.as_ref(),
            _ => None,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::Tensor {
                dtype,
                shape: Some(s),
            } => write!(f, "{dtype}{s}"),
            ValueType::Tensor { dtype, shape: None } => write!(f, "{dtype}[?]"),
            ValueType::Sequence(t) => write!(f, "seq<{t}>"),
            ValueType::Optional(t) => write!(f, "optional<{t}>"),
        }
    }
}
