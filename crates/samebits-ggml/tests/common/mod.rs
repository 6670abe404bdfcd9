//! Test helpers shared by the tests of the crates that read ggml blocks (samebits-ggml,
//! samebits-kernels): a seeded random generator and random blocks of every format with a
//! dequantization.

#![allow(dead_code)] // each test binary uses its own part of these helpers

use samebits_ggml::GgmlType;

use samebits_testdata::Rng;

/// Every type with a dequantization.
pub const TYPES: [GgmlType; 15] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
    GgmlType::Iq4Nl,
    GgmlType::Iq4Xs,
];

/// A random finite f16 (subnormals included), as little-endian bytes.
fn finite_f16(rng: &mut Rng) -> [u8; 2] {
    loop {
        let bits = rng.next_u64() as u16;
        if (bits >> 10) & 0x1F != 0x1F {
            return bits.to_le_bytes();
        }
    }
}

/// `blocks` random blocks of `ty` whose f16 scales are finite (F32 values finite too).
pub fn random_blocks(ty: GgmlType, blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..blocks {
        let mut block = rng.bytes(ty.block_bytes());
        let f16_fields: &[usize] = match ty {
            GgmlType::F16
            | GgmlType::Q4_0
            | GgmlType::Q5_0
            | GgmlType::Q8_0
            | GgmlType::Iq4Nl
            | GgmlType::Iq4Xs => &[0],
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => &[0, 2],
            GgmlType::Q6K => &[208],
            GgmlType::Q2K => &[80, 82],
            GgmlType::Q3K => &[108],
            GgmlType::F32 => {
                block.copy_from_slice(&(rng.unit() * 4.0).to_le_bytes());
                &[]
            }
            _ => &[],
        };
        for &at in f16_fields {
            block[at..at + 2].copy_from_slice(&finite_f16(rng));
        }
        if ty == GgmlType::BF16 {
            block[1] &= 0xBF; // exponent below all-ones: finite
        }
        out.extend(block);
    }
    out
}
