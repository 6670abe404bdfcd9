//! Cast and CastLike: conversions between every dtype samebits holds (the twelve numeric ones,
//! bool, string, and the storage-only float8, float4, 4- and 2-bit integer types). Each conversion is one exact rule, written in docs/contract.md ("Cast"),
//! so that it gives the same bits on every machine:
//!
//! - to a float type: round to nearest even, once. f16 and bf16 targets go through f32 with
//!   round-to-odd first, which makes the two steps one correct rounding (the `half` crate's own
//!   f64 conversions drop low bits, and on x86 round twice).
//! - float to integer: truncate toward zero, saturate at the integer type's range, NaN → 0.
//! - integer to integer: two's complement wrap-around (keep the low bits).
//! - to bool: `x != 0` (NaN → true); from bool: 0 or 1.
//! - number to string: integers in decimal; floats as the shortest positional decimal that reads
//!   back to the same value (f16/bf16 widened to f32 first), `NaN`, `INF`, `-INF`.
//! - string to number: a decimal or scientific literal, `INF`/`+INF`/`-INF`/`NaN` in any case;
//!   integer targets accept a float literal and truncate it. Anything else is an error.
//! - storage-only dtypes: their values are exact numbers (float8/float4 as floats, 4-/2-bit
//!   integers as integers) and follow the rules above; to float8/float4 rounds to nearest even
//!   once with the `saturate` attribute (default 1), to float8 e8m0 by `round_mode` (default
//!   `up`), as `samebits_ir::small_types` states; to a 4-/2-bit integer: the integer (a float
//!   truncated toward zero, NaN → 0) wrapped to the low bits.
//!
//! BitCast reinterprets the little-endian bytes of each element as the target dtype of the same
//! width (no conversion, so no rounding); string tensors and width changes are errors.

use crate::registry::Registry;
use crate::{DeviceKernel, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use half::{bf16, f16};
use samebits_ir::small_types::{self, E8m0Rounding};
use samebits_ir::{DType, Tensor, Value, ValueType, with_numeric_type};

pub fn register(r: &mut Registry) {
    r.register("", "Cast", |ctx| {
        let args = NodeArgs::new(ctx.node);
        let to = args.req_int("to")?;
        Ok(Box::new(Cast {
            to: Some(onnx_dtype(to, "to")?),
            from: ctx
                .input_types
                .first()
                .cloned()
                .flatten()
                .and_then(|t| t.dtype()),
            rules: CastRules::of(&args)?,
        }))
    });
    r.register("", "CastLike", |ctx| {
        Ok(Box::new(Cast {
            to: None,
            from: None,
            rules: CastRules::of(&NodeArgs::new(ctx.node))?,
        }))
    });
    r.register("", "BitCast", |ctx| {
        let to = onnx_dtype(NodeArgs::new(ctx.node).req_int("to")?, "to")?;
        Ok(Box::new(BitCast { to }))
    });
}

/// The attributes that shape a conversion to float8/float4: `saturate` and (e8m0)
/// `round_mode`.
#[derive(Copy, Clone, Debug)]
pub struct CastRules {
    pub saturate: bool,
    pub e8m0_rounding: E8m0Rounding,
}

impl Default for CastRules {
    fn default() -> Self {
        CastRules {
            saturate: true,
            e8m0_rounding: E8m0Rounding::Up,
        }
    }
}

impl CastRules {
    fn of(args: &NodeArgs) -> Result<CastRules> {
        let mode = args.string_or("round_mode", "up".into())?;
        let Some(e8m0_rounding) = E8m0Rounding::from_name(&mode) else {
            bail!("attribute \"round_mode\" = {mode:?}: expected \"up\", \"down\" or \"nearest\"");
        };
        Ok(CastRules {
            saturate: args.int_or("saturate", 1)? != 0,
            e8m0_rounding,
        })
    }
}

/// The dtype of an ONNX `TensorProto.DataType` code, or an error naming `attribute`.
pub fn onnx_dtype(code: i64, attribute: &str) -> Result<DType> {
    Ok(match code {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        4 => DType::U16,
        5 => DType::I16,
        6 => DType::I32,
        7 => DType::I64,
        8 => DType::String,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        12 => DType::U32,
        13 => DType::U64,
        16 => DType::BF16,
        17 => DType::F8E4M3FN,
        18 => DType::F8E4M3FNUZ,
        19 => DType::F8E5M2,
        20 => DType::F8E5M2FNUZ,
        21 => DType::U4,
        22 => DType::I4,
        23 => DType::F4E2M1,
        24 => DType::F8E8M0,
        25 => DType::U2,
        26 => DType::I2,
        14 | 15 => unsupported!("attribute \"{attribute}\" = {code}: complex dtypes"),
        other => bail!("attribute \"{attribute}\" = {other} is not an ONNX dtype code"),
    })
}

/// Cast to `to`, or (CastLike, `to == None`) to the dtype of input 1.
#[derive(Debug)]
struct Cast {
    to: Option<DType>,
    /// Input 0's dtype, where known when the op is built (it picks the device kernel).
    from: Option<DType>,
    rules: CastRules,
}

impl Op for Cast {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let to = match self.to {
            Some(to) => Some(to),
            None => inputs.get(1).cloned().flatten().and_then(|t| t.dtype()),
        };
        let shape = inputs
            .first()
            .cloned()
            .flatten()
            .and_then(|t| t.shape().cloned());
        Ok(vec![to.map(|to| ValueType::tensor(to, shape))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let to = match self.to {
            Some(to) => to,
            None => inputs.tensor(1)?.dtype(),
        };
        Ok(vec![
            cast_tensor_with(inputs.tensor(0)?, to, self.rules)?.into(),
        ])
    }

    /// To float32: from float32 (known when the op is built) the input itself, a view;
    /// otherwise the device conversion, which takes integer and bool inputs (one round to
    /// nearest even per element, like [`Number`]'s) and leaves other dtypes to the CPU.
    fn device_kernel(&self) -> Option<DeviceKernel> {
        match (self.from, self.to?) {
            (Some(DType::F32), DType::F32) => Some(DeviceKernel::View),
            (_, DType::F32) => Some(DeviceKernel::CastToF32),
            _ => None,
        }
    }

    fn view_shape(&self, shape: &[usize], _inputs: &Inputs) -> Result<Vec<usize>> {
        Ok(shape.to_vec())
    }
}

/// A number on its way from one dtype to another: floats widen to f64 and integers to i128
/// exactly, so every conversion rounds at most once, at the target.
#[derive(Copy, Clone, Debug)]
enum Number {
    Float(f64),
    Int(i128),
}

/// A numeric element type that converts to and from [`Number`] by the rules of this file.
trait CastElem: samebits_ir::Element + Copy {
    fn to_number(self) -> Number;
    fn from_number(n: Number) -> Self;
    fn to_text(self) -> String;
    fn parse_text(s: &str) -> Option<Self>;
}

macro_rules! int_cast_elem {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            fn to_number(self) -> Number { Number::Int(self as i128) }
            fn from_number(n: Number) -> Self {
                match n {
                    Number::Float(x) => x as $t,
                    Number::Int(i) => i as $t,
                }
            }
            fn to_text(self) -> String { self.to_string() }
            fn parse_text(s: &str) -> Option<Self> {
                match s.trim().parse::<i128>() {
                    Ok(i) => Some(i as $t),
                    Err(_) => parse_float(s).map(|x| x as $t),
                }
            }
        }
    )*};
}
int_cast_elem!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_cast_elem {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            fn to_number(self) -> Number { Number::Float(self as f64) }
            fn from_number(n: Number) -> Self {
                match n {
                    Number::Float(x) => x as $t,
                    Number::Int(i) => i as $t,
                }
            }
            fn to_text(self) -> String { float_text(self as f64, self.to_string()) }
            fn parse_text(s: &str) -> Option<Self> {
                let s = s.trim();
                s.parse::<$t>().ok().or_else(|| parse_float(s).map(|x| x as $t))
            }
        }
    )*};
}
float_cast_elem!(f32, f64);

macro_rules! half_cast_elem {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            fn to_number(self) -> Number { Number::Float(self.to_f64()) }
            fn from_number(n: Number) -> Self { <$t>::from_f32_const(round_to_odd_f32(n)) }
            fn to_text(self) -> String { f32::to_text(self.to_f32()) }
            fn parse_text(s: &str) -> Option<Self> {
                parse_float(s).map(|x| Self::from_number(Number::Float(x)))
            }
        }
    )*};
}
half_cast_elem!(f16, bf16);

/// `n` rounded to f32 toward zero, with the last bit set when inexact ("round to odd"). Rounding
/// that result once more to a type with at least two fewer significant bits (f16, bf16) gives
/// the correctly rounded result of the original value.
fn round_to_odd_f32(n: Number) -> f32 {
    let (nearest, exact, too_big) = match n {
        Number::Float(x) => {
            let f = x as f32;
            (f, x.is_nan() || f as f64 == x, (f as f64).abs() > x.abs())
        }
        // |i| < 2^127 < f32::MAX, so `f` is finite.
        Number::Int(i) => {
            let f = i as f32;
            (
                f,
                f as i128 == i,
                (f as i128).unsigned_abs() > i.unsigned_abs(),
            )
        }
    };
    if exact {
        return nearest;
    }
    let bits = nearest.to_bits() - u32::from(too_big);
    f32::from_bits(bits | 1)
}

/// The text of a float: `NaN`, `INF`, `-INF`, or `shortest` (Rust's shortest round-trip
/// positional form).
fn float_text(x: f64, shortest: String) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "INF" } else { "-INF" }.into()
    } else {
        shortest
    }
}

/// Parses a decimal or scientific literal, or `INF`, `+INF`, `-INF`, `NaN` in any case.
fn parse_float(s: &str) -> Option<f64> {
    let s = s.trim();
    let (sign, body) = match s.strip_prefix('-') {
        Some(rest) => (-1.0, rest),
        None => (1.0, s.strip_prefix('+').unwrap_or(s)),
    };
    if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        return Some(sign * f64::INFINITY);
    }
    if body.eq_ignore_ascii_case("nan") {
        return Some(f64::NAN);
    }
    s.parse::<f64>().ok()
}

/// A storage-only element as a [`Number`] (exact).
fn storage_number(dtype: DType, code: u8) -> Number {
    let value = small_types::decode(dtype, code).unwrap_or(f64::NAN);
    if dtype.is_small_int() {
        Number::Int(value as i128)
    } else {
        Number::Float(value)
    }
}

/// `n` as a storage-only element of `to`: floats by `small_types`; 4-/2-bit integers keep the
/// low bits (sign-extended for signed types) of the integer, or of the float truncated toward
/// zero (NaN → 0, saturating at the i64 range).
fn storage_code(to: DType, n: Number, rules: CastRules) -> u8 {
    let x = match n {
        Number::Float(x) => x,
        Number::Int(i) => i as f64,
    };
    if to == DType::F8E8M0 {
        return small_types::encode_e8m0(x, rules.saturate, rules.e8m0_rounding);
    }
    if let Some(code) = small_types::encode_float(to, x, rules.saturate) {
        return code;
    }
    let (lo, hi) = small_types::int_range(to).expect("storage-only dtype is a float or an int");
    // `as` truncates toward zero, saturates at the i64 range, and takes NaN to 0.
    let integer = match n {
        Number::Float(x) => x as i64,
        Number::Int(i) => i as i64,
    };
    let bits = (hi - lo + 1).trailing_zeros();
    let low = integer & ((1 << bits) - 1);
    let value = if lo < 0 && low > hi {
        low - (1 << bits)
    } else {
        low
    };
    value as u8
}

/// The elements of a numeric, bool or storage-only tensor as [`Number`]s.
fn numbers(t: &Tensor) -> Result<Vec<Number>> {
    if t.dtype().is_storage_only() {
        let dtype = t.dtype();
        return Ok(t
            .as_codes()?
            .iter()
            .map(|&c| storage_number(dtype, c))
            .collect());
    }
    if t.dtype() == DType::Bool {
        return Ok(t
            .as_bools()?
            .iter()
            .map(|&b| Number::Int(b as i128))
            .collect());
    }
    with_numeric_type!(t.dtype(), T => {
        Ok(t.as_slice::<T>()?.iter().map(|v| v.to_number()).collect())
    }, else unreachable!("callers handle strings"))
}

/// Converts `t` to dtype `to` by the rules in this file's documentation, with the default
/// [`CastRules`].
pub fn cast_tensor(t: &Tensor, to: DType) -> Result<Tensor> {
    cast_tensor_with(t, to, CastRules::default())
}

/// Converts `t` to dtype `to` by the rules in this file's documentation.
pub fn cast_tensor_with(t: &Tensor, to: DType, rules: CastRules) -> Result<Tensor> {
    let shape = t.shape().to_vec();
    let from = t.dtype();
    if from == to {
        return Ok(t.clone());
    }
    if from == DType::String {
        let strings = t.as_strings()?;
        let parse_error =
            |s: &String| crate::OpError::Invalid(format!("string {s:?} is not a {to} literal"));
        if to == DType::Bool {
            let bits = strings
                .iter()
                .map(|s| {
                    parse_float(s)
                        .map(|x| x != 0.0)
                        .ok_or_else(|| parse_error(s))
                })
                .collect::<Result<Vec<bool>>>()?;
            return Ok(Tensor::from_bools(shape, bits)?);
        }
        if to.is_storage_only() {
            let codes = strings
                .iter()
                .map(|s| {
                    let n = match s.trim().parse::<i128>() {
                        Ok(i) => Number::Int(i),
                        Err(_) => Number::Float(parse_float(s).ok_or_else(|| parse_error(s))?),
                    };
                    Ok(storage_code(to, n, rules))
                })
                .collect::<Result<Vec<u8>>>()?;
            return Ok(Tensor::from_codes(to, shape, codes)?);
        }
        return with_numeric_type!(to, D => {
            let out = strings
                .iter()
                .map(|s| D::parse_text(s).ok_or_else(|| parse_error(s)))
                .collect::<Result<Vec<D>>>()?;
            Ok(Tensor::from_vec(shape, out)?)
        }, else unreachable!("string and bool targets handled above"));
    }
    if to == DType::String {
        let text: Vec<String> = if from == DType::Bool {
            t.as_bools()?.iter().map(|b| b.to_string()).collect()
        } else if from.is_storage_only() {
            numbers(t)?
                .into_iter()
                .map(|n| match n {
                    Number::Int(i) => i.to_string(),
                    Number::Float(x) => f32::to_text(x as f32),
                })
                .collect()
        } else {
            with_numeric_type!(from, S => {
                t.as_slice::<S>()?.iter().map(|v| v.to_text()).collect()
            }, else unreachable!("string source handled above"))
        };
        return Ok(Tensor::from_strings(shape, text)?);
    }
    let values = numbers(t)?;
    if to == DType::Bool {
        let bits = values
            .into_iter()
            .map(|n| match n {
                Number::Float(x) => x != 0.0,
                Number::Int(i) => i != 0,
            })
            .collect();
        return Ok(Tensor::from_bools(shape, bits)?);
    }
    if to.is_storage_only() {
        let codes = values
            .into_iter()
            .map(|n| storage_code(to, n, rules))
            .collect();
        return Ok(Tensor::from_codes(to, shape, codes)?);
    }
    with_numeric_type!(to, D => {
        let out: Vec<D> = values.into_iter().map(D::from_number).collect();
        Ok(Tensor::from_vec(shape, out)?)
    }, else unreachable!("string and bool targets handled above"))
}

/// BitCast: the same bytes read as `to`, element by element.
#[derive(Debug)]
struct BitCast {
    to: DType,
}

impl Op for BitCast {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let shape = inputs
            .first()
            .cloned()
            .flatten()
            .and_then(|t| t.shape().cloned());
        Ok(vec![Some(ValueType::tensor(self.to, shape))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let from = x.dtype();
        if from == DType::String || self.to == DType::String {
            bail!(
                "BitCast from {from} to {}: string tensors have no bits",
                self.to
            );
        }
        if from.size() != self.to.size() {
            bail!(
                "BitCast needs dtypes of one width, got {from} ({} bits) to {} ({} bits)",
                from.size() * 8,
                self.to,
                self.to.size() * 8
            );
        }
        let y = Tensor::from_le_bytes(self.to, x.shape().to_vec(), x.bytes()?)?;
        Ok(vec![y.into()])
    }
}
