//! [`Tensor`]: an immutable n-d array. Its bytes live in a shared [`ByteSource`] (a heap vector
//! or a memory-mapped weight file), so clones and slices of weights cost nothing.
//!
//! Data is little-endian and dense row-major. `Bool` elements are bytes holding 0 or 1; the
//! storage-only dtypes hold one byte per element as [`crate::small_types`] describes.

use crate::{DType, Element, Error, Result, invalid};
use std::fmt;
use std::sync::Arc;

/// Something that owns a run of bytes: a heap vector, a memory map.
pub trait ByteSource: Send + Sync {
    fn bytes(&self) -> &[u8];

    /// Says that the `len` bytes from `offset` will not be read again soon: a memory map lets
    /// their resident pages go (a later read brings them back from the file); other sources
    /// keep them.
    fn release(&self, _offset: usize, _len: usize) {}
}

impl<T: bytemuck::Pod + Send + Sync> ByteSource for Vec<T> {
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self)
    }
}

impl ByteSource for memmap2::Mmap {
    fn bytes(&self) -> &[u8] {
        self
    }

    #[cfg(unix)]
    fn release(&self, offset: usize, len: usize) {
        // SAFETY: a read-only map is never written through, so dropping its pages loses
        // nothing: the next read faults them in from the file again. An error only means the
        // pages stay resident.
        let _ =
            unsafe { self.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len) };
    }
}

#[derive(Clone)]
enum Data {
    Bytes {
        source: Arc<dyn ByteSource>,
        offset: usize,
        len: usize,
    },
    Strings(Arc<Vec<String>>),
}

/// An immutable n-d array of one [`DType`].
#[derive(Clone)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: Data,
}

/// The number of elements of `shape`, or an error when the product overflows.
pub fn checked_numel(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| invalid!("shape {shape:?} has more elements than fit in memory"))
}

impl Tensor {
    /// A tensor owning `data`, which must hold exactly `shape.iter().product()` elements.
    pub fn from_vec<T: Element>(shape: Vec<usize>, data: Vec<T>) -> Result<Tensor> {
        Self::check_len(&shape, data.len())?;
        let len = std::mem::size_of_val(data.as_slice());
        Ok(Tensor {
            dtype: T::DTYPE,
            shape,
            data: Data::Bytes {
                source: Arc::new(data),
                offset: 0,
                len,
            },
        })
    }

    /// An f32 tensor owning `data` (see [`crate::RecycledF32`]: its memory returns to the shelf
    /// when the last clone of this tensor is dropped).
    pub fn from_recycled(shape: Vec<usize>, data: crate::RecycledF32) -> Result<Tensor> {
        Self::check_len(&shape, data.len())?;
        let len = std::mem::size_of_val(&*data);
        Ok(Tensor {
            dtype: DType::F32,
            shape,
            data: Data::Bytes {
                source: Arc::new(data),
                offset: 0,
                len,
            },
        })
    }

    /// A boolean tensor.
    pub fn from_bools(shape: Vec<usize>, data: Vec<bool>) -> Result<Tensor> {
        let bytes: Vec<u8> = data.into_iter().map(u8::from).collect();
        let mut t = Tensor::from_vec(shape, bytes)?;
        t.dtype = DType::Bool;
        Ok(t)
    }

    /// A string tensor.
    pub fn from_strings(shape: Vec<usize>, data: Vec<String>) -> Result<Tensor> {
        Self::check_len(&shape, data.len())?;
        Ok(Tensor {
            dtype: DType::String,
            shape,
            data: Data::Strings(Arc::new(data)),
        })
    }

    /// A scalar (rank 0) tensor.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor::from_vec(vec![], vec![value]).expect("one element for rank 0")
    }

    /// Copies little-endian bytes into a new, properly aligned tensor of `dtype`.
    pub fn from_le_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Result<Tensor> {
        let numel = checked_numel(&shape)?;
        if dtype == DType::String {
            return Err(invalid!("string tensors have no byte representation"));
        }
        let want = numel
            .checked_mul(dtype.size())
            .ok_or_else(|| invalid!("shape {shape:?} is too large"))?;
        if bytes.len() != want {
            return Err(invalid!(
                "{dtype} tensor of shape {shape:?} needs {want} bytes, got {}",
                bytes.len()
            ));
        }
        if dtype == DType::Bool {
            if bytes.iter().any(|&b| b > 1) {
                return Err(invalid!("bool tensor holds a byte other than 0 or 1"));
            }
            let mut t = Tensor::from_vec(shape, bytes.to_vec())?;
            t.dtype = DType::Bool;
            return Ok(t);
        }
        if dtype.is_storage_only() {
            return Tensor::from_codes(dtype, shape, bytes.to_vec());
        }
        crate::with_numeric_type!(dtype, T => {
            let data: Vec<T> = bytes
                .chunks_exact(std::mem::size_of::<T>())
                .map(bytemuck::pod_read_unaligned)
                .collect();
            Tensor::from_vec(shape, data)
        }, else unreachable!("bool, string and storage-only dtypes handled above"))
    }

    /// A tensor of a storage-only dtype from its one-byte elements (codes of float8/float4,
    /// values of 4-/2-bit integers); errors on a byte that is no element of `dtype`.
    pub fn from_codes(dtype: DType, shape: Vec<usize>, codes: Vec<u8>) -> Result<Tensor> {
        if !dtype.is_storage_only() {
            return Err(invalid!("{dtype} is not a storage-only dtype"));
        }
        if let Some(bad) = codes
            .iter()
            .find(|&&b| !crate::small_types::is_valid_code(dtype, b))
        {
            return Err(invalid!("byte {bad:#04x} is not a {dtype} element"));
        }
        let mut t = Tensor::from_vec(shape, codes)?;
        t.dtype = dtype;
        Ok(t)
    }

    /// The one-byte elements of a storage-only tensor.
    pub fn as_codes(&self) -> Result<&[u8]> {
        if !self.dtype.is_storage_only() {
            return Err(Error::DTypeMismatch {
                actual: self.dtype.to_string(),
                requested: "a storage-only dtype".into(),
            });
        }
        self.bytes()
    }

    /// A tensor viewing `len` bytes at `offset` of a shared source (for example a memory-mapped
    /// weight file). Falls back to a copy when the bytes are not aligned for `dtype`.
    pub fn from_source(
        dtype: DType,
        shape: Vec<usize>,
        source: Arc<dyn ByteSource>,
        offset: usize,
        len: usize,
    ) -> Result<Tensor> {
        let all = source.bytes();
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= all.len())
            .ok_or_else(|| {
                invalid!(
                    "byte range {offset}..{offset}+{len} lies past the end of its {}-byte source",
                    all.len()
                )
            })?;
        let numel = checked_numel(&shape)?;
        if dtype == DType::String || numel.checked_mul(dtype.size()) != Some(len) {
            return Err(invalid!(
                "{dtype} tensor of shape {shape:?} cannot be {len} bytes long"
            ));
        }
        let aligned = (all.as_ptr() as usize + offset).is_multiple_of(dtype.size().max(1));
        if !aligned || dtype == DType::Bool || dtype.is_storage_only() {
            return Tensor::from_le_bytes(dtype, shape, &all[offset..end]);
        }
        Ok(Tensor {
            dtype,
            shape,
            data: Data::Bytes {
                source,
                offset,
                len,
            },
        })
    }

    fn check_len(shape: &[usize], len: usize) -> Result<()> {
        let numel = checked_numel(shape)?;
        if numel != len {
            return Err(invalid!(
                "shape {shape:?} holds {numel} elements, data has {len}"
            ));
        }
        Ok(())
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The same data under a new shape with the same number of elements.
    pub fn reshaped(&self, shape: Vec<usize>) -> Result<Tensor> {
        Self::check_len(&shape, self.numel())?;
        Ok(Tensor {
            dtype: self.dtype,
            shape,
            data: self.data.clone(),
        })
    }

    /// The raw little-endian bytes (what receipts hash). Errors for string tensors.
    pub fn bytes(&self) -> Result<&[u8]> {
        match &self.data {
            Data::Bytes {
                source,
                offset,
                len,
            } => Ok(&source.bytes()[*offset..*offset + *len]),
            Data::Strings(_) => Err(invalid!("string tensors have no byte representation")),
        }
    }

    /// Lets the memory behind `bytes` (a range of [`Tensor::bytes`]) go where it is a memory
    /// map ([`ByteSource::release`]): for a caller that has made its own copy (a repacked
    /// weight) and will not read these bytes again soon. The tensor stays valid; a later read
    /// brings the pages back.
    pub fn release_pages(&self, bytes: std::ops::Range<usize>) {
        if let Data::Bytes {
            source,
            offset,
            len,
        } = &self.data
            && bytes.start <= bytes.end
            && bytes.end <= *len
        {
            source.release(offset + bytes.start, bytes.len());
        }
    }

    /// The elements as a typed slice; errors when `T` is not this tensor's dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        if T::DTYPE != self.dtype {
            return Err(Error::DTypeMismatch {
                actual: self.dtype.to_string(),
                requested: T::DTYPE.to_string(),
            });
        }
        bytemuck::try_cast_slice(self.bytes()?)
            .map_err(|e| invalid!("tensor bytes cannot be viewed as {}: {e}", T::DTYPE))
    }

    /// The elements of a `Bool` tensor as bytes holding 0 or 1.
    pub fn as_bools(&self) -> Result<&[u8]> {
        if self.dtype != DType::Bool {
            return Err(Error::DTypeMismatch {
                actual: self.dtype.to_string(),
                requested: "bool".into(),
            });
        }
        self.bytes()
    }

    /// The elements of a `String` tensor.
    pub fn as_strings(&self) -> Result<&[String]> {
        match &self.data {
            Data::Strings(s) => Ok(s),
            Data::Bytes { .. } => Err(Error::DTypeMismatch {
                actual: self.dtype.to_string(),
                requested: "string".into(),
            }),
        }
    }

    /// The elements converted to f64 (for tolerant comparisons and integer reads of shapes);
    /// storage-only elements exactly.
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        if self.dtype == DType::Bool {
            return Ok(self.as_bools()?.iter().map(|&b| b as f64).collect());
        }
        if self.dtype.is_storage_only() {
            return Ok(self
                .as_codes()?
                .iter()
                .filter_map(|&c| crate::small_types::decode(self.dtype, c))
                .collect());
        }
        crate::with_numeric_type!(self.dtype, T => {
            Ok(self.as_slice::<T>()?.iter().map(|v| num_to_f64(*v)).collect())
        }, else Err(invalid!("string tensor has no numeric value")))
    }

    /// The elements of an integer tensor as i64 (for shape-like inputs: axes, shapes, pads).
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        match self.dtype {
            DType::I64 => Ok(self.as_slice::<i64>()?.to_vec()),
            DType::I32 => Ok(self.as_slice::<i32>()?.iter().map(|&v| v as i64).collect()),
            DType::I8 => Ok(self.as_slice::<i8>()?.iter().map(|&v| v as i64).collect()),
            DType::I16 => Ok(self.as_slice::<i16>()?.iter().map(|&v| v as i64).collect()),
            DType::U8 => Ok(self.as_slice::<u8>()?.iter().map(|&v| v as i64).collect()),
            DType::U16 => Ok(self.as_slice::<u16>()?.iter().map(|&v| v as i64).collect()),
            DType::U32 => Ok(self.as_slice::<u32>()?.iter().map(|&v| v as i64).collect()),
            DType::U64 => Ok(self.as_slice::<u64>()?.iter().map(|&v| v as i64).collect()),
            DType::I4 | DType::I2 => Ok(self.as_codes()?.iter().map(|&v| v as i8 as i64).collect()),
            DType::U4 | DType::U2 => Ok(self.as_codes()?.iter().map(|&v| v as i64).collect()),
            other => Err(invalid!("expected an integer tensor, got {other}")),
        }
    }
}

/// Converts any numeric element to f64 through its bytes (f16/bf16 included).
fn num_to_f64<T: Element>(v: T) -> f64 {
    let any: &dyn std::any::Any = &v;
    if let Some(x) = any.downcast_ref::<f32>() {
        *x as f64
    } else if let Some(x) = any.downcast_ref::<f64>() {
        *x
    } else if let Some(x) = any.downcast_ref::<half::f16>() {
        x.to_f64()
    } else if let Some(x) = any.downcast_ref::<half::bf16>() {
        x.to_f64()
    } else if let Some(x) = any.downcast_ref::<i8>() {
        *x as f64
    } else if let Some(x) = any.downcast_ref::<i16>() {
        *x as f64
    } else if let Some(x) = any.downcast_ref::<i32>() {
        *x as f64
    } else if let Some(x) = any.downcast_ref::<i64>() {
        *x as f64
    } else if let Some(x) = any.downcast_ref::<u8>() {
        *x as f64
    } else if let Some(x) = any.downcast_ref::<u16>() {
        *x as f64
    } else if let Some(x) = any.downcast_ref::<u32>() {
        *x as f64
    } else if let Some(x) = any.downcast_ref::<u64>() {
        *x as f64
    } else {
        unreachable!("every Element type is listed")
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor<{}>{:?}", self.dtype, self.shape)
    }
}

impl PartialEq for Tensor {
    /// Bit equality of dtype, shape and data.
    fn eq(&self, other: &Tensor) -> bool {
        if self.dtype != other.dtype || self.shape != other.shape {
            return false;
        }
        match (self.as_strings(), other.as_strings()) {
            (Ok(a), Ok(b)) => a == b,
            _ => self.bytes().ok() == other.bytes().ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_views_check_dtype_and_length() {
        let t = Tensor::from_vec(vec![2, 3], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
        assert_eq!(t.as_slice::<f32>().unwrap()[4], 5.0);
        assert!(t.as_slice::<i32>().is_err());
        assert!(Tensor::from_vec(vec![2, 2], vec![1f32]).is_err());
        assert_eq!(t.reshaped(vec![3, 2]).unwrap().shape(), &[3, 2]);
        assert!(t.reshaped(vec![4]).is_err());
    }

    #[test]
    fn le_bytes_round_trip_and_bool_validation() {
        let t =
            Tensor::from_le_bytes(DType::I32, vec![2], &[1, 0, 0, 0, 255, 255, 255, 255]).unwrap();
        assert_eq!(t.as_slice::<i32>().unwrap(), &[1, -1]);
        assert!(Tensor::from_le_bytes(DType::Bool, vec![1], &[2]).is_err());
        assert!(Tensor::from_le_bytes(DType::F32, vec![2], &[0; 7]).is_err());
    }

    #[test]
    fn source_ranges_are_bounds_checked_and_unaligned_views_copied() {
        let src: Arc<dyn ByteSource> = Arc::new(vec![0u8; 16]);
        assert!(Tensor::from_source(DType::F32, vec![4], src.clone(), 4, 16).is_err());
        let t = Tensor::from_source(DType::F32, vec![2], src.clone(), 1, 8).unwrap();
        assert_eq!(t.as_slice::<f32>().unwrap(), &[0.0, 0.0]);
        assert!(Tensor::from_source(DType::F32, vec![usize::MAX, 2], src, 0, 8).is_err());
    }
}
