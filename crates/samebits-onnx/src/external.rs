//! External tensor data (`data_location = EXTERNAL`): resolving `location` against the model's
//! folder safely, memory-mapping each file once, and listing the files a model uses.
//!
//! A location is refused when it is absolute, when its `..` components lead out of the model
//! folder, when it resolves (after every symbolic link) outside the folder or to something other
//! than a regular file (`samebits_ir::paths`, which a flag relaxes for links), when the file is
//! missing, and when the byte range runs past the end of the file.

use crate::error::{ExternalDataProblem, OnnxError, Result};
use crate::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, SparseTensorProto, StringStringEntryProto,
    TensorProto, tensor_proto::DataLocation,
};
use memmap2::Mmap;
use samebits_ir::{ByteSource, DType, Tensor, checked_numel, small_types};
use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Resolves the external-data references of one model against its folder, mapping each file
/// once and sharing the map between the tensors that view it.
pub(crate) struct ExternalData {
    model_dir: Option<PathBuf>,
    maps: HashMap<PathBuf, Arc<Mmap>>,
}

/// The `external_data` entries of a tensor that this importer reads.
struct Reference<'a> {
    location: &'a str,
    offset: u64,
    length: Option<u64>,
}

fn parse_reference(entries: &[StringStringEntryProto]) -> Result<Reference<'_>> {
    let mut location = None;
    let mut offset = 0;
    let mut length = None;
    for entry in entries {
        let value = entry.value.as_deref().unwrap_or("");
        let number = || {
            value.parse::<u64>().map_err(|_| {
                OnnxError::invalid(format!(
                    "external data {} \"{value}\" is not a byte count",
                    entry.key()
                ))
            })
        };
        match entry.key() {
            "location" => location = Some(value),
            "offset" => offset = number()?,
            "length" => length = Some(number()?),
            _ => {} // "checksum" and keys from later versions of the format
        }
    }
    let location =
        location.ok_or_else(|| OnnxError::invalid("external data has no \"location\" entry"))?;
    Ok(Reference {
        location,
        offset,
        length,
    })
}

/// True when `location` climbs above its starting folder by its `..` components alone.
fn climbs_out(location: &Path) -> bool {
    let mut depth = 0usize;
    for component in location.components() {
        match component {
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return true,
            },
            Component::Normal(_) => depth += 1,
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    false
}

impl ExternalData {
    /// References resolve against `model_dir`; without one, any external reference is an error.
    pub(crate) fn new(model_dir: Option<&Path>) -> ExternalData {
        ExternalData {
            model_dir: model_dir.map(Path::to_path_buf),
            maps: HashMap::new(),
        }
    }

    /// The path of `location` inside the model folder, or why it may not be read.
    fn resolve(&self, location: &str) -> Result<PathBuf, ExternalDataProblem> {
        let relative = Path::new(location);
        let is_absolute = relative.is_absolute()
            || relative
                .components()
                .any(|c| matches!(c, Component::RootDir | Component::Prefix(_)));
        if is_absolute {
            return Err(ExternalDataProblem::Absolute);
        }
        if climbs_out(relative) {
            return Err(ExternalDataProblem::LeavesFolder);
        }
        let model_dir = self
            .model_dir
            .as_ref()
            .ok_or(ExternalDataProblem::NoModelFolder)?;
        let path = model_dir.join(relative);
        samebits_ir::paths::resolve_inside(model_dir, &path)
            .map_err(ExternalDataProblem::Refused)?;
        Ok(path)
    }

    /// The shared map of the file at `path`, mapping it on first use.
    fn map(&mut self, path: &Path) -> Result<Arc<Mmap>, ExternalDataProblem> {
        let shown = || path.display().to_string();
        let key = path
            .canonicalize()
            .map_err(|source| ExternalDataProblem::Missing {
                path: shown(),
                source,
            })?;
        if let Some(map) = self.maps.get(&key) {
            return Ok(map.clone());
        }
        let file = File::open(&key).map_err(|source| ExternalDataProblem::Missing {
            path: shown(),
            source,
        })?;
        // SAFETY: the map is read-only. Like every loader that maps weights, this relies on the
        // file not being truncated or rewritten while the model is in use.
        let map =
            unsafe { Mmap::map(&file) }.map_err(|source| ExternalDataProblem::Unmappable {
                path: shown(),
                source,
            })?;
        let map = Arc::new(map);
        self.maps.insert(key, map.clone());
        Ok(map)
    }

    /// A tensor viewing its bytes in the mapped external file (no copy when they are aligned).
    pub(crate) fn tensor(
        &mut self,
        dtype: DType,
        shape: Vec<usize>,
        entries: &[StringStringEntryProto],
    ) -> Result<Tensor> {
        if dtype == DType::String {
            return Err(OnnxError::invalid(
                "string tensors cannot be stored as external data",
            ));
        }
        let reference = parse_reference(entries)?;
        let location = reference.location;
        let fail = |problem| OnnxError::external(location, problem);
        let path = self.resolve(location).map_err(fail)?;
        let map = self.map(&path).map_err(fail)?;
        let file_len = map.len() as u64;
        let past_end = |length| {
            fail(ExternalDataProblem::PastEnd {
                path: path.display().to_string(),
                offset: reference.offset,
                length,
                file_len,
            })
        };
        let rest = file_len
            .checked_sub(reference.offset)
            .ok_or_else(|| past_end(reference.length.unwrap_or(0)))?;
        let length = reference.length.unwrap_or(rest);
        if length > rest {
            return Err(past_end(length));
        }
        let numel = checked_numel(&shape)?;
        let needed = if dtype.is_storage_only() {
            small_types::packed_len(dtype, numel)
        } else {
            numel
                .checked_mul(dtype.size())
                .ok_or_else(|| OnnxError::invalid(format!("shape {shape:?} is too large")))?
        };
        if length != needed as u64 {
            return Err(OnnxError::invalid(format!(
                "external data \"{location}\" holds {length} bytes, a {dtype} tensor of shape \
                 {shape:?} needs {needed}"
            )));
        }
        // Both fit in the mapped length, itself a usize.
        let (offset, length) = (reference.offset as usize, length as usize);
        if dtype.is_storage_only() {
            let bytes = &map.bytes()[offset..offset + length];
            return crate::tensor::storage_tensor(dtype, shape, bytes, "external data");
        }
        let source: Arc<dyn ByteSource> = map;
        Ok(Tensor::from_source(dtype, shape, source, offset, length)?)
    }
}

/// True when a tensor's data lives in an external file.
pub(crate) fn is_external(tensor: &TensorProto) -> bool {
    tensor.data_location == Some(DataLocation::External as i32)
}

/// The external files a model's tensors name (locations relative to the model's folder, as
/// written, each once, sorted). The compiler copies or links them next to its artifacts.
pub fn external_data_files(model: &ModelProto) -> Vec<PathBuf> {
    let mut locations = BTreeSet::new();
    if let Some(graph) = &model.graph {
        graph_locations(graph, &mut locations);
    }
    for function in &model.functions {
        nodes_locations(&function.node, &mut locations);
    }
    locations.into_iter().map(PathBuf::from).collect()
}

fn tensor_location<'a>(tensor: &'a TensorProto, out: &mut BTreeSet<&'a str>) {
    if is_external(tensor)
        && let Ok(reference) = parse_reference(&tensor.external_data)
    {
        out.insert(reference.location);
    }
}

fn sparse_locations<'a>(sparse: &'a SparseTensorProto, out: &mut BTreeSet<&'a str>) {
    sparse.values.iter().for_each(|t| tensor_location(t, out));
    sparse.indices.iter().for_each(|t| tensor_location(t, out));
}

fn graph_locations<'a>(graph: &'a GraphProto, out: &mut BTreeSet<&'a str>) {
    graph
        .initializer
        .iter()
        .for_each(|t| tensor_location(t, out));
    graph
        .sparse_initializer
        .iter()
        .for_each(|s| sparse_locations(s, out));
    nodes_locations(&graph.node, out);
}

fn nodes_locations<'a>(nodes: &'a [NodeProto], out: &mut BTreeSet<&'a str>) {
    for attribute in nodes.iter().flat_map(|n| &n.attribute) {
        attribute_locations(attribute, out);
    }
}

fn attribute_locations<'a>(attribute: &'a AttributeProto, out: &mut BTreeSet<&'a str>) {
    attribute.t.iter().for_each(|t| tensor_location(t, out));
    attribute
        .tensors
        .iter()
        .for_each(|t| tensor_location(t, out));
    attribute
        .sparse_tensor
        .iter()
        .chain(&attribute.sparse_tensors)
        .for_each(|s| sparse_locations(s, out));
    attribute
        .g
        .iter()
        .chain(&attribute.graphs)
        .for_each(|g| graph_locations(g, out));
}
