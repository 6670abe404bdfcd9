//! GGUF metadata: the typed key/value pairs of the header ([`MetadataValue`]) and their lookup
//! with typed getters whose errors name the file and the key ([`Metadata`]).

use crate::{Error, Result};
use std::collections::HashMap;

/// One metadata value, with the GGUF value type it was stored as.
#[derive(Clone, Debug, PartialEq)]
pub enum MetadataValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    /// An array of values of one type (arrays may nest).
    Array(Vec<MetadataValue>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl MetadataValue {
    /// The GGUF name of the value type (`u32`, `string`, `array`, ...), for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            MetadataValue::U8(_) => "u8",
            MetadataValue::I8(_) => "i8",
            MetadataValue::U16(_) => "u16",
            MetadataValue::I16(_) => "i16",
            MetadataValue::U32(_) => "u32",
            MetadataValue::I32(_) => "i32",
            MetadataValue::F32(_) => "f32",
            MetadataValue::Bool(_) => "bool",
            MetadataValue::String(_) => "string",
            MetadataValue::Array(_) => "array",
            MetadataValue::U64(_) => "u64",
            MetadataValue::I64(_) => "i64",
            MetadataValue::F64(_) => "f64",
        }
    }

    /// The value as an unsigned integer, when it is an integer of any width that is not negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetadataValue::U8(v) => Some(v.into()),
            MetadataValue::U16(v) => Some(v.into()),
            MetadataValue::U32(v) => Some(v.into()),
            MetadataValue::U64(v) => Some(v),
            MetadataValue::I8(v) => u64::try_from(v).ok(),
            MetadataValue::I16(v) => u64::try_from(v).ok(),
            MetadataValue::I32(v) => u64::try_from(v).ok(),
            MetadataValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer, when it is an integer that fits in i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            MetadataValue::I8(v) => Some(v.into()),
            MetadataValue::I16(v) => Some(v.into()),
            MetadataValue::I32(v) => Some(v.into()),
            MetadataValue::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value of an `f32` or `f64` entry (an f64 is rounded to nearest).
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            MetadataValue::F32(v) => Some(v),
            MetadataValue::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetadataValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetadataValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[MetadataValue]> {
        match self {
            MetadataValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// The metadata of one GGUF file, in file order, with lookup by key.
#[derive(Clone, Debug)]
pub struct Metadata {
    file: String,
    entries: Vec<(String, MetadataValue)>,
    index: HashMap<String, usize>,
}

impl Metadata {
    /// Metadata of `file` (the name used in errors); duplicate keys are an error.
    pub(crate) fn new(file: &str, entries: Vec<(String, MetadataValue)>) -> Result<Metadata> {
        let mut index = HashMap::with_capacity(entries.len());
        for (i, (key, _)) in entries.iter().enumerate() {
            if index.insert(key.clone(), i).is_some() {
                return Err(Error::Malformed {
                    file: file.into(),
                    at: format!("metadata key `{key}`"),
                    message: "appears more than once".into(),
                });
            }
        }
        Ok(Metadata {
            file: file.into(),
            entries,
            index,
        })
    }

    /// Removes the entries of `keys` (absent keys are ignored).
    pub fn remove(&mut self, keys: &[&str]) {
        self.entries
            .retain(|(key, _)| !keys.contains(&key.as_str()));
        self.index = (self.entries.iter().enumerate())
            .map(|(i, (key, _))| (key.clone(), i))
            .collect();
    }

    /// The entries in file order.
    pub fn entries(&self) -> &[(String, MetadataValue)] {
        &self.entries
    }

    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// The value of a key that must be present.
    pub fn require(&self, key: &str) -> Result<&MetadataValue> {
        self.get(key).ok_or_else(|| Error::MissingKey {
            file: self.file.clone(),
            key: key.into(),
        })
    }

    fn wrong_type(&self, key: &str, expected: &str, found: &MetadataValue) -> Error {
        Error::WrongType {
            file: self.file.clone(),
            key: key.into(),
            expected: expected.into(),
            found: found.type_name().into(),
        }
    }

    fn typed<'a, T>(
        &'a self,
        key: &str,
        expected: &str,
        read: impl Fn(&'a MetadataValue) -> Option<T>,
    ) -> Result<T> {
        let value = self.require(key)?;
        read(value).ok_or_else(|| self.wrong_type(key, expected, value))
    }

    /// A non-negative integer of any width.
    pub fn u64(&self, key: &str) -> Result<u64> {
        self.typed(key, "a non-negative integer", MetadataValue::as_u64)
    }

    /// A non-negative integer that fits in `usize`.
    pub fn usize(&self, key: &str) -> Result<usize> {
        self.typed(key, "a non-negative integer", |v| {
            v.as_u64().and_then(|v| usize::try_from(v).ok())
        })
    }

    pub fn f32(&self, key: &str) -> Result<f32> {
        self.typed(key, "a float", MetadataValue::as_f32)
    }

    pub fn str(&self, key: &str) -> Result<&str> {
        self.typed(key, "a string", MetadataValue::as_str)
    }

    pub fn bool(&self, key: &str) -> Result<bool> {
        self.typed(key, "a bool", MetadataValue::as_bool)
    }

    /// An array whose every element satisfies `read`.
    fn array<'a, T>(
        &'a self,
        key: &str,
        expected: &str,
        read: impl Fn(&'a MetadataValue) -> Option<T>,
    ) -> Result<Vec<T>> {
        self.typed(key, expected, |v| v.as_array()?.iter().map(&read).collect())
    }

    pub fn str_array(&self, key: &str) -> Result<Vec<&str>> {
        self.array(key, "an array of strings", MetadataValue::as_str)
    }

    pub fn i64_array(&self, key: &str) -> Result<Vec<i64>> {
        self.array(key, "an array of integers", MetadataValue::as_i64)
    }

    pub fn f32_array(&self, key: &str) -> Result<Vec<f32>> {
        self.array(key, "an array of floats", MetadataValue::as_f32)
    }
}
