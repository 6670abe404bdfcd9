//! [`Checkpoint`]: a Hugging Face model folder: `config.json` and the weights in safetensors
//! files (`model.safetensors`, or shards listed by `model.safetensors.index.json`), each
//! memory-mapped once; tensors are views of the maps. Also [`model_sha256`], the digest receipts
//! record for a model file or folder.

use crate::{LlmError, Result};
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};
use samebits_ggml::{GgmlType, dequantize_row};
use samebits_ir::{DType, Tensor};
use samebits_runtime::hashing::{sha256_bytes, sha256_file};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One tensor of a safetensors file: where its bytes are and what they hold.
struct Stored {
    map: Arc<Mmap>,
    file: String,
    dtype: Dtype,
    shape: Vec<usize>,
    offset: usize,
    len: usize,
}

/// A checkpoint folder with its parsed `config.json` and the index of its tensors.
pub struct Checkpoint {
    pub dir: PathBuf,
    pub config: serde_json::Value,
    tensors: HashMap<String, Stored>,
}

impl Checkpoint {
    /// Reads `dir/config.json` and maps the safetensors files.
    pub fn open(dir: &Path) -> Result<Checkpoint> {
        let config = read_json(&dir.join("config.json"))?;
        let index = dir.join("model.safetensors.index.json");
        let files: Vec<String> = if index.exists() {
            let json = read_json(&index)?;
            let map = json["weight_map"]
                .as_object()
                .ok_or_else(|| model_error(&index, "has no `weight_map` object".into()))?;
            let mut files: Vec<String> = map
                .values()
                .map(|v| {
                    v.as_str().map(String::from).ok_or_else(|| {
                        model_error(&index, format!("weight_map value {v} is not a file name"))
                    })
                })
                .collect::<Result<_>>()?;
            files.sort();
            files.dedup();
            files
        } else {
            vec!["model.safetensors".into()]
        };
        let mut tensors = HashMap::new();
        for file in files {
            // Shards are plain file names in the folder: the receipt's folder digest covers them.
            let path = file_in_folder(dir, &file, false)
                .map_err(|message| model_error(&index, format!("weight_map: {message}")))?;
            let opened = std::fs::File::open(&path)
                .map_err(|e| model_error(&path, format!("cannot open: {e}")))?;
            // SAFETY: the map is read-only; like every memory-mapped weight file, the file must
            // not be truncated while the model is loaded.
            let map = Arc::new(
                unsafe { Mmap::map(&opened) }
                    .map_err(|e| model_error(&path, format!("cannot map: {e}")))?,
            );
            let (header_len, metadata) = SafeTensors::read_metadata(&map)
                .map_err(|e| model_error(&path, format!("not a safetensors file: {e}")))?;
            let data_start = 8 + header_len;
            for (name, info) in metadata.tensors() {
                let (begin, end) = info.data_offsets;
                tensors.insert(
                    name,
                    Stored {
                        map: map.clone(),
                        file: file.clone(),
                        dtype: info.dtype,
                        shape: info.shape.clone(),
                        offset: data_start + begin,
                        len: end - begin,
                    },
                );
            }
        }
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            config,
            tensors,
        })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    fn stored(&self, name: &str) -> Result<&Stored> {
        self.tensors
            .get(name)
            .ok_or_else(|| self.error(format!("tensor {name} is missing")))
    }

    /// The shape of tensor `name`.
    pub fn shape(&self, name: &str) -> Result<&[usize]> {
        Ok(&self.stored(name)?.shape)
    }

    /// Tensor `name` as its raw bytes (a view of the map) with its element type as a ggml float
    /// type: F32, F16 or BF16, the types the weight ops read.
    pub fn raw(&self, name: &str) -> Result<(GgmlType, Tensor)> {
        let s = self.stored(name)?;
        let ggml_type = match s.dtype {
            Dtype::F32 => GgmlType::F32,
            Dtype::F16 => GgmlType::F16,
            Dtype::BF16 => GgmlType::BF16,
            other => {
                return Err(self.error(format!(
                    "tensor {name} in {} is {other:?}; only F32, F16 and BF16 are supported",
                    s.file
                )));
            }
        };
        let bytes = Tensor::from_source(DType::U8, vec![s.len], s.map.clone(), s.offset, s.len)?;
        Ok((ggml_type, bytes))
    }

    /// Tensor `name` in f32 with its shape: F32 viewed in place, F16 and BF16 widened (exactly).
    pub fn f32(&self, name: &str) -> Result<Tensor> {
        let (ggml_type, bytes) = self.raw(name)?;
        let s = self.stored(name)?;
        if ggml_type == GgmlType::F32 {
            return Ok(Tensor::from_source(
                DType::F32,
                s.shape.clone(),
                s.map.clone(),
                s.offset,
                s.len,
            )?);
        }
        let mut values = vec![0f32; s.shape.iter().product()];
        dequantize_row(ggml_type, bytes.bytes()?, &mut values)
            .map_err(samebits_gguf::Error::Quant)?;
        Ok(Tensor::from_vec(s.shape.clone(), values)?)
    }

    /// An error about this checkpoint.
    pub fn error(&self, message: String) -> LlmError {
        model_error(&self.dir, message)
    }

    /// `config.json`'s field `key`, when present and not null.
    pub fn field(&self, key: &str) -> Option<&serde_json::Value> {
        self.config.get(key).filter(|v| !v.is_null())
    }

    /// `config.json`'s non-negative integer `key`.
    pub fn usize_field(&self, key: &str) -> Result<usize> {
        self.field(key)
            .and_then(|v| v.as_u64())
            .map(|v| v as usize)
            .ok_or_else(|| self.config_error(key, "a non-negative integer"))
    }

    /// `config.json`'s number `key`, rounded to f32.
    pub fn f32_field(&self, key: &str) -> Result<f32> {
        self.field(key)
            .and_then(|v| v.as_f64())
            .map(|v| v as f32)
            .ok_or_else(|| self.config_error(key, "a number"))
    }

    /// `config.json`'s string `key`.
    pub fn str_field(&self, key: &str) -> Result<&str> {
        self.field(key)
            .and_then(|v| v.as_str())
            .ok_or_else(|| self.config_error(key, "a string"))
    }

    fn config_error(&self, key: &str, expected: &str) -> LlmError {
        let found = self
            .config
            .get(key)
            .map_or("nothing".to_string(), |v| v.to_string());
        model_error(
            &self.dir.join("config.json"),
            format!("field `{key}` must be {expected}, found {found}"),
        )
    }
}

/// The parsed JSON file at `path`.
pub fn read_json(path: &Path) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| model_error(path, format!("cannot read: {e}")))?;
    serde_json::from_str(&text).map_err(|e| model_error(path, format!("not JSON: {e}")))
}

/// `dir/name` when `name` stays inside the folder: a relative path without `..` (with
/// `subfolders`, else a plain file name) that, symbolic links resolved, still lies in `dir`. A
/// checkpoint's own files name their neighbours; anything else in them (an absolute path,
/// `../`, a link out of the folder) is refused, since an untrusted folder could otherwise make
/// samebits read, and a receipt vouch for, files the folder's digest does not cover.
pub(crate) fn file_in_folder(
    dir: &Path,
    name: &str,
    subfolders: bool,
) -> std::result::Result<PathBuf, String> {
    use std::path::Component;
    let relative = Path::new(name);
    let components: Vec<Component> = relative.components().collect();
    let plain = components.iter().all(|c| matches!(c, Component::Normal(_)));
    if components.is_empty() || !plain || (!subfolders && components.len() != 1) {
        return Err(format!(
            "{name:?} is not a {} inside the model folder",
            if subfolders {
                "relative path"
            } else {
                "file name"
            }
        ));
    }
    let path = dir.join(relative);
    samebits_ir::paths::resolve_inside(dir, &path).map_err(|why| format!("{name:?} {why}"))?;
    Ok(path)
}

fn model_error(path: &Path, message: String) -> LlmError {
    LlmError::Model {
        model: path.display().to_string(),
        message,
    }
}

/// The digest receipts record for a model: a file's sha256; for a checkpoint folder, the sha256
/// of the listing `<sha256 of the file>  <file name>\n` (as `sha256sum` prints it) of every
/// `.json` and `.safetensors` file directly in the folder, and of a sentence-transformers Pooling
/// module's `config.json` (as `1_Pooling/config.json`) when the folder has one, sorted by name.
pub fn model_sha256(path: &Path) -> Result<String> {
    if !path.is_dir() {
        return Ok(sha256_file(path)?);
    }
    let entries =
        std::fs::read_dir(path).map_err(|e| model_error(path, format!("cannot list: {e}")))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| model_error(path, format!("cannot list: {e}")))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_file() && (name.ends_with(".json") || name.ends_with(".safetensors")) {
            names.push(name);
        }
    }
    if let Some(config) = crate::embed::pooling_config(path)? {
        let relative = config.strip_prefix(path).unwrap_or(&config);
        names.push(relative.to_string_lossy().into_owned());
    }
    names.sort();
    let mut listing = String::new();
    for name in names {
        let digest = sha256_file(&path.join(&name))?;
        listing.push_str(&format!("{digest}  {name}\n"));
    }
    Ok(sha256_bytes(listing.as_bytes()))
}
