//! SHA-256 digests as receipts write them: lower-case hex of the raw little-endian bytes of a
//! tensor (strings: each as its UTF-8 length, u64 little-endian, then its bytes), or of a file.

use crate::{Result, RuntimeError};
use samebits_ir::{Tensor, Value};
use sha2::{Digest, Sha256};
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
        Err(_) => sha256_bytes(t.bytes().expect("non-string tensors have bytes")),
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

/// The digest of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String> {
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
    fn known_digests() {
        // FIPS 180-2 test vector for "abc".
        assert_eq!(
            sha256_bytes(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let t = Tensor::from_vec(vec![1], vec![b'a']).unwrap();
        assert_eq!(sha256_tensor(&t), sha256_bytes(b"a"));
    }
}
