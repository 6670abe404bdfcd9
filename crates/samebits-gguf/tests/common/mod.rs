//! Test-only helpers: a small GGUF writer for synthetic files, a seeded random generator, and the
//! location of the real SmolLM2 file.

#![allow(dead_code)] // each test binary uses its own part of these helpers

use samebits_gguf::{GgmlType, MetadataValue};
use std::path::PathBuf;

/// Writes GGUF files (little-endian, versions 2 and 3) from metadata and raw tensor bytes.
pub struct GgufWriter {
    pub version: u32,
    pub alignment: usize,
    pub metadata: Vec<(String, MetadataValue)>,
    pub tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

impl GgufWriter {
    pub fn new(version: u32) -> GgufWriter {
        GgufWriter {
            version,
            alignment: 32,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    pub fn kv(mut self, key: &str, value: MetadataValue) -> GgufWriter {
        if let ("general.alignment", MetadataValue::U32(a)) = (key, &value) {
            self.alignment = *a as usize;
        }
        self.metadata.push((key.into(), value));
        self
    }

    pub fn tensor(mut self, name: &str, dims: &[u64], ty: GgmlType, data: Vec<u8>) -> GgufWriter {
        self.tensors.push((name.into(), dims.to_vec(), ty, data));
        self
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            write_string(&mut out, key);
            out.extend_from_slice(&value_type(value).to_le_bytes());
            write_value(&mut out, value);
        }
        let mut offset = 0usize;
        let mut offsets = Vec::new();
        for (name, dims, ty, data) in &self.tensors {
            write_string(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.id().to_le_bytes());
            out.extend_from_slice(&(offset as u64).to_le_bytes());
            offsets.push(offset);
            offset = (offset + data.len()).next_multiple_of(self.alignment);
        }
        let data_start = out.len().next_multiple_of(self.alignment);
        out.resize(data_start, 0);
        for ((_, _, _, data), offset) in self.tensors.iter().zip(offsets) {
            out.resize(data_start + offset, 0);
            out.extend_from_slice(data);
        }
        out
    }
}

fn write_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn value_type(value: &MetadataValue) -> u32 {
    match value {
        MetadataValue::U8(_) => 0,
        MetadataValue::I8(_) => 1,
        MetadataValue::U16(_) => 2,
        MetadataValue::I16(_) => 3,
        MetadataValue::U32(_) => 4,
        MetadataValue::I32(_) => 5,
        MetadataValue::F32(_) => 6,
        MetadataValue::Bool(_) => 7,
        MetadataValue::String(_) => 8,
        MetadataValue::Array(_) => 9,
        MetadataValue::U64(_) => 10,
        MetadataValue::I64(_) => 11,
        MetadataValue::F64(_) => 12,
    }
}

fn write_value(out: &mut Vec<u8>, value: &MetadataValue) {
    match value {
        MetadataValue::U8(v) => out.push(*v),
        MetadataValue::I8(v) => out.push(*v as u8),
        MetadataValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::Bool(v) => out.push(u8::from(*v)),
        MetadataValue::String(s) => write_string(out, s),
        MetadataValue::Array(items) => {
            let elem = items.first().map_or(0, value_type);
            out.extend_from_slice(&elem.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                write_value(out, item);
            }
        }
        MetadataValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

pub fn string(s: &str) -> MetadataValue {
    MetadataValue::String(s.into())
}

pub fn strings(items: &[&str]) -> MetadataValue {
    MetadataValue::Array(items.iter().map(|s| string(s)).collect())
}

/// The SmolLM2 GGUF, or `None` after printing the skip notice (straight to stderr, past the test
/// harness's output capture, so that a skipped run is visible).
pub fn smollm2_path() -> Option<PathBuf> {
    samebits_testdata::cached(samebits_testdata::SMOLLM2_GGUF)
}
