//! The ggml tensor types and their block formats, each format's dequantization to f32 written
//! once for every user: the GGUF reader, the CPU quantized products (samebits-kernels), and the
//! CUDA kernels (samebits-cuda generates its type codes from [`GgmlType`] and tests its device
//! dequantization against [`dequantize_row`]).
//!
//! [`GgmlType`] names every type a GGUF file can hold with its block geometry (so the reader can
//! check tensor sizes); [`dequantize_row`] turns blocks of the supported types into f32 by the one
//! canonical formula per type written in `docs/gguf.md` (section names are quoted in the code).
//! The block layouts follow ggml's published format (`ggml-common.h` in the ggml project); the
//! code is written from that description.
//!
//! One file per family: [`float`] (F32, F16, BF16), [`legacy`] (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0),
//! [`kquant`] (Q2_K to Q6_K), [`iquant`] (IQ4_NL, IQ4_XS).

pub mod float;
pub mod iquant;
pub mod kquant;
pub mod legacy;

use std::fmt;

/// A dequantization or dot-product call got buffers that do not fit its ggml type, or a type
/// without a block format.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuantError(pub String);

pub type Result<T, E = QuantError> = std::result::Result<T, E>;

/// A ggml tensor type, with its on-disk number.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Q8K,
    Iq2Xxs,
    Iq2Xs,
    Iq3Xxs,
    Iq1S,
    Iq4Nl,
    Iq3S,
    Iq2S,
    Iq4Xs,
    I8,
    I16,
    I32,
    I64,
    F64,
    Iq1M,
    BF16,
    Tq1_0,
    Tq2_0,
    Mxfp4,
}

/// (type, on-disk id, name, elements per block, bytes per block), from ggml's type table.
const TYPE_TABLE: [(GgmlType, u32, &str, usize, usize); 32] = [
    (GgmlType::F32, 0, "F32", 1, 4),
    (GgmlType::F16, 1, "F16", 1, 2),
    (GgmlType::Q4_0, 2, "Q4_0", 32, 18),
    (GgmlType::Q4_1, 3, "Q4_1", 32, 20),
    (GgmlType::Q5_0, 6, "Q5_0", 32, 22),
    (GgmlType::Q5_1, 7, "Q5_1", 32, 24),
    (GgmlType::Q8_0, 8, "Q8_0", 32, 34),
    (GgmlType::Q8_1, 9, "Q8_1", 32, 36),
    (GgmlType::Q2K, 10, "Q2_K", 256, 84),
    (GgmlType::Q3K, 11, "Q3_K", 256, 110),
    (GgmlType::Q4K, 12, "Q4_K", 256, 144),
    (GgmlType::Q5K, 13, "Q5_K", 256, 176),
    (GgmlType::Q6K, 14, "Q6_K", 256, 210),
    (GgmlType::Q8K, 15, "Q8_K", 256, 292),
    (GgmlType::Iq2Xxs, 16, "IQ2_XXS", 256, 66),
    (GgmlType::Iq2Xs, 17, "IQ2_XS", 256, 74),
    (GgmlType::Iq3Xxs, 18, "IQ3_XXS", 256, 98),
    (GgmlType::Iq1S, 19, "IQ1_S", 256, 50),
    (GgmlType::Iq4Nl, 20, "IQ4_NL", 32, 18),
    (GgmlType::Iq3S, 21, "IQ3_S", 256, 110),
    (GgmlType::Iq2S, 22, "IQ2_S", 256, 82),
    (GgmlType::Iq4Xs, 23, "IQ4_XS", 256, 136),
    (GgmlType::I8, 24, "I8", 1, 1),
    (GgmlType::I16, 25, "I16", 1, 2),
    (GgmlType::I32, 26, "I32", 1, 4),
    (GgmlType::I64, 27, "I64", 1, 8),
    (GgmlType::F64, 28, "F64", 1, 8),
    (GgmlType::Iq1M, 29, "IQ1_M", 256, 56),
    (GgmlType::BF16, 30, "BF16", 1, 2),
    (GgmlType::Tq1_0, 34, "TQ1_0", 256, 54),
    (GgmlType::Tq2_0, 35, "TQ2_0", 256, 66),
    (GgmlType::Mxfp4, 39, "MXFP4", 32, 17),
];

impl GgmlType {
    fn row(self) -> &'static (GgmlType, u32, &'static str, usize, usize) {
        TYPE_TABLE
            .iter()
            .find(|r| r.0 == self)
            .expect("every type is in the table")
    }

    /// Every type ggml defines, in the order of its on-disk ids.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TYPE_TABLE.iter().map(|r| r.0)
    }

    /// The type with on-disk id `id`, if ggml defines one.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TYPE_TABLE.iter().find(|r| r.1 == id).map(|r| r.0)
    }

    pub fn id(self) -> u32 {
        self.row().1
    }

    /// ggml's name (`Q4_1`, `Q6_K`, `BF16`).
    pub fn name(self) -> &'static str {
        self.row().2
    }

    /// Elements per block (1 for plain types).
    pub fn block_elems(self) -> usize {
        self.row().3
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        self.row().4
    }

    /// Bytes of a row of `elems` elements, or `None` when `elems` is not a whole number of blocks
    /// or the size overflows.
    pub fn row_bytes(self, elems: usize) -> Option<usize> {
        if !elems.is_multiple_of(self.block_elems()) {
            return None;
        }
        (elems / self.block_elems()).checked_mul(self.block_bytes())
    }

    /// Whether [`dequantize_row`] and the dot products accept this type.
    pub fn can_dequantize(self) -> bool {
        self.dispatch(Supported).is_some()
    }

    /// Runs `visitor` with the [`BlockFormat`] of this type; `None` for types without one.
    pub fn dispatch<V: FormatVisitor>(self, visitor: V) -> Option<V::Output> {
        Some(match self {
            GgmlType::F32 => visitor.visit::<float::F32>(),
            GgmlType::F16 => visitor.visit::<float::F16>(),
            GgmlType::BF16 => visitor.visit::<float::BF16>(),
            GgmlType::Q4_0 => visitor.visit::<legacy::Q4_0>(),
            GgmlType::Q4_1 => visitor.visit::<legacy::Q4_1>(),
            GgmlType::Q5_0 => visitor.visit::<legacy::Q5_0>(),
            GgmlType::Q5_1 => visitor.visit::<legacy::Q5_1>(),
            GgmlType::Q8_0 => visitor.visit::<legacy::Q8_0>(),
            GgmlType::Q2K => visitor.visit::<kquant::Q2K>(),
            GgmlType::Q3K => visitor.visit::<kquant::Q3K>(),
            GgmlType::Q4K => visitor.visit::<kquant::Q4K>(),
            GgmlType::Q5K => visitor.visit::<kquant::Q5K>(),
            GgmlType::Q6K => visitor.visit::<kquant::Q6K>(),
            GgmlType::Iq4Nl => visitor.visit::<iquant::Iq4Nl>(),
            GgmlType::Iq4Xs => visitor.visit::<iquant::Iq4Xs>(),
            _ => return None,
        })
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The layout of one block of a ggml type and its canonical dequantization (`docs/gguf.md`).
pub trait BlockFormat {
    /// Elements per block.
    const ELEMS: usize;
    /// Bytes per block.
    const BYTES: usize;
    /// Writes the `ELEMS` values of `block` (exactly `BYTES` long) to `out` (exactly `ELEMS`).
    fn dequantize_block(block: &[u8], out: &mut [f32]);
}

/// Code generic over a [`BlockFormat`], run by [`GgmlType::dispatch`].
pub trait FormatVisitor {
    type Output;
    fn visit<B: BlockFormat>(self) -> Self::Output;
}

struct Supported;

impl FormatVisitor for Supported {
    type Output = ();
    fn visit<B: BlockFormat>(self) {}
}

/// The exact f32 value of the little-endian f16 at `bytes[at..at + 2]`.
#[inline(always)]
pub(crate) fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// Checks that `blocks` holds exactly the blocks of `elems` elements of `ggml_type`.
fn check_row(ggml_type: GgmlType, blocks: &[u8], elems: usize) -> Result<()> {
    if !ggml_type.can_dequantize() {
        return Err(QuantError(format!(
            "dequantization of {ggml_type} is not supported"
        )));
    }
    match ggml_type.row_bytes(elems) {
        Some(bytes) if bytes == blocks.len() => Ok(()),
        _ => Err(QuantError(format!(
            "{ggml_type}: {} bytes do not hold {elems} elements (blocks of {} elements in {} bytes)",
            blocks.len(),
            ggml_type.block_elems(),
            ggml_type.block_bytes()
        ))),
    }
}

/// Dequantizes the whole blocks in `blocks` into `out` (one element per output value) by the
/// canonical formula of `ggml_type` (`docs/gguf.md`). Errors when the type is not supported or
/// the lengths do not match.
pub fn dequantize_row(ggml_type: GgmlType, blocks: &[u8], out: &mut [f32]) -> Result<()> {
    check_row(ggml_type, blocks, out.len())?;
    struct Row<'a> {
        blocks: &'a [u8],
        out: &'a mut [f32],
    }
    impl FormatVisitor for Row<'_> {
        type Output = ();
        fn visit<B: BlockFormat>(self) {
            for (block, out) in self
                .blocks
                .chunks_exact(B::BYTES)
                .zip(self.out.chunks_exact_mut(B::ELEMS))
            {
                B::dequantize_block(block, out);
            }
        }
    }
    ggml_type.dispatch(Row { blocks, out });
    Ok(())
}
