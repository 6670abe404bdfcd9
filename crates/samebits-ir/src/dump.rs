//! Inspectable renderings of the IR: JSON (every field, tensors summarised) and Graphviz DOT.
//! The compiler writes both after each pass into the artifacts directory.

use crate::{Graph, Model, Tensor};
use serde::ser::{Serialize, SerializeStruct, Serializer};
use std::fmt::Write;

/// Tensors serialise as dtype, shape and, for up to 16 elements, their values; large weights are
/// summarised so dumps stay small.
impl Serialize for Tensor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Tensor", 3)?;
        st.serialize_field("dtype", &self.dtype())?;
        st.serialize_field("shape", self.shape())?;
        if self.numel() <= 16 {
            match self.as_strings() {
                Ok(strings) => st.serialize_field("values", strings)?,
                Err(_) => st.serialize_field("values", &self.to_f64_vec().unwrap_or_default())?,
            }
        } else {
            st.skip_field("values")?;
        }
        st.end()
    }
}

/// The model as pretty-printed JSON.
pub fn to_json(model: &Model) -> String {
    serde_json::to_string_pretty(model).expect("IR serialisation cannot fail")
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The main graph as Graphviz DOT: a box per node, an ellipse per graph input, output and
/// initializer, edges labelled with the value type when it is known.
pub fn to_dot(graph: &Graph) -> String {
    let mut out =
        String::from("digraph samebits {\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n");
    let mut producer = std::collections::BTreeMap::new();
    for input in &graph.inputs {
        let _ = writeln!(
            out,
            "  \"v:{0}\" [label=\"{0}\", shape=ellipse];",
            escape(&input.name)
        );
        producer.insert(input.name.as_str(), format!("v:{}", input.name));
    }
    for name in graph.initializers.keys() {
        producer
            .entry(name.as_str())
            .or_insert_with(|| format!("v:{name}"));
    }
    for (i, node) in graph.nodes.iter().enumerate() {
        let _ = writeln!(
            out,
            "  \"n{i}\" [label=\"{}\\n{}\", shape=box];",
            escape(&node.op_type),
            escape(&node.name)
        );
        for o in &node.outputs {
            producer.insert(o.as_str(), format!("n{i}"));
        }
    }
    for (i, node) in graph.nodes.iter().enumerate() {
        for input in node.inputs.iter().filter(|n| !n.is_empty()) {
            let from = match producer.get(input.as_str()) {
                Some(p) => p.clone(),
                None => continue,
            };
            if from.starts_with("v:") && graph.initializers.contains_key(input) {
                let _ = writeln!(
                    out,
                    "  \"{0}\" [label=\"{1}\", shape=note];",
                    escape(&from),
                    escape(input)
                );
            }
            let label = graph
                .value_type(input)
                .map(|t| t.to_string())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  \"{}\" -> \"n{i}\" [label=\"{}\"];",
                escape(&from),
                escape(&label)
            );
        }
    }
    for output in &graph.outputs {
        let _ = writeln!(
            out,
            "  \"out:{0}\" [label=\"{0}\", shape=ellipse];",
            escape(&output.name)
        );
        if let Some(p) = producer.get(output.name.as_str()) {
            let _ = writeln!(
                out,
                "  \"{}\" -> \"out:{}\";",
                escape(p),
                escape(&output.name)
            );
        }
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Node, ValueInfo};

    #[test]
    fn dumps_name_every_node_and_edge() {
        let mut g = Graph {
            name: "g".into(),
            ..Default::default()
        };
        g.inputs.push(ValueInfo {
            name: "x".into(),
            ty: None,
        });
        g.outputs.push(ValueInfo {
            name: "y".into(),
            ty: None,
        });
        g.initializers
            .insert("w".into(), Tensor::from_vec(vec![1], vec![2f32]).unwrap());
        g.nodes.push(Node {
            name: "mul0".into(),
            op_type: "Mul".into(),
            domain: String::new(),
            inputs: vec!["x".into(), "w".into()],
            outputs: vec!["y".into()],
            attributes: Default::default(),
        });
        let dot = to_dot(&g);
        assert!(dot.contains("\"v:x\" -> \"n0\""));
        assert!(dot.contains("\"v:w\" -> \"n0\" [label=\"f32[1]\"]"));
        assert!(dot.contains("\"n0\" -> \"out:y\""));
        let model = Model {
            graph: g,
            ..Default::default()
        };
        let json: serde_json::Value = serde_json::from_str(&to_json(&model)).unwrap();
        assert_eq!(json["graph"]["nodes"][0]["op_type"], "Mul");
        assert_eq!(json["graph"]["initializers"]["w"]["values"][0], 2.0);
    }
}
