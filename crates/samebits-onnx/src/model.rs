//! `ModelProto` → [`Model`]: opset imports, graphs (recursively through If/Loop/Scan bodies),
//! value types, nodes with every attribute kind, initializers and sparse initializers.

use crate::error::{OnnxError, Result};
use crate::external::ExternalData;
use crate::function::inline_functions;
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{AttributeProto, GraphProto, ModelProto, NodeProto, ValueInfoProto};
use crate::tensor::{decode_tensor, densify_sparse};
use crate::types::{UnknownDims, value_type_from_proto};
use prost::Message;
use samebits_ir::{Attribute, Graph, Model, Node, Tensor, ValueInfo, ValueType};
use std::collections::BTreeMap;
use std::path::Path;

/// The default-domain opset versions this importer accepts.
pub const SUPPORTED_DEFAULT_OPSETS: std::ops::RangeInclusive<i64> = 1..=27;

/// The label errors use for a model given as bytes.
const BYTES_LABEL: &str = "<model bytes>";

/// Loads an ONNX model file; external data resolves against the file's folder.
pub fn load_model(path: &Path) -> Result<Model> {
    let proto = read_model_proto(path)?;
    let model_dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    import(proto, Some(model_dir)).map_err(|e| e.in_file(&path.display().to_string()))
}

/// Loads a model from its serialized bytes; external data resolves against `model_dir`, and
/// without one any external reference is an error.
pub fn load_model_from_bytes(bytes: &[u8], model_dir: Option<&Path>) -> Result<Model> {
    let proto = ModelProto::decode(bytes)
        .map_err(|e| OnnxError::malformed(BYTES_LABEL, "ModelProto", e))?;
    import(proto, model_dir).map_err(|e| e.in_file(BYTES_LABEL))
}

/// Reads and decodes a model file without converting it (for [`external_data_files`] and
/// tools that inspect the protobuf itself).
///
/// [`external_data_files`]: crate::external_data_files
pub fn read_model_proto(path: &Path) -> Result<ModelProto> {
    let bytes = std::fs::read(path).map_err(|e| OnnxError::io(path, e))?;
    ModelProto::decode(bytes.as_slice())
        .map_err(|e| OnnxError::malformed(&path.display().to_string(), "ModelProto", e))
}

/// Converts a decoded model; external data resolves against `model_dir`.
pub fn model_from_proto(proto: ModelProto, model_dir: Option<&Path>) -> Result<Model> {
    import(proto, model_dir).map_err(|e| e.in_file("<ModelProto>"))
}

fn import(mut proto: ModelProto, model_dir: Option<&Path>) -> Result<Model> {
    let mut opset_imports = BTreeMap::new();
    for opset in &proto.opset_import {
        let domain = match opset.domain() {
            "ai.onnx" => "",
            other => other,
        };
        opset_imports.insert(domain.to_string(), opset.version());
    }
    if let Some(&version) = opset_imports.get("")
        && !SUPPORTED_DEFAULT_OPSETS.contains(&version)
    {
        return Err(OnnxError::unsupported(format!(
            "default-domain opset {version} (supported: {}–{})",
            SUPPORTED_DEFAULT_OPSETS.start(),
            SUPPORTED_DEFAULT_OPSETS.end()
        )));
    }
    inline_functions(&mut proto)?;
    let graph = proto
        .graph
        .take()
        .ok_or_else(|| OnnxError::invalid("model has no graph"))?;
    let mut importer = Importer {
        external: ExternalData::new(model_dir),
        unknown_dims: UnknownDims::default(),
    };
    let graph = importer.graph(graph)?;
    let producer = match (proto.producer_name(), proto.producer_version()) {
        (name, "") => name.to_string(),
        (name, version) => format!("{name} {version}"),
    };
    Ok(Model {
        graph,
        opset_imports,
        ir_version: proto.ir_version(),
        producer,
        metadata: proto
            .metadata_props
            .into_iter()
            .map(|p| (p.key.unwrap_or_default(), p.value.unwrap_or_default()))
            .collect(),
    })
}

struct Importer {
    external: ExternalData,
    unknown_dims: UnknownDims,
}

fn utf8(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| OnnxError::invalid("string is not UTF-8"))
}

impl Importer {
    fn graph(&mut self, proto: GraphProto) -> Result<Graph> {
        let name = proto.name().to_string();
        self.graph_contents(proto, name.clone())
            .map_err(|e| e.within(format!("graph \"{name}\"")))
    }

    fn graph_contents(&mut self, proto: GraphProto, name: String) -> Result<Graph> {
        let mut graph = Graph {
            name,
            ..Default::default()
        };
        graph.inputs = self.value_infos(proto.input, "input")?;
        graph.outputs = self.value_infos(proto.output, "output")?;
        for info in self.value_infos(proto.value_info, "value_info")? {
            if let Some(ty) = info.ty {
                graph.value_types.insert(info.name, ty);
            }
        }
        for tensor in proto.initializer {
            let name = tensor.name().to_string();
            let at = || format!("initializer \"{name}\"");
            let decoded = decode_tensor(tensor, &mut self.external).map_err(|e| e.within(at()))?;
            self.add_initializer(&mut graph, name.clone(), decoded)
                .map_err(|e| e.within(at()))?;
        }
        for sparse in proto.sparse_initializer {
            let name = sparse
                .values
                .as_ref()
                .map(|v| v.name().to_string())
                .unwrap_or_default();
            let at = || format!("sparse initializer \"{name}\"");
            let dense = densify_sparse(sparse, &mut self.external).map_err(|e| e.within(at()))?;
            self.add_initializer(&mut graph, name.clone(), dense)
                .map_err(|e| e.within(at()))?;
        }
        for node in proto.node {
            let at = describe_node(&node);
            graph.nodes.push(self.node(node).map_err(|e| e.within(at))?);
        }
        Ok(graph)
    }

    fn add_initializer(&self, graph: &mut Graph, name: String, tensor: Tensor) -> Result<()> {
        if name.is_empty() {
            return Err(OnnxError::invalid("initializer has no name"));
        }
        if graph.initializers.insert(name, tensor).is_some() {
            return Err(OnnxError::invalid("initializer name is used twice"));
        }
        Ok(())
    }

    fn value_infos(&mut self, infos: Vec<ValueInfoProto>, role: &str) -> Result<Vec<ValueInfo>> {
        infos
            .into_iter()
            .map(|info| {
                let name = info.name.unwrap_or_default();
                let ty = match &info.r#type {
                    Some(ty) => value_type_from_proto(ty, &mut self.unknown_dims)
                        .map_err(|e| e.within(format!("{role} \"{name}\"")))?,
                    None => None,
                };
                Ok(ValueInfo { name, ty })
            })
            .collect()
    }

    fn node(&mut self, proto: NodeProto) -> Result<Node> {
        let domain = match proto.domain() {
            "ai.onnx" => String::new(),
            other => other.to_string(),
        };
        let mut attributes = BTreeMap::new();
        for attribute in proto.attribute {
            let name = attribute.name().to_string();
            let value = self
                .attribute(attribute)
                .map_err(|e| e.within(format!("attribute \"{name}\"")))?;
            if attributes.insert(name, value).is_some() {
                return Err(OnnxError::invalid("attribute name is used twice"));
            }
        }
        Ok(Node {
            name: proto.name.unwrap_or_default(),
            op_type: proto.op_type.unwrap_or_default(),
            domain,
            inputs: proto.input,
            outputs: proto.output,
            attributes,
        })
    }

    fn value_type(&mut self, proto: &crate::proto::TypeProto) -> Result<ValueType> {
        value_type_from_proto(proto, &mut self.unknown_dims)?
            .ok_or_else(|| OnnxError::unsupported("type attribute whose type is not specified"))
    }

    fn attribute(&mut self, proto: AttributeProto) -> Result<Attribute> {
        if let Some(reference) = &proto.ref_attr_name {
            return Err(OnnxError::unsupported(format!(
                "attribute reference (ref_attr_name \"{reference}\") outside a function body"
            )));
        }
        let kind = match proto.r#type() {
            AttributeType::Undefined => inferred_attribute_type(&proto)?,
            kind => kind,
        };
        let missing = |field: &str| OnnxError::invalid(format!("{field} attribute has no value"));
        Ok(match kind {
            AttributeType::Undefined => unreachable!("inferred above"),
            AttributeType::Float => Attribute::Float(proto.f.unwrap_or_default()),
            AttributeType::Int => Attribute::Int(proto.i.unwrap_or_default()),
            AttributeType::String => Attribute::String(utf8(proto.s.unwrap_or_default())?),
            AttributeType::Tensor => {
                let tensor = proto.t.ok_or_else(|| missing("tensor"))?;
                Attribute::Tensor(decode_tensor(tensor, &mut self.external)?)
            }
            AttributeType::SparseTensor => {
                let sparse = proto
                    .sparse_tensor
                    .ok_or_else(|| missing("sparse tensor"))?;
                Attribute::Tensor(densify_sparse(sparse, &mut self.external)?)
            }
            AttributeType::Graph => Attribute::Graph(Box::new(
                self.graph(proto.g.ok_or_else(|| missing("graph"))?)?,
            )),
            AttributeType::TypeProto => {
                Attribute::Type(self.value_type(proto.tp.as_ref().ok_or_else(|| missing("type"))?)?)
            }
            AttributeType::Floats => Attribute::Floats(proto.floats),
            AttributeType::Ints => Attribute::Ints(proto.ints),
            AttributeType::Strings => {
                Attribute::Strings(proto.strings.into_iter().map(utf8).collect::<Result<_>>()?)
            }
            AttributeType::Tensors => Attribute::Tensors(
                proto
                    .tensors
                    .into_iter()
                    .map(|t| decode_tensor(t, &mut self.external))
                    .collect::<Result<_>>()?,
            ),
            AttributeType::SparseTensors => Attribute::Tensors(
                proto
                    .sparse_tensors
                    .into_iter()
                    .map(|s| densify_sparse(s, &mut self.external))
                    .collect::<Result<_>>()?,
            ),
            AttributeType::Graphs => Attribute::Graphs(
                proto
                    .graphs
                    .into_iter()
                    .map(|g| self.graph(g))
                    .collect::<Result<_>>()?,
            ),
            AttributeType::TypeProtos => Attribute::Types(
                proto
                    .type_protos
                    .iter()
                    .map(|t| self.value_type(t))
                    .collect::<Result<_>>()?,
            ),
        })
    }
}

/// The kind of an attribute whose `type` field is unset (files from before IR version 2 leave
/// it out): the one value field that is filled in.
fn inferred_attribute_type(p: &AttributeProto) -> Result<AttributeType> {
    let filled = [
        (p.f.is_some(), AttributeType::Float),
        (p.i.is_some(), AttributeType::Int),
        (p.s.is_some(), AttributeType::String),
        (p.t.is_some(), AttributeType::Tensor),
        (p.g.is_some(), AttributeType::Graph),
        (p.sparse_tensor.is_some(), AttributeType::SparseTensor),
        (p.tp.is_some(), AttributeType::TypeProto),
        (!p.floats.is_empty(), AttributeType::Floats),
        (!p.ints.is_empty(), AttributeType::Ints),
        (!p.strings.is_empty(), AttributeType::Strings),
        (!p.tensors.is_empty(), AttributeType::Tensors),
        (!p.graphs.is_empty(), AttributeType::Graphs),
        (!p.sparse_tensors.is_empty(), AttributeType::SparseTensors),
        (!p.type_protos.is_empty(), AttributeType::TypeProtos),
    ];
    let mut kinds = filled.iter().filter(|(f, _)| *f).map(|&(_, k)| k);
    match (kinds.next(), kinds.next()) {
        (Some(kind), None) => Ok(kind),
        _ => Err(OnnxError::invalid(
            "attribute has no type and not exactly one value field",
        )),
    }
}

/// How errors name a node: `node Conv "conv1"`, or by its first output when it has no name.
fn describe_node(node: &NodeProto) -> String {
    match (node.name(), node.output.first()) {
        ("", Some(output)) => format!("node {} producing \"{output}\"", node.op_type()),
        (name, _) => format!("node {} \"{name}\"", node.op_type()),
    }
}
