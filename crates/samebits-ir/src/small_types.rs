//! The storage-only dtypes: float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0), float4 (e2m1) and
//! the 4- and 2-bit integers. In memory each element is one byte: a float8 or float4 element is
//! its bit pattern (float4 in the low nibble), an integer element its value (`i4`/`i2`
//! sign-extended to the whole byte). Nothing computes in these types; they convert to and from
//! wider types by the rules here, written in docs/contract.md ("Cast"):
//!
//! - decoding is exact;
//! - encoding a float rounds once, to nearest with ties to even, from f64. Out of range (a
//!   rounded magnitude above the largest finite value, or an infinity) with `saturate` gives
//!   the largest finite value of that sign; without it, infinity where the type has one (e5m2),
//!   else NaN. NaN gives NaN. The `fnuz` types have no negative zero: a result of zero is +0.
//!   float4 e2m1 has neither infinity nor NaN: it always saturates, and NaN gives -0 (0x8);
//! - e8m0 (a power of two, no sign, no zero) encodes from the f32 exponent by
//!   [`E8m0Rounding`];
//! - the 4- and 2-bit integers are reached by the caller's rule (Cast wraps, QuantizeLinear
//!   saturates).
//!
//! ONNX files pack these integers and float4 two to a byte, 2-bit integers four to a byte, the
//! first element in the lowest bits: [`pack`] and [`unpack`].

use crate::DType;

/// Where a binary float format puts its fields and special values.
#[derive(Copy, Clone, Debug)]
struct Format {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    /// The code of the largest finite positive value.
    max_code: u8,
    /// The code of +infinity, for formats that have one.
    inf: Option<u8>,
    /// The code of the (positive) NaN, for formats that have one.
    nan: Option<u8>,
    /// `fnuz` formats: no negative zero; the code `sign bit alone` is their NaN.
    unsigned_zero: bool,
}

impl Format {
    fn of(dtype: DType) -> Option<Format> {
        let f = |exp_bits, man_bits, bias, max_code, inf, nan, unsigned_zero| Format {
            exp_bits,
            man_bits,
            bias,
            max_code,
            inf,
            nan,
            unsigned_zero,
        };
        Some(match dtype {
            DType::F8E4M3FN => f(4, 3, 7, 0x7E, None, Some(0x7F), false),
            DType::F8E4M3FNUZ => f(4, 3, 8, 0x7F, None, Some(0x80), true),
            DType::F8E5M2 => f(5, 2, 15, 0x7B, Some(0x7C), Some(0x7E), false),
            DType::F8E5M2FNUZ => f(5, 2, 16, 0x7F, None, Some(0x80), true),
            DType::F4E2M1 => f(2, 1, 1, 0x7, None, None, false),
            _ => return None,
        })
    }

    fn sign_bit(self) -> u8 {
        1 << (self.exp_bits + self.man_bits)
    }

    fn decode(self, code: u8) -> f64 {
        let sign_bit = self.sign_bit();
        if self.nan == Some(code & !sign_bit)
            || (self.unsigned_zero && Some(code) == self.nan)
            || (self.inf.is_some_and(|inf| code & !sign_bit > inf))
        {
            return f64::NAN;
        }
        let magnitude = code & (sign_bit - 1);
        let value = if self.inf == Some(magnitude) {
            f64::INFINITY
        } else {
            let exp = i32::from(magnitude >> self.man_bits);
            let man = f64::from(magnitude & ((1 << self.man_bits) - 1));
            let m = self.man_bits as i32;
            if exp == 0 {
                man * pow2(1 - self.bias - m)
            } else {
                (man + pow2(m)) * pow2(exp - self.bias - m)
            }
        };
        if code & sign_bit != 0 { -value } else { value }
    }

    fn encode(self, x: f64, saturate: bool) -> u8 {
        let Some(nan) = self.nan else {
            // float4 e2m1: no NaN, no infinity. NaN gives the sign bit alone (-0), as the ONNX
            // reference does.
            if x.is_nan() {
                return self.sign_bit();
            }
            return self.encode_finite(x, true, self.max_code);
        };
        if x.is_nan() {
            return nan;
        }
        self.encode_finite(x, saturate, nan)
    }

    /// `x` (not NaN) rounded to nearest even; `overflow_nan` is the NaN code used for overflow
    /// without `saturate` in formats without infinity.
    fn encode_finite(self, x: f64, saturate: bool, overflow_nan: u8) -> u8 {
        let negative = x.is_sign_negative();
        let sign = if negative { self.sign_bit() } else { 0 };
        let max = self.decode(self.max_code);
        let rounded = round_nearest_even(x.abs(), self.bias, self.man_bits);
        if rounded > max {
            return match (saturate, self.inf) {
                (true, _) => self.max_code | sign,
                (false, Some(inf)) => inf | sign,
                (false, None) if self.unsigned_zero => overflow_nan,
                (false, None) => overflow_nan | sign,
            };
        }
        if rounded == 0.0 {
            return if self.unsigned_zero { 0 } else { sign };
        }
        let m = self.man_bits as i32;
        let min_exp = 1 - self.bias;
        let exp = exponent_of(rounded).max(min_exp);
        // An integer below 2^(m+1): the significand in units of the last place.
        let units = (rounded / pow2(exp - m)) as u32;
        let code = if units < (1 << self.man_bits) {
            units // subnormal
        } else {
            (((exp + self.bias) as u32) << self.man_bits) | (units - (1 << self.man_bits))
        };
        code as u8 | sign
    }
}

/// 2^k for k within the normal range of f64.
fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// The binary exponent of a positive value (subnormal f64 values report the smallest).
fn exponent_of(a: f64) -> i32 {
    (((a.to_bits() >> 52) & 0x7FF) as i32 - 1023).max(-1022)
}

/// `a >= 0` rounded to nearest even at `man_bits` fraction bits, with subnormals below
/// exponent `1 - bias`; infinity stays infinity.
fn round_nearest_even(a: f64, bias: i32, man_bits: u32) -> f64 {
    if a == 0.0 || a.is_infinite() {
        return a;
    }
    let ulp = exponent_of(a).max(1 - bias) - man_bits as i32;
    (a / pow2(ulp)).round_ties_even() * pow2(ulp)
}

/// How a value rounds to float8 e8m0 (Cast's `round_mode`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum E8m0Rounding {
    /// Any nonzero fraction rounds up to the next power of two.
    Up,
    /// Truncate to the power of two at or below.
    Down,
    /// Round on the f32 fraction's top bit (see [`encode_e8m0`]).
    Nearest,
}

impl E8m0Rounding {
    /// The mode named by Cast's `round_mode` attribute (`up`, `down`, `nearest`).
    pub fn from_name(name: &str) -> Option<E8m0Rounding> {
        match name {
            "up" => Some(E8m0Rounding::Up),
            "down" => Some(E8m0Rounding::Down),
            "nearest" => Some(E8m0Rounding::Nearest),
            _ => None,
        }
    }
}

/// Float8 e8m0 of `x`, taken as f32 (round to nearest even first): the code is the f32
/// exponent field (the sign is ignored; zeros and f32 subnormals have exponent field 0), plus
/// one when the rounding mode rounds up. `Up` rounds up when the 23 fraction bits are not all
/// zero; `Nearest` when fraction bit 22 is set and bit 21, any lower bit, or a nonzero exponent
/// field is too. Infinity and NaN give NaN (0xFF). A result past 0xFE is 0xFE with `saturate`,
/// NaN without.
pub fn encode_e8m0(x: f64, saturate: bool, rounding: E8m0Rounding) -> u8 {
    let bits = (x as f32).to_bits();
    let exp = (bits >> 23) & 0xFF;
    if exp == 0xFF {
        return 0xFF;
    }
    let fraction = bits & 0x7F_FFFF;
    let up = match rounding {
        E8m0Rounding::Up => fraction != 0,
        E8m0Rounding::Down => false,
        E8m0Rounding::Nearest => {
            fraction & 0x40_0000 != 0 && (fraction & 0x3F_FFFF != 0 || exp > 0)
        }
    };
    if up && exp == 0xFE && saturate {
        return 0xFE;
    }
    (exp + u32::from(up)) as u8
}

/// The exact value of a storage-only element: a float8/float4 code or a 4-/2-bit integer
/// byte. `None` for other dtypes.
pub fn decode(dtype: DType, code: u8) -> Option<f64> {
    match dtype {
        DType::F8E8M0 if code == 0xFF => Some(f64::NAN),
        DType::F8E8M0 => Some(pow2(i32::from(code) - 127)),
        DType::I4 | DType::I2 => Some(f64::from(code as i8)),
        DType::U4 | DType::U2 => Some(f64::from(code)),
        _ => Format::of(dtype).map(|f| f.decode(code)),
    }
}

/// The code of `x` in a float8 (not e8m0) or float4 dtype, by the rules of this module.
/// `None` for other dtypes.
pub fn encode_float(dtype: DType, x: f64, saturate: bool) -> Option<u8> {
    Format::of(dtype).map(|f| f.encode(x, saturate))
}

/// The range of a 4- or 2-bit integer dtype.
pub fn int_range(dtype: DType) -> Option<(i64, i64)> {
    match dtype {
        DType::I4 => Some((-8, 7)),
        DType::U4 => Some((0, 15)),
        DType::I2 => Some((-2, 1)),
        DType::U2 => Some((0, 3)),
        _ => None,
    }
}

/// Whether `byte` is a valid in-memory element of the storage-only `dtype`.
pub fn is_valid_code(dtype: DType, byte: u8) -> bool {
    match int_range(dtype) {
        Some((lo, hi)) if lo < 0 => (lo..=hi).contains(&i64::from(byte as i8)),
        Some((_, hi)) => i64::from(byte) <= hi,
        None => dtype != DType::F4E2M1 || byte < 16,
    }
}

/// Elements per byte in an ONNX file: 2 for 4-bit types, 4 for 2-bit types, else 1.
pub fn per_byte(dtype: DType) -> usize {
    match dtype {
        DType::I4 | DType::U4 | DType::F4E2M1 => 2,
        DType::I2 | DType::U2 => 4,
        _ => 1,
    }
}

/// The number of packed bytes that hold `numel` elements of `dtype`.
pub fn packed_len(dtype: DType, numel: usize) -> usize {
    numel.div_ceil(per_byte(dtype))
}

/// Packs one-byte elements of a 4- or 2-bit dtype, first element in the lowest bits; the unused
/// bits of a last partial byte are zero. Other dtypes are returned unchanged.
pub fn pack(dtype: DType, elements: &[u8]) -> Vec<u8> {
    let n = per_byte(dtype);
    if n == 1 {
        return elements.to_vec();
    }
    let bits = 8 / n;
    let mask = (1u8 << bits) - 1;
    elements
        .chunks(n)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .fold(0u8, |acc, (i, &e)| acc | ((e & mask) << (i * bits)))
        })
        .collect()
}

/// The first `numel` elements of packed bytes, one byte each (signed types sign-extended).
/// `packed` must hold [`packed_len`] bytes.
pub fn unpack(dtype: DType, packed: &[u8], numel: usize) -> Vec<u8> {
    let n = per_byte(dtype);
    if n == 1 {
        return packed[..numel].to_vec();
    }
    let bits = 8 / n;
    let signed = matches!(dtype, DType::I4 | DType::I2);
    (0..numel)
        .map(|i| {
            let field = (packed[i / n] >> ((i % n) * bits)) & ((1u8 << bits) - 1);
            if signed && field >> (bits - 1) != 0 {
                field | !((1u8 << bits) - 1)
            } else {
                field
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(d: DType, x: f64) -> u8 {
        encode_float(d, x, true).unwrap()
    }
    fn enc_ns(d: DType, x: f64) -> u8 {
        encode_float(d, x, false).unwrap()
    }
    fn dec(d: DType, c: u8) -> f64 {
        decode(d, c).unwrap()
    }

    #[test]
    fn e4m3fn_boundaries() {
        let d = DType::F8E4M3FN;
        assert_eq!(dec(d, 0x7E), 448.0);
        assert_eq!(dec(d, 0x01), 2f64.powi(-9));
        assert_eq!(dec(d, 0x08), 2f64.powi(-6));
        assert!(dec(d, 0x7F).is_nan() && dec(d, 0xFF).is_nan());
        assert_eq!(enc(d, 448.0), 0x7E);
        assert_eq!(enc(d, -448.0), 0xFE);
        // 464 is the tie between 448 (mantissa 110) and 480 (past max): even is 448.
        assert_eq!(enc_ns(d, 464.0), 0x7E);
        assert_eq!(enc_ns(d, 465.0), 0x7F);
        assert_eq!(enc(d, 1e6), 0x7E);
        assert_eq!(enc(d, f64::INFINITY), 0x7E);
        assert_eq!(enc(d, f64::NEG_INFINITY), 0xFE);
        assert_eq!(enc_ns(d, f64::INFINITY), 0x7F);
        assert_eq!(enc_ns(d, f64::NEG_INFINITY), 0xFF);
        assert_eq!(enc(d, f64::NAN) & 0x7F, 0x7F);
        // Smallest subnormal 2^-9; half of it ties to even (0), a bit more rounds up.
        assert_eq!(enc(d, 2f64.powi(-9)), 0x01);
        assert_eq!(enc(d, 2f64.powi(-10)), 0x00);
        assert_eq!(enc(d, 2f64.powi(-10) * 1.01), 0x01);
        assert_eq!(enc(d, 3.0 * 2f64.powi(-10)), 0x02);
        assert_eq!(enc(d, -0.0), 0x80);
        // 1.0625 lies halfway between 1 (0x38) and 1.125 (0x39): even is 0x38.
        assert_eq!(enc(d, 1.0625), 0x38);
        assert_eq!(enc(d, 1.1875), 0x3A);
    }

    #[test]
    fn e4m3fnuz_boundaries() {
        let d = DType::F8E4M3FNUZ;
        assert_eq!(dec(d, 0x7F), 240.0);
        assert_eq!(dec(d, 0x01), 2f64.powi(-10));
        assert!(dec(d, 0x80).is_nan());
        assert_eq!(enc(d, 240.0), 0x7F);
        assert_eq!(enc(d, f64::INFINITY), 0x7F);
        assert_eq!(enc(d, f64::NEG_INFINITY), 0xFF);
        assert_eq!(enc_ns(d, f64::INFINITY), 0x80);
        assert_eq!(enc_ns(d, -1e6), 0x80);
        assert_eq!(enc(d, f64::NAN), 0x80);
        assert_eq!(enc(d, -0.0), 0x00);
        assert_eq!(enc(d, -2f64.powi(-12)), 0x00);
    }

    #[test]
    fn e5m2_boundaries() {
        let d = DType::F8E5M2;
        assert_eq!(dec(d, 0x7B), 57344.0);
        assert_eq!(dec(d, 0x7C), f64::INFINITY);
        assert_eq!(dec(d, 0xFC), f64::NEG_INFINITY);
        assert!(dec(d, 0x7D).is_nan());
        assert_eq!(dec(d, 0x01), 2f64.powi(-16));
        assert_eq!(enc(d, f64::INFINITY), 0x7B);
        assert_eq!(enc_ns(d, f64::INFINITY), 0x7C);
        assert_eq!(enc_ns(d, f64::NEG_INFINITY), 0xFC);
        // 61440 ties between 57344 (mantissa 11, odd) and 65536 (infinity).
        assert_eq!(enc_ns(d, 61440.0), 0x7C);
        assert_eq!(enc_ns(d, 61439.0), 0x7B);
        assert_eq!(enc(d, 61440.0), 0x7B);
        assert!(dec(d, enc(d, f64::NAN)).is_nan());
    }

    #[test]
    fn e5m2fnuz_boundaries() {
        let d = DType::F8E5M2FNUZ;
        assert_eq!(dec(d, 0x7F), 57344.0);
        assert_eq!(dec(d, 0x01), 2f64.powi(-17));
        assert_eq!(enc(d, 1e9), 0x7F);
        assert_eq!(enc_ns(d, 1e9), 0x80);
        assert_eq!(enc(d, -0.0), 0x00);
    }

    #[test]
    fn e2m1_boundaries() {
        let d = DType::F4E2M1;
        let values: Vec<f64> = (0..8).map(|c| dec(d, c)).collect();
        assert_eq!(values, [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(dec(d, 0xF), -6.0);
        assert_eq!(enc(d, 5.0), 0x6); // tie between 4 (even) and 6
        assert_eq!(enc(d, 0.25), 0x0); // tie between 0 (even) and 0.5
        assert_eq!(enc(d, 0.75), 0x2); // tie between 0.5 and 1 (even)
        assert_eq!(enc_ns(d, 100.0), 0x7);
        assert_eq!(enc_ns(d, f64::NEG_INFINITY), 0xF);
        assert_eq!(enc(d, f64::NAN), 0x8);
        assert_eq!(enc(d, -0.0), 0x8);
    }

    #[test]
    fn e8m0_rounding() {
        use E8m0Rounding::*;
        assert_eq!(dec(DType::F8E8M0, 127), 1.0);
        assert_eq!(dec(DType::F8E8M0, 0), 2f64.powi(-127));
        assert!(dec(DType::F8E8M0, 0xFF).is_nan());
        assert_eq!(encode_e8m0(1.0, true, Up), 127);
        assert_eq!(encode_e8m0(1.5, true, Up), 128);
        assert_eq!(encode_e8m0(1.5, true, Down), 127);
        assert_eq!(encode_e8m0(1.5, true, Nearest), 128);
        assert_eq!(encode_e8m0(1.25, true, Nearest), 127);
        assert_eq!(encode_e8m0(-4.0, true, Up), 129);
        assert_eq!(encode_e8m0(f64::INFINITY, true, Up), 0xFF);
        assert_eq!(encode_e8m0(f32::MAX as f64, true, Up), 0xFE);
        assert_eq!(encode_e8m0(f32::MAX as f64, false, Up), 0xFF);
        assert_eq!(encode_e8m0(0.0, true, Up), 0);
    }

    #[test]
    fn packing_round_trips() {
        let i4 = [0xF9u8, 7, 0, 0xFF, 3]; // -7, 7, 0, -1, 3
        let packed = pack(DType::I4, &i4);
        assert_eq!(packed, [0x79, 0xF0, 0x03]);
        assert_eq!(unpack(DType::I4, &packed, 5), i4);
        let u2 = [3u8, 0, 1, 2, 1];
        let packed = pack(DType::U2, &u2);
        assert_eq!(packed, [0b10_01_00_11, 0b01]);
        assert_eq!(unpack(DType::U2, &packed, 5), u2);
        assert_eq!(unpack(DType::I2, &[0b10_01_00_11], 4), [0xFF, 0, 1, 0xFE]);
        assert!(is_valid_code(DType::I4, 0xF8) && !is_valid_code(DType::I4, 0x08));
        assert!(is_valid_code(DType::U4, 15) && !is_valid_code(DType::U4, 16));
    }
}
