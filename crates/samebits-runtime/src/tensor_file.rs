//! Tensor files: NumPy `.npy` (format versions 1–3, little-endian, C order) and ONNX
//! `TensorProto` `.pb` files. Every size read from a file is checked against the file's length
//! before anything is allocated.

use crate::{Result, RuntimeError};
use samebits_ir::{DType, Tensor, checked_numel};
use std::path::Path;

const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// Reads a tensor from `.npy` or `.pb`, chosen by the file's extension.
pub fn read_tensor(path: &Path) -> Result<Tensor> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => read_npy(path),
        Some("pb") => samebits_onnx::read_tensor_pb(path).map_err(RuntimeError::from),
        _ => Err(RuntimeError::bad_file(
            path,
            "unknown tensor file type (expected .npy or .pb)",
        )),
    }
}

fn npy_descr(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
        // NumPy has no bfloat16, float8, float4, 4- or 2-bit integer, and no fixed-size string.
        DType::BF16
        | DType::String
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1
        | DType::I4
        | DType::U4
        | DType::I2
        | DType::U2 => return None,
    })
}

fn dtype_of_descr(descr: &str) -> Option<DType> {
    let normalized = descr.replace('=', "<");
    DType::ALL.into_iter().find(|&d| {
        npy_descr(d).is_some_and(|n| {
            n == normalized || (n.starts_with('|') && normalized == format!("<{}", &n[1..]))
        })
    })
}

/// Reads a `.npy` file.
pub fn read_npy(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).map_err(|e| RuntimeError::io(path, e))?;
    parse_npy(&bytes)
        .map_err(|m| RuntimeError::bad_file(path, format!("not a valid .npy file: {m}")))
}

/// Parses `.npy` bytes.
pub fn parse_npy(bytes: &[u8]) -> Result<Tensor, String> {
    if bytes.len() < 10 || &bytes[..6] != NPY_MAGIC {
        return Err("missing the \\x93NUMPY magic".into());
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unsupported format version {v}")),
    };
    let end = start
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or("header is longer than the file")?;
    let header = std::str::from_utf8(&bytes[start..end]).map_err(|_| "header is not text")?;
    let descr = dict_value(header, "descr").ok_or("header has no 'descr'")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let dtype = dtype_of_descr(descr).ok_or_else(|| format!("unsupported dtype '{descr}'"))?;
    if dict_value(header, "fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err("Fortran-ordered arrays are not supported; save with C order".into());
    }
    let shape_text = dict_value(header, "shape").ok_or("header has no 'shape'")?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or("shape is not a tuple")?;
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad dim '{s}' in shape"))
        })
        .collect::<Result<_, _>>()?;
    let numel = checked_numel(&shape).map_err(|e| e.to_string())?;
    let data = &bytes[end..];
    let want = numel
        .checked_mul(dtype.size())
        .ok_or("shape is too large")?;
    if data.len() != want {
        return Err(format!(
            "shape {shape:?} of {dtype} needs {want} data bytes, the file has {}",
            data.len()
        ));
    }
    Tensor::from_le_bytes(dtype, shape, data).map_err(|e| e.to_string())
}

/// The text of `key`'s value in a Python dict literal (up to the next top-level comma).
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = header[at + key.len() + 2..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let mut depth = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(rest[..i].trim()),
            _ => {}
        }
    }
    Some(rest.trim())
}

/// `.npy` bytes (format version 1) for a tensor.
pub fn npy_bytes(t: &Tensor) -> Result<Vec<u8>, String> {
    let descr = npy_descr(t.dtype())
        .ok_or_else(|| format!("{} tensors cannot be written as .npy", t.dtype()))?;
    let dims: Vec<String> = t.shape().iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad with spaces so the data starts on a 64-byte boundary; end with a newline.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + t.numel() * t.dtype().size());
    out.extend_from_slice(NPY_MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(t.bytes().map_err(|e| e.to_string())?);
    Ok(out)
}

/// Writes a tensor as `.npy`.
pub fn write_npy(path: &Path, t: &Tensor) -> Result<()> {
    let bytes = npy_bytes(t).map_err(|m| RuntimeError::bad_file(path, m))?;
    std::fs::write(path, bytes).map_err(|e| RuntimeError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trips_every_supported_dtype() {
        let t = Tensor::from_vec(vec![2, 3], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
        let bytes = npy_bytes(&t).unwrap();
        assert_eq!(
            (10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize) % 64,
            0
        );
        assert_eq!(parse_npy(&bytes).unwrap(), t);
        let b = Tensor::from_bools(vec![3], vec![true, false, true]).unwrap();
        assert_eq!(parse_npy(&npy_bytes(&b).unwrap()).unwrap(), b);
        let s = Tensor::scalar(7i64);
        assert_eq!(parse_npy(&npy_bytes(&s).unwrap()).unwrap(), s);
    }

    #[test]
    fn reads_a_file_numpy_wrote() {
        // The bytes NumPy 2.4.6 writes for np.save(f, np.arange(3, dtype='<i2').reshape(1, 3)).
        let mut bytes =
            b"\x93NUMPY\x01\x00v\x00{'descr': '<i2', 'fortran_order': False, 'shape': (1, 3), }"
                .to_vec();
        bytes.extend(std::iter::repeat_n(b' ', 118 - 59 - 1));
        bytes.push(b'\n');
        bytes.extend_from_slice(&[0, 0, 1, 0, 2, 0]);
        let t = parse_npy(&bytes).unwrap();
        assert_eq!(t.shape(), &[1, 3]);
        assert_eq!(t.as_slice::<i16>().unwrap(), &[0, 1, 2]);
    }

    #[test]
    fn corrupt_files_are_errors_not_panics() {
        let good = npy_bytes(&Tensor::from_vec(vec![4], vec![0f64; 4]).unwrap()).unwrap();
        for cut in 0..good.len() {
            assert!(
                parse_npy(&good[..cut]).is_err(),
                "truncated at {cut} accepted"
            );
        }
        let mut huge = good.clone();
        let header = String::from_utf8_lossy(&huge[10..]).replace("(4,)", "(9999999999999,)");
        huge.truncate(10);
        huge.extend_from_slice(header.as_bytes());
        assert!(parse_npy(&huge).is_err());
        assert!(parse_npy(b"\x93NUMPY\x09\x00\x00\x00").is_err());
    }
}
