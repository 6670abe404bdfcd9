//! SHA-256 digests as receipts write them: lower-case hex of the raw little-endian bytes of a
//! tensor (strings: each as its UTF-8 length, u64 little-endian, then its bytes), or of a file.
//!
//! A NaN's payload and sign are not values: IEEE arithmetic creates hardware-defined NaNs (x86
//! `0xffc00000`, Arm `0x7fc00000`, NVIDIA `0x7fffffff`), so digests hash every NaN of a floating
//! tensor as the canonical quiet NaN of its type (contract section `Arithmetic`).

use crate::{Result, RuntimeError};
use samebits_ir::{DType, Tensor, Value};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

/// Lower-case hex of a digest.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The digest of a tensor's data (not its shape or dtype, which receipts record beside it).
pub fn sha256_tensor(t: &Tensor) -> String {
    match t.as_strings() {
        Ok(strings) => {
            let mut h = Sha256::new();
            for s in strings {
                h.update((s.len() as u64).to_le_bytes());
                h.update(s.as_bytes());
            }
            hex(&h.finalize())
        }
        Err(_) => sha256_bytes(&canonical_nan_bytes(
            t.dtype(),
            t.bytes().expect("non-string tensors have bytes"),
        )),
    }
}

/// `bytes` (elements of `dtype`, little-endian) with every NaN replaced by the canonical quiet
/// NaN of the type; borrowed when there is none (or the type has no NaN).
pub fn canonical_nan_bytes(dtype: DType, bytes: &[u8]) -> Cow<'_, [u8]> {
    fn canonical<const N: usize>(
        bytes: &[u8],
        is_nan: impl Fn([u8; N]) -> bool,
        nan: [u8; N],
    ) -> Cow<'_, [u8]> {
        let nan_at = |c: &[u8]| is_nan(c.try_into().expect("chunks of N bytes"));
        if !bytes.chunks_exact(N).any(nan_at) {
            return Cow::Borrowed(bytes);
        }
        let mut owned = bytes.to_vec();
        for c in owned.chunks_exact_mut(N) {
            if nan_at(c) {
                c.copy_from_slice(&nan);
            }
        }
        Cow::Owned(owned)
    }
    match dtype {
        DType::F32 => canonical(
            bytes,
            |b| f32::from_le_bytes(b).is_nan(),
            0x7fc0_0000u32.to_le_bytes(),
        ),
        DType::F64 => canonical(
            bytes,
            |b| f64::from_le_bytes(b).is_nan(),
            0x7ff8_0000_0000_0000u64.to_le_bytes(),
        ),
        // f16: exponent all ones and a nonzero fraction; bf16 is the top half of an f32.
        DType::F16 => canonical(
            bytes,
            |b| u16::from_le_bytes(b) & 0x7fff > 0x7c00,
            0x7e00u16.to_le_bytes(),
        ),
        DType::BF16 => canonical(
            bytes,
            |b| u16::from_le_bytes(b) & 0x7fff > 0x7f80,
            0x7fc0u16.to_le_bytes(),
        ),
        _ => Cow::Borrowed(bytes),
    }
}

/// The digest of a value: a tensor's as above; a sequence's over its tensors' digests in order;
/// an empty optional's is the digest of no bytes.
pub fn sha256_value(v: &Value) -> String {
    match v {
        Value::Tensor(t) => sha256_tensor(t),
        Value::Sequence(ts) => {
            let joined: String = ts.iter().map(sha256_tensor).collect();
            sha256_bytes(joined.as_bytes())
        }
        Value::Optional(None) => sha256_bytes(&[]),
        Value::Optional(Some(inner)) => sha256_value(inner),
    }
}

/// The digest of a file, streamed. Only regular files are read: a device or a FIFO named where
/// a model or an input belongs (`/dev/zero` in a receipt) is refused instead of read forever.
pub fn sha256_file(path: &Path) -> Result<String> {
    // Checked before opening: opening a FIFO for reading waits for a writer, forever.
    let meta = std::fs::metadata(path).map_err(|e| RuntimeError::io(path, e))?;
    if !meta.is_file() {
        let kind = std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a device, FIFO or folder), refused",
        );
        return Err(RuntimeError::io(path, kind));
    }
    let mut f = std::fs::File::open(path).map_err(|e| RuntimeError::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| RuntimeError::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_are_refused_not_read_forever() {
        for path in ["/dev/zero", "/dev/null"] {
            let path = Path::new(path);
            if path.exists() {
                let err = sha256_file(path).unwrap_err().to_string();
                assert!(err.contains("not a regular file"), "{err}");
            }
        }
        // A FIFO: opening it for reading would wait for a writer forever, so it is refused
        // before it is opened (a receipt naming one hung `verify`).
        #[cfg(unix)]
        {
            let dir = std::env::temp_dir().join(format!("samebits-fifo-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let fifo = dir.join("input.npy");
            let made = std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap();
            assert!(made.success());
            let err = sha256_file(&fifo).unwrap_err().to_string();
            assert!(err.contains("not a regular file"), "{err}");
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn known_digests() {
        // FIPS 180-2 test vector for "abc".
        assert_eq!(
            sha256_bytes(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let t = Tensor::from_vec(vec![1], vec![b'a']).unwrap();
        assert_eq!(sha256_tensor(&t), sha256_bytes(b"a"));
    }

    #[test]
    fn every_nan_hashes_as_the_canonical_quiet_nan() {
        // The NaNs x86, NVIDIA and Arm create, and one with a payload: one digest for all.
        let nans = [0xffc0_0000u32, 0x7fff_ffff, 0x7fc0_0000, 0x7f80_0001];
        let digests: Vec<String> = nans
            .iter()
            .map(|&bits| {
                let t = Tensor::from_vec(vec![2], vec![1.5f32, f32::from_bits(bits)]).unwrap();
                sha256_tensor(&t)
            })
            .collect();
        let canonical: Vec<u8> = [1.5f32.to_bits(), 0x7fc0_0000]
            .iter()
            .flat_map(|b| b.to_le_bytes())
            .collect();
        assert!(
            digests.iter().all(|d| *d == sha256_bytes(&canonical)),
            "{digests:?}"
        );
        // Values that are not NaN keep their bits: -0.0 and +inf stay themselves.
        let signed = [(-0.0f32).to_bits(), f32::INFINITY.to_bits()];
        let bytes: Vec<u8> = signed.iter().flat_map(|b| b.to_le_bytes()).collect();
        assert!(matches!(
            canonical_nan_bytes(DType::F32, &bytes),
            Cow::Borrowed(_)
        ));
        // f16 and bf16: a payload NaN becomes the canonical one; infinity stays.
        let half = [0x7c01u16, 0x7c00, 0xfe00].map(u16::to_le_bytes).concat();
        assert_eq!(
            canonical_nan_bytes(DType::F16, &half).as_ref(),
            [0x7e00u16, 0x7c00, 0x7e00].map(u16::to_le_bytes).concat()
        );
        let brain = [0x7f81u16, 0x7f80, 0xffc0].map(u16::to_le_bytes).concat();
        assert_eq!(
            canonical_nan_bytes(DType::BF16, &brain).as_ref(),
            [0x7fc0u16, 0x7f80, 0x7fc0].map(u16::to_le_bytes).concat()
        );
    }
}
