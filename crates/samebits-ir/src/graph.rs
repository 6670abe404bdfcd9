//! [`Graph`], [`Node`] and [`Attribute`]: the computation in ONNX's vocabulary (op types, domains,
//! named values). Importers of other formats (GGUF, Hugging Face) build the same structures.

use crate::{Tensor, ValueType};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The opset version imported for each domain (`""` is the default ONNX domain).
pub type OpsetImports = BTreeMap<String, i64>;

/// A named graph input or output and its declared type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueInfo {
    pub name: String,
    pub ty: Option<ValueType>,
}

/// A node attribute.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribute {
    Float(f32),
    Int(i64),
    String(String),
    Tensor(Tensor),
    Graph(Box<Graph>),
    Type(ValueType),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
    Strings(Vec<String>),
    Tensors(Vec<Tensor>),
    Graphs(Vec<Graph>),
    Types(Vec<ValueType>),
}

impl Attribute {
    /// The attribute's kind, for error messages ("int", "floats", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Attribute::Float(_) => "float",
            Attribute::Int(_) => "int",
            Attribute::String(_) => "string",
            Attribute::Tensor(_) => "tensor",
            Attribute::Graph(_) => "graph",
            Attribute::Type(_) => "type",
            Attribute::Floats(_) => "floats",
            Attribute::Ints(_) => "ints",
            Attribute::Strings(_) => "strings",
            Attribute::Tensors(_) => "tensors",
            Attribute::Graphs(_) => "graphs",
            Attribute::Types(_) => "types",
        }
    }
}

/// One operation. An empty input name marks an omitted optional input.
#[derive(Clone, Debug, Serialize)]
pub struct Node {
    pub name: String,
    pub op_type: String,
    pub domain: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attributes: BTreeMap<String, Attribute>,
}

impl Node {
    /// `op_type` plus the node name, as error messages name a node: `Conv node "conv_1"`.
    pub fn describe(&self) -> String {
        if self.name.is_empty() {
            let first = self.outputs.first().map(String::as_str).unwrap_or("?");
            format!("{} node producing \"{first}\"", self.op_type)
        } else {
            format!("{} node \"{}\"", self.op_type, self.name)
        }
    }
}

/// A dataflow graph: nodes in topological order once the passes have run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Graph {
    pub name: String,
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
    pub nodes: Vec<Node>,
    /// Constant tensors by value name (ONNX initializers and folded constants).
    pub initializers: BTreeMap<String, Tensor>,
    /// Types known for intermediate values (declared or inferred).
    pub value_types: BTreeMap<String, ValueType>,
}

impl Graph {
    /// The type known for a value: a graph input or output's declaration, an initializer's
    /// dtype and shape, or an inferred type.
    pub fn value_type(&self, name: &str) -> Option<ValueType> {
        if let Some(t) = self.initializers.get(name) {
            return Some(ValueType::tensor(
                t.dtype(),
                Some(crate::Shape::known(t.shape())),
            ));
        }
        self.value_types.get(name).cloned().or_else(|| {
            self.inputs
                .iter()
                .chain(&self.outputs)
                .find(|v| v.name == name)
                .and_then(|v| v.ty.clone())
        })
    }

    /// Graph inputs that are not initializers: what a caller must feed.
    pub fn runtime_inputs(&self) -> impl Iterator<Item = &ValueInfo> {
        self.inputs
            .iter()
            .filter(|i| !self.initializers.contains_key(&i.name))
    }
}

/// A whole model: its main graph and the opsets it was written against.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Model {
    pub graph: Graph,
    pub opset_imports: OpsetImports,
    pub ir_version: i64,
    pub producer: String,
    pub metadata: BTreeMap<String, String>,
}

impl Model {
    /// The opset version imported for `domain` (`""` and `"ai.onnx"` are the same domain).
    pub fn opset(&self, domain: &str) -> Option<i64> {
        let key = if domain == "ai.onnx" { "" } else { domain };
        self.opset_imports.get(key).copied()
    }
}
