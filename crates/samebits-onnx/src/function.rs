//! Inline expansion of model-local functions (`ModelProto.functions`): every node that calls one
//! is replaced by the function body, with formal inputs and outputs renamed to the call's
//! values, body-internal values given names unique to the call, and attribute references
//! (`ref_attr_name`) replaced by the call's attribute or the function's default.

use crate::error::{OnnxError, Result};
use crate::proto::{AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto};
use std::collections::HashMap;

/// How deep function calls may nest (a function calling itself never ends).
const MAX_CALL_DEPTH: usize = 32;

/// The default domain has two spellings.
fn canonical_domain(domain: &str) -> &str {
    if domain == "ai.onnx" { "" } else { domain }
}

type FunctionKey = (String, String, String);

fn function_key(domain: &str, name: &str, overload: &str) -> FunctionKey {
    (
        canonical_domain(domain).to_string(),
        name.to_string(),
        overload.to_string(),
    )
}

struct Inliner<'a> {
    functions: HashMap<FunctionKey, &'a FunctionProto>,
    default_opset: Option<i64>,
    calls_expanded: usize,
}

/// Replaces every call of a model-local function in the model's graphs by the function body.
pub(crate) fn inline_functions(model: &mut ModelProto) -> Result<()> {
    if model.functions.is_empty() {
        return Ok(());
    }
    let functions = std::mem::take(&mut model.functions);
    let default_opset = model
        .opset_import
        .iter()
        .find(|o| canonical_domain(o.domain()).is_empty())
        .map(|o| o.version());
    let mut inliner = Inliner {
        functions: functions
            .iter()
            .map(|f| (function_key(f.domain(), f.name(), f.overload()), f))
            .collect(),
        default_opset,
        calls_expanded: 0,
    };
    if let Some(graph) = &mut model.graph {
        inliner.graph(graph, 0)?;
    }
    model.functions = functions;
    Ok(())
}

impl Inliner<'_> {
    fn graph(&mut self, graph: &mut GraphProto, depth: usize) -> Result<()> {
        graph.node = self.nodes(std::mem::take(&mut graph.node), depth)?;
        Ok(())
    }

    fn nodes(&mut self, nodes: Vec<NodeProto>, depth: usize) -> Result<Vec<NodeProto>> {
        let mut out = Vec::with_capacity(nodes.len());
        for mut node in nodes {
            let key = function_key(node.domain(), node.op_type(), node.overload());
            match self.functions.get(&key).copied() {
                Some(function) => {
                    let body = self
                        .expand(&node, function, depth)
                        .map_err(|e| e.within(format!("function \"{}\"", function.name())))?;
                    out.extend(self.nodes(body, depth + 1)?);
                }
                None => {
                    for attribute in &mut node.attribute {
                        for graph in attribute.g.iter_mut().chain(&mut attribute.graphs) {
                            self.graph(graph, depth)?;
                        }
                    }
                    out.push(node);
                }
            }
        }
        Ok(out)
    }

    /// The body of `function` as called by `call`, renamed and with attributes substituted.
    fn expand(
        &mut self,
        call: &NodeProto,
        function: &FunctionProto,
        depth: usize,
    ) -> Result<Vec<NodeProto>> {
        if depth >= MAX_CALL_DEPTH {
            return Err(OnnxError::unsupported(format!(
                "function calls nested more than {MAX_CALL_DEPTH} deep (recursion?)"
            )));
        }
        if let Some(own) = function
            .opset_import
            .iter()
            .find(|o| canonical_domain(o.domain()).is_empty())
            && self.default_opset.is_some_and(|v| v != own.version())
        {
            return Err(OnnxError::unsupported(format!(
                "function imports default-domain opset {} but the model imports {}",
                own.version(),
                self.default_opset.unwrap_or_default()
            )));
        }
        if call.input.len() > function.input.len() || call.output.len() > function.output.len() {
            return Err(OnnxError::invalid(format!(
                "called with {} inputs and {} outputs, declares {} and {}",
                call.input.len(),
                call.output.len(),
                function.input.len(),
                function.output.len()
            )));
        }
        self.calls_expanded += 1;
        let max_calls = samebits_ir::limits::max_function_calls();
        if self.calls_expanded as u64 > max_calls {
            return Err(OnnxError::invalid(format!(
                "the model's function calls expand to more than {max_calls} calls (the limit \
                 SAMEBITS_MAX_FUNCTION_CALLS sets)"
            )));
        }
        let prefix = format!("{}__call{}__", function.name(), self.calls_expanded);
        let mut renames: HashMap<String, String> = HashMap::new();
        for (i, formal) in function.input.iter().enumerate() {
            let actual = call.input.get(i).cloned().unwrap_or_default();
            renames.insert(formal.clone(), actual);
        }
        for (i, formal) in function.output.iter().enumerate() {
            let actual = call
                .output
                .get(i)
                .filter(|o| !o.is_empty())
                .cloned()
                .unwrap_or_else(|| format!("{prefix}{formal}"));
            renames.insert(formal.clone(), actual);
        }
        for output in function.node.iter().flat_map(|n| &n.output) {
            if !output.is_empty() && !renames.contains_key(output) {
                renames.insert(output.clone(), format!("{prefix}{output}"));
            }
        }
        let mut attributes: HashMap<&str, &AttributeProto> = function
            .attribute_proto
            .iter()
            .map(|a| (a.name(), a))
            .collect();
        attributes.extend(call.attribute.iter().map(|a| (a.name(), a)));
        let mut body = function.node.clone();
        for node in &mut body {
            if !node.name().is_empty() {
                node.name = Some(format!("{prefix}{}", node.name()));
            }
            rename_node(node, &renames, &attributes);
        }
        Ok(body)
    }
}

/// Renames a body node's values and substitutes its attribute references, recursing into the
/// node's subgraphs (which may use the function's values from the enclosing scope).
fn rename_node(
    node: &mut NodeProto,
    renames: &HashMap<String, String>,
    attributes: &HashMap<&str, &AttributeProto>,
) {
    for name in node.input.iter_mut().chain(&mut node.output) {
        if let Some(new) = renames.get(name) {
            name.clone_from(new);
        }
    }
    let mut substituted = Vec::with_capacity(node.attribute.len());
    for mut attribute in std::mem::take(&mut node.attribute) {
        if let Some(reference) = attribute.ref_attr_name.as_deref() {
            // An attribute the call leaves unset and the function gives no default is omitted.
            let Some(&value) = attributes.get(reference) else {
                continue;
            };
            let name = attribute.name.take();
            attribute = value.clone();
            attribute.name = name;
        }
        for graph in attribute.g.iter_mut().chain(&mut attribute.graphs) {
            for output in &mut graph.output {
                if let Some(new) = output.name.as_ref().and_then(|n| renames.get(n)) {
                    output.name = Some(new.clone());
                }
            }
            for inner in &mut graph.node {
                rename_node(inner, renames, attributes);
            }
        }
        substituted.push(attribute);
    }
    node.attribute = substituted;
}
