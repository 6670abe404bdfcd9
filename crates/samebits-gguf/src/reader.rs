//! The GGUF container (versions 2 and 3, little-endian): header, metadata, tensor infos and the
//! aligned data section, read from a memory map or any [`ByteSource`].
//!
//! Every count, length and offset read from the file is checked against the bytes that remain
//! before anything is allocated, so no input makes the reader allocate more than the file holds
//! or panic. Layout, after the GGUF specification (`docs/gguf.md` in the ggml project):
//!
//! ```text
//! magic "GGUF" | version u32 | tensor_count u64 | kv_count u64
//! kv_count x (key: string, value_type u32, value)
//! tensor_count x (name: string, n_dims u32, dims u64[n_dims], ggml_type u32, offset u64)
//! padding to `general.alignment` (default 32) | tensor data (offsets relative to here)
//! string = len u64 + UTF-8 bytes; array = elem_type u32 + count u64 + elements
//! ```

use crate::metadata::{Metadata, MetadataValue};
use crate::{Error, Result};
use samebits_ggml::{GgmlType, dequantize_row};
use samebits_ir::{ByteSource, DType, Tensor};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
/// Deepest nesting of arrays accepted (GGUF files in use nest at most once).
const MAX_ARRAY_DEPTH: usize = 8;
/// Most dimensions of a tensor (ggml's `GGML_MAX_DIMS`).
const MAX_DIMS: u32 = 4;

/// Where a tensor is and what it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions in ggml order: `dims[0]` is the fastest-varying (the row length).
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of the data section.
    pub offset: u64,
    /// Size of the data in bytes.
    pub size: usize,
}

impl TensorInfo {
    /// The shape in row-major order (the reverse of `dims`), as the IR writes shapes.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// Elements per row (`dims[0]`; 1 for a scalar).
    pub fn row_len(&self) -> usize {
        self.dims.first().map_or(1, |&d| d as usize)
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }
}

/// A tensor of a block-quantized ggml type: its raw blocks, viewed in the file's memory.
#[derive(Clone)]
pub struct QuantizedTensor {
    ggml_type: GgmlType,
    shape: Vec<usize>,
    source: Arc<dyn ByteSource>,
    offset: usize,
    len: usize,
}

impl QuantizedTensor {
    pub fn ggml_type(&self) -> GgmlType {
        self.ggml_type
    }

    /// Row-major shape; the last dimension is the row length, a whole number of blocks.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The raw blocks of all rows, row after row.
    pub fn blocks(&self) -> &[u8] {
        &self.source.bytes()[self.offset..self.offset + self.len]
    }

    /// The raw blocks as a 1-D `u8` IR tensor viewing the same bytes (no copy).
    pub fn blocks_tensor(&self) -> Result<Tensor> {
        Ok(Tensor::from_source(
            DType::U8,
            vec![self.len],
            self.source.clone(),
            self.offset,
            self.len,
        )?)
    }

    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.shape.last().copied().unwrap_or(1)
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.ggml_type
            .row_bytes(self.row_len())
            .expect("checked when the file was read")
    }

    /// The whole tensor dequantized to an f32 tensor of the same shape (`docs/gguf.md`).
    pub fn dequantize(&self) -> Result<Tensor> {
        let mut out = vec![0f32; self.shape.iter().product()];
        dequantize_row(self.ggml_type, self.blocks(), &mut out)?;
        Ok(Tensor::from_vec(self.shape.clone(), out)?)
    }
}

/// The data of one tensor: a dense IR tensor when the ggml type is an IR dtype, else raw blocks.
#[derive(Clone, Debug)]
pub enum TensorData {
    Dense(Tensor),
    Quantized(QuantizedTensor),
}

impl TensorData {
    /// The tensor as f32: dense float tensors are converted exactly, quantized ones dequantized.
    pub fn to_f32(&self) -> Result<Tensor> {
        match self {
            TensorData::Dense(t) if t.dtype() == DType::F32 => Ok(t.clone()),
            TensorData::Dense(t) => {
                let values: Vec<f32> = t.to_f64_vec()?.into_iter().map(|v| v as f32).collect();
                Ok(Tensor::from_vec(t.shape().to_vec(), values)?)
            }
            TensorData::Quantized(q) => q.dequantize(),
        }
    }
}

/// A parsed GGUF file whose tensor data stays in the shared byte source (usually a memory map).
pub struct GgufFile {
    name: String,
    source: Arc<dyn ByteSource>,
    /// The file behind `source` when opened from a path ([`GgufFile::read_tensor_bytes`]).
    file: Option<std::fs::File>,
    version: u32,
    alignment: u64,
    data_start: usize,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

impl GgufFile {
    /// Memory-maps and parses the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let io = |error| Error::Io {
            file: name.clone(),
            error,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        // SAFETY: the map is read-only; like every reader of weight files we assume the file is
        // not truncated or rewritten while it is mapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        let mut gguf = GgufFile::from_source(&name, Arc::new(map))?;
        gguf.file = Some(file);
        Ok(gguf)
    }

    /// Parses GGUF bytes held by `source`; `name` is the file name used in errors.
    pub fn from_source(name: &str, source: Arc<dyn ByteSource>) -> Result<GgufFile> {
        let bytes = source.bytes();
        let mut cursor = Cursor {
            bytes,
            pos: 0,
            file: name,
        };
        if cursor.take(4, "magic")? != MAGIC {
            return Err(cursor.malformed("magic", "not a GGUF file (magic is not \"GGUF\")"));
        }
        let version = cursor.u32("version")?;
        if version != 2 && version != 3 {
            return Err(cursor.malformed(
                "version",
                &format!("version {version} is not supported (only 2 and 3)"),
            ));
        }
        let tensor_count = cursor.u64("tensor count")?;
        let kv_count = cursor.u64("metadata count")?;
        // A key/value pair takes at least 8 (key length) + 4 (type) + 1 bytes.
        let kv_count = cursor.count(kv_count, 13, "metadata count")?;
        let mut entries = Vec::with_capacity(kv_count);
        for i in 0..kv_count {
            let key = cursor.string(&format!("metadata key #{i}"))?;
            let at = format!("metadata key `{key}`");
            let value_type = cursor.u32(&at)?;
            let value = cursor.value(value_type, &at, 0)?;
            entries.push((key, value));
        }
        let metadata = Metadata::new(name, entries)?;
        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(MetadataValue::U32(a)) if a.is_power_of_two() => u64::from(*a),
            Some(other) => {
                return Err(cursor.malformed(
                    "metadata key `general.alignment`",
                    &format!("must be a u32 power of two, is {other:?}"),
                ));
            }
        };
        // A tensor info takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset).
        let tensor_count = cursor.count(tensor_count, 24, "tensor count")?;
        let mut infos = Vec::with_capacity(tensor_count);
        for i in 0..tensor_count {
            infos.push(cursor.tensor_info(i)?);
        }
        let data_start = align_up(cursor.pos as u64, alignment)
            .ok_or_else(|| cursor.malformed("data section", "offset overflows"))?;
        let mut tensor_index = HashMap::with_capacity(infos.len());
        for (i, info) in infos.iter().enumerate() {
            let tensor_error = |message: String| Error::Tensor {
                file: name.into(),
                tensor: info.name.clone(),
                message,
            };
            if tensor_index.insert(info.name.clone(), i).is_some() {
                return Err(tensor_error("appears more than once".into()));
            }
            if !info.offset.is_multiple_of(alignment) {
                return Err(tensor_error(format!(
                    "offset {} is not a multiple of the alignment {alignment}",
                    info.offset
                )));
            }
            let end = data_start
                .checked_add(info.offset)
                .and_then(|s| s.checked_add(info.size as u64));
            if end.is_none_or(|end| end > bytes.len() as u64) {
                return Err(tensor_error(format!(
                    "data ({} bytes at offset {}) lies past the end of the {}-byte file",
                    info.size,
                    info.offset,
                    bytes.len()
                )));
            }
        }
        Ok(GgufFile {
            name: name.into(),
            data_start: data_start as usize,
            source,
            file: None,
            version,
            alignment,
            metadata,
            tensors: infos,
            tensor_index,
        })
    }

    /// The file name used in errors.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// `general.alignment`, or 32.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Byte offset of the data section in the file.
    pub fn data_start(&self) -> usize {
        self.data_start
    }

    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Forgets the metadata entries of `keys` once their values have been used, so that a loaded
    /// model does not hold them twice (a 49k-token vocabulary and its merges are ~8 MB of
    /// strings here, and as much again in the tokenizer built from them).
    pub fn remove_metadata(&mut self, keys: &[&str]) {
        self.metadata.remove(keys);
    }

    /// Tensor infos in file order.
    pub fn tensor_infos(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    fn require_info(&self, name: &str) -> Result<&TensorInfo> {
        self.tensor_info(name).ok_or_else(|| Error::Tensor {
            file: self.name.clone(),
            tensor: name.into(),
            message: "no such tensor in the file".into(),
        })
    }

    /// The raw bytes of a tensor.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        let info = self.require_info(name)?;
        let start = self.data_start + info.offset as usize;
        Ok(&self.source.bytes()[start..start + info.size])
    }

    /// Copies bytes `offset..offset + out.len()` of tensor `name` into `out`. A file opened with
    /// [`GgufFile::open`] is read with positioned reads, not through its memory map, so that a
    /// loader that repacks the weights does not leave the mapped pages resident as well.
    pub fn read_tensor_bytes(&self, name: &str, offset: usize, out: &mut [u8]) -> Result<()> {
        let info = self.require_info(name)?;
        if offset
            .checked_add(out.len())
            .is_none_or(|end| end > info.size)
        {
            return Err(Error::Tensor {
                file: self.name.clone(),
                tensor: name.into(),
                message: format!(
                    "bytes {offset}..{} lie past its {} bytes",
                    offset.saturating_add(out.len()),
                    info.size
                ),
            });
        }
        let start = self.data_start + info.offset as usize + offset;
        #[cfg(unix)]
        if let Some(file) = &self.file {
            use std::os::unix::fs::FileExt;
            return file
                .read_exact_at(out, start as u64)
                .map_err(|error| Error::Io {
                    file: self.name.clone(),
                    error,
                });
        }
        out.copy_from_slice(&self.source.bytes()[start..start + out.len()]);
        Ok(())
    }

    /// The data of a tensor, viewed in place: an IR tensor for F32, F16, BF16, F64 and the integer
    /// types, raw blocks for quantized types.
    pub fn tensor(&self, name: &str) -> Result<TensorData> {
        let info = self.require_info(name)?;
        let offset = self.data_start + info.offset as usize;
        let shape = info.shape();
        let dtype = match info.ggml_type {
            GgmlType::F32 => Some(DType::F32),
            GgmlType::F16 => Some(DType::F16),
            GgmlType::BF16 => Some(DType::BF16),
            GgmlType::F64 => Some(DType::F64),
            GgmlType::I8 => Some(DType::I8),
            GgmlType::I16 => Some(DType::I16),
            GgmlType::I32 => Some(DType::I32),
            GgmlType::I64 => Some(DType::I64),
            _ => None,
        };
        Ok(match dtype {
            Some(dtype) => TensorData::Dense(
                Tensor::from_source(dtype, shape, self.source.clone(), offset, info.size).map_err(
                    |e| Error::Tensor {
                        file: self.name.clone(),
                        tensor: name.into(),
                        message: e.to_string(),
                    },
                )?,
            ),
            None => TensorData::Quantized(QuantizedTensor {
                ggml_type: info.ggml_type,
                shape,
                source: self.source.clone(),
                offset,
                len: info.size,
            }),
        })
    }
}

impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("metadata_keys", &self.metadata.entries().len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl fmt::Debug for QuantizedTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QuantizedTensor<{}>{:?}", self.ggml_type, self.shape)
    }
}

fn align_up(pos: u64, alignment: u64) -> Option<u64> {
    pos.checked_next_multiple_of(alignment)
}

/// A bounds-checked little-endian reader over the file bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    file: &'a str,
}

impl<'a> Cursor<'a> {
    fn malformed(&self, at: &str, message: &str) -> Error {
        Error::Malformed {
            file: self.file.into(),
            at: at.into(),
            message: message.into(),
        }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize, at: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.malformed(
                at,
                &format!(
                    "needs {n} bytes at offset {} but the file ends after {}",
                    self.pos,
                    self.remaining()
                ),
            ));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, at: &str) -> Result<[u8; N]> {
        Ok(self.take(N, at)?.try_into().expect("took N bytes"))
    }

    fn u32(&mut self, at: &str) -> Result<u32> {
        self.array(at).map(u32::from_le_bytes)
    }

    fn u64(&mut self, at: &str) -> Result<u64> {
        self.array(at).map(u64::from_le_bytes)
    }

    /// Checks that `count` items of at least `min_size` bytes each fit in the rest of the file.
    fn count(&self, count: u64, min_size: usize, at: &str) -> Result<usize> {
        let fits = usize::try_from(count).ok().filter(|&c| {
            c.checked_mul(min_size.max(1))
                .is_some_and(|b| b <= self.remaining())
        });
        fits.ok_or_else(|| {
            self.malformed(
                at,
                &format!(
                    "{count} items of at least {min_size} bytes do not fit in the {} bytes left",
                    self.remaining()
                ),
            )
        })
    }

    fn string(&mut self, at: &str) -> Result<String> {
        let len = self.u64(at)?;
        let len = self.count(len, 1, at)?;
        let bytes = self.take(len, at)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| self.malformed(at, "string is not valid UTF-8"))
    }

    /// The smallest encoding of a value of `value_type`, for checking array counts.
    fn min_value_size(value_type: u32) -> usize {
        match value_type {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            8 | 10..=12 => 8,
            _ => 12,
        }
    }

    fn value(&mut self, value_type: u32, at: &str, depth: usize) -> Result<MetadataValue> {
        Ok(match value_type {
            0 => MetadataValue::U8(self.array::<1>(at)?[0]),
            1 => MetadataValue::I8(self.array::<1>(at)?[0] as i8),
            2 => MetadataValue::U16(u16::from_le_bytes(self.array(at)?)),
            3 => MetadataValue::I16(i16::from_le_bytes(self.array(at)?)),
            4 => MetadataValue::U32(self.u32(at)?),
            5 => MetadataValue::I32(i32::from_le_bytes(self.array(at)?)),
            6 => MetadataValue::F32(f32::from_le_bytes(self.array(at)?)),
            7 => match self.array::<1>(at)?[0] {
                0 => MetadataValue::Bool(false),
                1 => MetadataValue::Bool(true),
                b => return Err(self.malformed(at, &format!("bool byte is {b}, not 0 or 1"))),
            },
            8 => MetadataValue::String(self.string(at)?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.malformed(
                        at,
                        &format!("arrays nest deeper than {MAX_ARRAY_DEPTH} levels"),
                    ));
                }
                let elem_type = self.u32(at)?;
                let count = self.u64(at)?;
                let count = self.count(count, Self::min_value_size(elem_type), at)?;
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    items.push(self.value(elem_type, at, depth + 1)?);
                }
                MetadataValue::Array(items)
            }
            10 => MetadataValue::U64(self.u64(at)?),
            11 => MetadataValue::I64(i64::from_le_bytes(self.array(at)?)),
            12 => MetadataValue::F64(f64::from_le_bytes(self.array(at)?)),
            other => return Err(self.malformed(at, &format!("unknown value type {other}"))),
        })
    }

    fn tensor_info(&mut self, i: usize) -> Result<TensorInfo> {
        let name = self.string(&format!("tensor #{i} name"))?;
        let at = format!("tensor `{name}`");
        let n_dims = self.u32(&at)?;
        if n_dims > MAX_DIMS {
            return Err(self.malformed(
                &at,
                &format!("has {n_dims} dimensions, at most {MAX_DIMS} allowed"),
            ));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(self.u64(&at)?);
        }
        let type_id = self.u32(&at)?;
        let ggml_type = GgmlType::from_id(type_id)
            .ok_or_else(|| self.malformed(&at, &format!("unknown ggml type {type_id}")))?;
        let offset = self.u64(&at)?;
        let numel = dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?));
        let row_len = dims.first().map_or(Some(1), |&d| usize::try_from(d).ok());
        let size = numel.zip(row_len).and_then(|(numel, row_len)| {
            let row_bytes = ggml_type.row_bytes(row_len)?;
            if row_len == 0 {
                return Some(0);
            }
            row_bytes.checked_mul(numel / row_len)
        });
        let size = size.ok_or_else(|| {
            self.malformed(
                &at,
                &format!(
                    "dims {dims:?} of type {ggml_type} overflow or split a block of {}",
                    ggml_type.block_elems()
                ),
            )
        })?;
        Ok(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
            size,
        })
    }
}
