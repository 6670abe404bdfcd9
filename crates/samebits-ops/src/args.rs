//! [`NodeArgs`]: typed reads of a node's attributes, with defaults and errors that name the
//! attribute and the kind it was expected to be; [`onnx_dtype`] for dtype-code attributes.

use crate::{OpError, Result, bail, unsupported};
use samebits_ir::{Attribute, DType, Graph, Node, Tensor};

/// The attributes of one node.
pub struct NodeArgs<'a> {
    node: &'a Node,
}

macro_rules! getter {
    ($opt:ident, $or:ident, $variant:ident, $t:ty) => {
        /// The attribute's value, `None` when absent, an error when it has another kind.
        pub fn $opt(&self, name: &str) -> Result<Option<$t>> {
            match self.node.attributes.get(name) {
                None => Ok(None),
                Some(Attribute::$variant(v)) => Ok(Some(v.clone())),
                Some(other) => Err(self.wrong_kind(name, stringify!($variant), other)),
            }
        }

        /// The attribute's value or `default` when absent.
        pub fn $or(&self, name: &str, default: $t) -> Result<$t> {
            Ok(self.$opt(name)?.unwrap_or(default))
        }
    };
}

impl<'a> NodeArgs<'a> {
    pub fn new(node: &'a Node) -> NodeArgs<'a> {
        NodeArgs { node }
    }

    fn wrong_kind(&self, name: &str, expected: &str, got: &Attribute) -> OpError {
        OpError::Invalid(format!(
            "attribute \"{name}\" should be {}, got {}",
            expected.to_lowercase(),
            got.kind()
        ))
    }

    getter!(int, int_or, Int, i64);
    getter!(float, float_or, Float, f32);
    getter!(string, string_or, String, String);
    getter!(ints, ints_or, Ints, Vec<i64>);
    getter!(floats, floats_or, Floats, Vec<f32>);
    getter!(strings, strings_or, Strings, Vec<String>);
    getter!(tensor, tensor_or, Tensor, Tensor);

    /// A graph attribute (If/Loop/Scan bodies).
    pub fn graph(&self, name: &str) -> Result<&'a Graph> {
        match self.node.attributes.get(name) {
            Some(Attribute::Graph(g)) => Ok(g),
            Some(other) => Err(self.wrong_kind(name, "Graph", other)),
            None => Err(OpError::Invalid(format!("missing attribute \"{name}\""))),
        }
    }

    /// Whether the attribute is present.
    pub fn has(&self, name: &str) -> bool {
        self.node.attributes.contains_key(name)
    }

    /// A required int attribute.
    pub fn req_int(&self, name: &str) -> Result<i64> {
        self.int(name)?
            .ok_or_else(|| OpError::Invalid(format!("missing attribute \"{name}\"")))
    }
}

/// Normalises a possibly negative `axis` against `rank` (ONNX: `-rank <= axis < rank`).
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(OpError::Invalid(format!(
            "axis {axis} is out of range for rank {rank}"
        )));
    }
    Ok(a as usize)
}

/// The dtype of an ONNX `TensorProto.DataType` code held by attribute `attribute`.
pub fn onnx_dtype(code: i64, attribute: &str) -> Result<DType> {
    Ok(match code {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        4 => DType::U16,
        5 => DType::I16,
        6 => DType::I32,
        7 => DType::I64,
        8 => DType::String,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        12 => DType::U32,
        13 => DType::U64,
        16 => DType::BF16,
        14 | 15 => unsupported!("attribute \"{attribute}\" = {code}: complex dtypes"),
        17..=20 | 23 | 24 => {
            unsupported!("attribute \"{attribute}\" = {code}: float8 and float4 dtypes")
        }
        21 | 22 | 25 | 26 => {
            unsupported!("attribute \"{attribute}\" = {code}: 2- and 4-bit integer dtypes")
        }
        other => bail!("attribute \"{attribute}\" = {other} is not an ONNX dtype code"),
    })
}
