//! Elementwise ops without transcendentals: arithmetic, comparison, logic and bitwise ops with
//! broadcasting, simple unary ops, Where and Clip. Each output element is one IEEE operation (or
//! an exact integer operation), so results are the same on every backend by construction.
//! f16/bf16 inputs compute in f32 and round once at the store (docs/contract.md, "Arithmetic").

use crate::broadcast::{LegacyBroadcastOp, map2, map3};
use crate::registry::Registry;
use crate::{
    BinaryKernel, BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, Result, UnaryKernel,
    bail, unsupported,
};
use half::{bf16, f16};
use rayon::prelude::*;
use samebits_ir::{DType, Tensor, Value, ValueType, with_numeric_type};
use samebits_kernels::{canonical_max, canonical_min};

pub fn register(r: &mut Registry) {
    for (name, op) in [
        ("Add", Binary::Add),
        ("Sub", Binary::Sub),
        ("Mul", Binary::Mul),
        ("Div", Binary::Div),
        ("BitwiseAnd", Binary::BitAnd),
        ("BitwiseOr", Binary::BitOr),
        ("BitwiseXor", Binary::BitXor),
    ] {
        r.register("", name, BINARY_CTORS[op as usize]);
    }
    r.register("", "Mod", |ctx| {
        let fmod = NodeArgs::new(ctx.node).int_or("fmod", 0)? != 0;
        Ok(Box::new(BinaryOp(if fmod {
            Binary::Fmod
        } else {
            Binary::Mod
        })))
    });
    r.register("", "BitShift", |ctx| {
        let dir = NodeArgs::new(ctx.node).string_or("direction", String::new())?;
        Ok(Box::new(BinaryOp(match dir.as_str() {
            "LEFT" => Binary::Shl,
            "RIGHT" => Binary::Shr,
            other => bail!("BitShift direction must be LEFT or RIGHT, got {other:?}"),
        })))
    });
    r.register("", "Max", |ctx| Variadic::build(ctx, Binary::Max));
    r.register("", "Min", |ctx| Variadic::build(ctx, Binary::Min));
    r.register("", "Sum", |ctx| Variadic::build(ctx, Binary::Add));
    r.register("", "Mean", |ctx| Variadic::build(ctx, Binary::Mean));
    for (name, cmp) in [
        ("Equal", Compare::Equal),
        ("Less", Compare::Less),
        ("Greater", Compare::Greater),
        ("LessOrEqual", Compare::LessOrEqual),
        ("GreaterOrEqual", Compare::GreaterOrEqual),
    ] {
        r.register("", name, COMPARE_CTORS[cmp as usize]);
    }
    r.register("", "And", |ctx| {
        LegacyBroadcastOp::wrap(ctx, Box::new(Logic(|a, b| a & b)))
    });
    r.register("", "Or", |ctx| {
        LegacyBroadcastOp::wrap(ctx, Box::new(Logic(|a, b| a | b)))
    });
    r.register("", "Xor", |ctx| {
        LegacyBroadcastOp::wrap(ctx, Box::new(Logic(|a, b| a ^ b)))
    });
    for (name, u) in [
        ("Neg", Unary::Neg),
        ("Abs", Unary::Abs),
        ("Sign", Unary::Sign),
        ("Relu", Unary::Relu),
        ("Floor", Unary::Floor),
        ("Ceil", Unary::Ceil),
        ("Round", Unary::Round),
        ("Sqrt", Unary::Sqrt),
        ("Reciprocal", Unary::Reciprocal),
        ("BitwiseNot", Unary::BitNot),
    ] {
        r.register("", name, UNARY_CTORS[u as usize]);
    }
    r.register("", "Not", |_| Ok(Box::new(Not)));
    r.register("", "IsNaN", |_| Ok(Box::new(FloatTest::Nan)));
    r.register("", "IsInf", |ctx| {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(FloatTest::Inf {
            negative: args.int_or("detect_negative", 1)? != 0,
            positive: args.int_or("detect_positive", 1)? != 0,
        }))
    });
    r.register("", "Where", |_| Ok(Box::new(Where)));
    r.register("", "Clip", clip);
    r.register("", "Identity", |_| Ok(Box::new(Identity)));
}

/// Binary arithmetic and bitwise operations.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(super) enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    BitAnd,
    BitOr,
    BitXor,
    Mod,
    Fmod,
    Shl,
    Shr,
    Max,
    Min,
    Mean,
}

impl Binary {
    /// The f32 binary kernel this operation is (`float_elem!`'s f32 formulas).
    fn device_kernel(self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Binary(match self {
            Binary::Add => BinaryKernel::Add,
            Binary::Sub => BinaryKernel::Sub,
            Binary::Mul => BinaryKernel::Mul,
            Binary::Div => BinaryKernel::Div,
            Binary::Max => BinaryKernel::Max,
            Binary::Min => BinaryKernel::Min,
            _ => return None,
        }))
    }
}

/// Add, Sub, Mul and Div had `broadcast` / `axis` before opset 7 ([`LegacyBroadcastOp`]); the
/// bitwise ops came later.
const BINARY_CTORS: [crate::registry::Constructor; 7] = [
    |ctx| LegacyBroadcastOp::wrap(ctx, Box::new(BinaryOp(Binary::Add))),
    |ctx| LegacyBroadcastOp::wrap(ctx, Box::new(BinaryOp(Binary::Sub))),
    |ctx| LegacyBroadcastOp::wrap(ctx, Box::new(BinaryOp(Binary::Mul))),
    |ctx| LegacyBroadcastOp::wrap(ctx, Box::new(BinaryOp(Binary::Div))),
    |_| Ok(Box::new(BinaryOp(Binary::BitAnd))),
    |_| Ok(Box::new(BinaryOp(Binary::BitOr))),
    |_| Ok(Box::new(BinaryOp(Binary::BitXor))),
];

/// An element type the binary operations apply to. Integer arithmetic wraps (two's
/// complement), as ONNX Runtime's does; integer division by zero is refused before the loop.
trait Elem: Copy + Send + Sync + Default + PartialOrd + 'static {
    fn binary(op: Binary, a: Self, b: Self) -> Option<Self>;
    fn unary(op: Unary, a: Self) -> Option<Self>;
    fn is_zero(self) -> bool;
    fn supports(op: Binary) -> bool;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            #[inline]
            #[allow(unused_comparisons)]
            fn binary(op: Binary, a: Self, b: Self) -> Option<Self> {
                Some(match op {
                    Binary::Add => a.wrapping_add(b),
                    Binary::Sub => a.wrapping_sub(b),
                    Binary::Mul => a.wrapping_mul(b),
                    Binary::Div => a.wrapping_div(b),
                    Binary::BitAnd => a & b,
                    Binary::BitOr => a | b,
                    Binary::BitXor => a ^ b,
                    // Python-style: the result takes the divisor's sign.
                    Binary::Mod => {
                        let r = a.wrapping_rem(b);
                        if r != 0 && ((r < 0) != (b < 0)) { r.wrapping_add(b) } else { r }
                    }
                    Binary::Fmod => a.wrapping_rem(b),
                    Binary::Shl => a.checked_shl(b as u32).unwrap_or(0),
                    Binary::Shr => a.checked_shr(b as u32).unwrap_or(0),
                    Binary::Max => if a >= b { a } else { b },
                    Binary::Min => if a <= b { a } else { b },
                    Binary::Mean => return None,
                })
            }
            #[inline]
            #[allow(unused_comparisons)]
            fn unary(op: Unary, a: Self) -> Option<Self> {
                Some(match op {
                    Unary::Neg => (0 as $t).wrapping_sub(a),
                    Unary::Abs => if a < 0 { (0 as $t).wrapping_sub(a) } else { a },
                    Unary::Sign => if a > 0 { 1 } else if a < 0 { (0 as $t).wrapping_sub(1) } else { 0 },
                    Unary::Relu => if a > 0 { a } else { 0 },
                    Unary::Floor | Unary::Ceil | Unary::Round => a,
                    Unary::BitNot => !a,
                    Unary::Sqrt | Unary::Reciprocal => return None,
                })
            }
            fn is_zero(self) -> bool { self == 0 }
            fn supports(op: Binary) -> bool { op != Binary::Mean }
        }
    )*};
}
int_elem!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            #[inline]
            fn binary(op: Binary, a: Self, b: Self) -> Option<Self> {
                Some(match op {
                    Binary::Add => a + b,
                    Binary::Sub => a - b,
                    Binary::Mul => a * b,
                    Binary::Div => a / b,
                    Binary::Fmod => a % b,
                    Binary::Max => canonical_max(a, b),
                    Binary::Min => canonical_min(a, b),
                    _ => return None,
                })
            }
            #[inline]
            fn unary(op: Unary, a: Self) -> Option<Self> {
                Some(match op {
                    Unary::Neg => -a,
                    Unary::Abs => a.abs(),
                    Unary::Sign => if a > 0.0 { 1.0 } else if a < 0.0 { -1.0 } else if a.is_nan() { a } else { 0.0 },
                    Unary::Relu => if a > 0.0 { a } else if a.is_nan() { a } else { 0.0 },
                    Unary::Floor => a.floor(),
                    Unary::Ceil => a.ceil(),
                    Unary::Round => a.round_ties_even(),
                    Unary::Sqrt => a.sqrt(),
                    Unary::Reciprocal => 1.0 / a,
                    Unary::BitNot => return None,
                })
            }
            fn is_zero(self) -> bool { false }
            fn supports(op: Binary) -> bool {
                matches!(op, Binary::Add | Binary::Sub | Binary::Mul | Binary::Div | Binary::Fmod | Binary::Max | Binary::Min)
            }
        }
    )*};
}
float_elem!(f32, f64);

macro_rules! half_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            #[inline]
            fn binary(op: Binary, a: Self, b: Self) -> Option<Self> {
                f32::binary(op, a.to_f32(), b.to_f32()).map(<$t>::from_f32)
            }
            #[inline]
            fn unary(op: Unary, a: Self) -> Option<Self> {
                f32::unary(op, a.to_f32()).map(<$t>::from_f32)
            }
            fn is_zero(self) -> bool { false }
            fn supports(op: Binary) -> bool { f32::supports(op) }
        }
    )*};
}
half_elem!(f16, bf16);

/// The f32 result of binary `op` on one element pair, as the Add / Sub / Mul / Div / Max / Min
/// ops compute it (0.0 for an op f32 does not support); shared with fused chains.
#[inline(always)]
pub(super) fn f32_binary(op: Binary, a: f32, b: f32) -> f32 {
    <f32 as Elem>::binary(op, a, b).unwrap_or_default()
}

/// The f32 result of unary `op` on one element, as the unary ops compute it.
#[inline(always)]
pub(super) fn f32_unary(op: Unary, a: f32) -> f32 {
    <f32 as Elem>::unary(op, a).unwrap_or_default()
}

fn binary_tensors(op: Binary, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.dtype() != b.dtype() {
        bail!(
            "inputs have different dtypes ({} and {})",
            a.dtype(),
            b.dtype()
        );
    }
    with_numeric_type!(a.dtype(), T => {
        let (x, y) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
        if !T::supports(op) {
            unsupported!("{op:?} on {}", a.dtype());
        }
        if matches!(op, Binary::Div | Binary::Mod | Binary::Fmod) && y.iter().any(|v| v.is_zero()) {
            bail!("integer division by zero");
        }
        let (shape, out) = map_binary(op, (x, a.shape()), (y, b.shape()))?;
        Ok(Tensor::from_vec(shape, out)?)
    }, else unsupported!("{op:?} on {}", a.dtype()))
}

/// [`map2`] of `op`, with the arithmetic ops and Max / Min matched once outside the loop so
/// that each gets its own (vectorisable) loop; the others dispatch per element. The same
/// per-element operation either way.
fn map_binary<T: Elem>(
    op: Binary,
    (x, x_shape): (&[T], &[usize]),
    (y, y_shape): (&[T], &[usize]),
) -> Result<(Vec<usize>, Vec<T>)> {
    macro_rules! hoisted {
        ($($variant:ident),*) => {
            match op {
                $(Binary::$variant => map2(x, x_shape, y, y_shape, |p, q| {
                    T::binary(Binary::$variant, p, q).unwrap_or_default()
                }),)*
                _ => map2(x, x_shape, y, y_shape, |p, q| T::binary(op, p, q).unwrap_or_default()),
            }
        };
    }
    hoisted!(Add, Sub, Mul, Div, Max, Min)
}

#[derive(Debug)]
struct BinaryOp(Binary);

impl Op for BinaryOp {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![broadcast_type(inputs)])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        Ok(vec![
            binary_tensors(self.0, inputs.tensor(0)?, inputs.tensor(1)?)?.into(),
        ])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        self.0.device_kernel()
    }
}

/// The broadcast type of elementwise inputs, when every input shape is known.
fn broadcast_type(inputs: &[Option<ValueType>]) -> Option<ValueType> {
    let dtype = inputs.first()?.as_ref()?.dtype()?;
    let shapes: Option<Vec<Vec<usize>>> = inputs
        .iter()
        .map(|t| t.as_ref()?.shape()?.concrete())
        .collect();
    let shape = shapes.and_then(|s| {
        let refs: Vec<&[usize]> = s.iter().map(Vec::as_slice).collect();
        crate::broadcast::broadcast_shapes(&refs).ok()
    });
    Some(ValueType::tensor(
        dtype,
        shape.map(|s| samebits_ir::Shape::known(&s)),
    ))
}

/// Max, Min, Sum, Mean over any number of inputs, folded left to right in input order; Mean
/// divides the sum by the input count (one IEEE division). Before opset 8 they did not
/// broadcast: every input must have input 0's shape.
#[derive(Debug)]
struct Variadic(Binary, Broadcasting);

#[derive(Debug, PartialEq)]
enum Broadcasting {
    Numpy,
    EqualShapes,
}

impl Variadic {
    fn build(ctx: &BuildContext, op: Binary) -> Result<Box<dyn Op>> {
        let broadcasting = if ctx.opset < 8 {
            Broadcasting::EqualShapes
        } else {
            Broadcasting::Numpy
        };
        Ok(Box::new(Variadic(op, broadcasting)))
    }
}

impl Op for Variadic {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![broadcast_type(inputs)])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let fold = if self.0 == Binary::Mean {
            Binary::Add
        } else {
            self.0
        };
        let mut acc = inputs.tensor(0)?.clone();
        for i in 1..inputs.len() {
            let next = inputs.tensor(i)?;
            if self.1 == Broadcasting::EqualShapes && next.shape() != acc.shape() {
                bail!(
                    "input {i} has shape {:?}, input 0 {:?}: before opset 8 the shapes must be \
                     equal",
                    next.shape(),
                    acc.shape()
                );
            }
            acc = binary_tensors(fold, &acc, next)?;
        }
        if self.0 == Binary::Mean && inputs.len() > 1 {
            let n = inputs.len() as f64;
            let count = with_numeric_type!(acc.dtype(), T => {
                Tensor::scalar(float_from_f64::<T>(n)?)
            }, else unsupported!("Mean on {}", acc.dtype()));
            acc = binary_tensors(Binary::Div, &acc, &count)?;
        }
        Ok(vec![acc.into()])
    }

    /// With two inputs Max, Min and Sum are one binary operation (Mean is not); the device
    /// kernel broadcasts, so the equal-shape form (before opset 8) stays on the CPU.
    fn device_kernel(&self) -> Option<DeviceKernel> {
        (self.1 == Broadcasting::Numpy)
            .then(|| self.0.device_kernel())
            .flatten()
    }
}

fn float_from_f64<T: 'static + Copy>(v: f64) -> Result<T> {
    let any: Box<dyn std::any::Any> =
        if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
            Box::new(v as f32)
        } else if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f64>() {
            Box::new(v)
        } else if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f16>() {
            Box::new(f16::from_f64(v))
        } else if std::any::TypeId::of::<T>() == std::any::TypeId::of::<bf16>() {
            Box::new(bf16::from_f64(v))
        } else {
            unsupported!("Mean of integer tensors")
        };
    Ok(*any.downcast::<T>().expect("type checked above"))
}

#[derive(Copy, Clone, Debug)]
enum Compare {
    Equal,
    Less,
    Greater,
    LessOrEqual,
    GreaterOrEqual,
}

/// Equal, Less and Greater had `broadcast` / `axis` before opset 7 ([`LegacyBroadcastOp`]);
/// LessOrEqual and GreaterOrEqual came later.
const COMPARE_CTORS: [crate::registry::Constructor; 5] = [
    |ctx| LegacyBroadcastOp::wrap(ctx, Box::new(Compare::Equal)),
    |ctx| LegacyBroadcastOp::wrap(ctx, Box::new(Compare::Less)),
    |ctx| LegacyBroadcastOp::wrap(ctx, Box::new(Compare::Greater)),
    |_| Ok(Box::new(Compare::LessOrEqual)),
    |_| Ok(Box::new(Compare::GreaterOrEqual)),
];

impl Compare {
    fn apply<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Compare::Equal => a == b,
            Compare::Less => a < b,
            Compare::Greater => a > b,
            Compare::LessOrEqual => a <= b,
            Compare::GreaterOrEqual => a >= b,
        }
    }
}

impl Op for Compare {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![broadcast_type(inputs).map(|t| {
            ValueType::tensor(DType::Bool, t.shape().cloned())
        })])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (a, b) = (inputs.tensor(0)?, inputs.tensor(1)?);
        if a.dtype() != b.dtype() {
            bail!(
                "inputs have different dtypes ({} and {})",
                a.dtype(),
                b.dtype()
            );
        }
        let cmp = *self;
        let (shape, out) = match a.dtype() {
            DType::Bool => map2(
                a.as_bools()?,
                a.shape(),
                b.as_bools()?,
                b.shape(),
                |x, y| cmp.apply(x, y),
            )?,
            DType::String => {
                let (xs, ys): (Vec<&String>, Vec<&String>) = (
                    a.as_strings()?.iter().collect(),
                    b.as_strings()?.iter().collect(),
                );
                map2(&xs, a.shape(), &ys, b.shape(), |x, y| cmp.apply(x, y))?
            }
            dt => with_numeric_type!(dt, T => {
                map2(a.as_slice::<T>()?, a.shape(), b.as_slice::<T>()?, b.shape(), |x, y| cmp.apply(x, y))?
            }, else unsupported!("comparison of {dt} elements")),
        };
        Ok(vec![Tensor::from_bools(shape, out)?.into()])
    }
}

/// And, Or, Xor on bool tensors.
struct Logic(fn(bool, bool) -> bool);

impl std::fmt::Debug for Logic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Logic")
    }
}

impl Op for Logic {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (a, b) = (inputs.tensor(0)?, inputs.tensor(1)?);
        let (shape, out) = map2(
            a.as_bools()?,
            a.shape(),
            b.as_bools()?,
            b.shape(),
            |x, y| (self.0)(x != 0, y != 0),
        )?;
        Ok(vec![Tensor::from_bools(shape, out)?.into()])
    }
}

#[derive(Debug)]
struct Not;

impl Op for Not {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let a = inputs.tensor(0)?;
        let out = a.as_bools()?.iter().map(|&x| x == 0).collect();
        Ok(vec![Tensor::from_bools(a.shape().to_vec(), out)?.into()])
    }
}

#[derive(Copy, Clone, Debug)]
pub(super) enum Unary {
    Neg,
    Abs,
    Sign,
    Relu,
    Floor,
    Ceil,
    Round,
    Sqrt,
    Reciprocal,
    BitNot,
}

const UNARY_CTORS: [crate::registry::Constructor; 10] = [
    |_| Ok(Box::new(UnaryOp(Unary::Neg))),
    |_| Ok(Box::new(UnaryOp(Unary::Abs))),
    |_| Ok(Box::new(UnaryOp(Unary::Sign))),
    |_| Ok(Box::new(UnaryOp(Unary::Relu))),
    |_| Ok(Box::new(UnaryOp(Unary::Floor))),
    |_| Ok(Box::new(UnaryOp(Unary::Ceil))),
    |_| Ok(Box::new(UnaryOp(Unary::Round))),
    |_| Ok(Box::new(UnaryOp(Unary::Sqrt))),
    |_| Ok(Box::new(UnaryOp(Unary::Reciprocal))),
    |_| Ok(Box::new(UnaryOp(Unary::BitNot))),
];

#[derive(Debug)]
struct UnaryOp(Unary);

impl Op for UnaryOp {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let a = inputs.tensor(0)?;
        let op = self.0;
        with_numeric_type!(a.dtype(), T => {
            let x = a.as_slice::<T>()?;
            if T::unary(op, T::default()).is_none() {
                unsupported!("{op:?} on {}", a.dtype());
            }
            let out: Vec<T> = x.iter().map(|&v| T::unary(op, v).unwrap_or_default()).collect();
            Ok(vec![Tensor::from_vec(a.shape().to_vec(), out)?.into()])
        }, else unsupported!("{op:?} on {}", a.dtype()))
    }

    /// The f32 formulas of `float_elem!` that have a device kernel.
    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Unary(match self.0 {
            Unary::Neg => UnaryKernel::Neg,
            Unary::Abs => UnaryKernel::Abs,
            Unary::Relu => UnaryKernel::Relu,
            Unary::Sqrt => UnaryKernel::Sqrt,
            Unary::Reciprocal => UnaryKernel::Reciprocal,
            _ => return None,
        }))
    }
}

#[derive(Debug)]
enum FloatTest {
    Nan,
    Inf { negative: bool, positive: bool },
}

impl Op for FloatTest {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let a = inputs.tensor(0)?;
        let test = |v: f64| match self {
            FloatTest::Nan => v.is_nan(),
            FloatTest::Inf { negative, positive } => {
                v.is_infinite() && if v > 0.0 { *positive } else { *negative }
            }
        };
        if !a.dtype().is_float() {
            unsupported!("{self:?} on {}", a.dtype());
        }
        let out = a.to_f64_vec()?.into_iter().map(test).collect();
        Ok(vec![Tensor::from_bools(a.shape().to_vec(), out)?.into()])
    }
}

#[derive(Debug)]
struct Where;

fn pick<T>(cond: u8, a: T, b: T) -> T {
    if cond != 0 { a } else { b }
}

impl Op for Where {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (c, x, y) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        if x.dtype() != y.dtype() {
            bail!(
                "X and Y have different dtypes ({} and {})",
                x.dtype(),
                y.dtype()
            );
        }
        let cond = (c.as_bools()?, c.shape());
        let t = match x.dtype() {
            DType::Bool => {
                let (s, o) = map3(
                    cond,
                    (x.as_bools()?, x.shape()),
                    (y.as_bools()?, y.shape()),
                    pick,
                )?;
                Tensor::from_bools(s, o.into_iter().map(|v| v != 0).collect())?
            }
            DType::String => {
                let idx: Vec<usize> = (0..x.numel()).collect();
                let idy: Vec<usize> = (0..y.numel()).collect();
                let (s, o) = map3(
                    cond,
                    (&idx[..], x.shape()),
                    (&idy[..], y.shape()),
                    |k, a, b| {
                        if k != 0 { (true, a) } else { (false, b) }
                    },
                )?;
                let (xs, ys) = (x.as_strings()?, y.as_strings()?);
                let strings = o
                    .into_iter()
                    .map(|(from_x, i)| if from_x { xs[i].clone() } else { ys[i].clone() })
                    .collect();
                Tensor::from_strings(s, strings)?
            }
            dt => with_numeric_type!(dt, T => {
                let (s, o) = map3(cond, (x.as_slice::<T>()?, x.shape()), (y.as_slice::<T>()?, y.shape()), pick)?;
                Tensor::from_vec(s, o)?
            }, else unsupported!("Where on {dt} elements")),
        };
        Ok(vec![t.into()])
    }
}

/// Clip: bounds from attributes (opset < 11) or inputs 1 and 2; `min(max(x, lo), hi)` with NaN
/// in x propagated.
#[derive(Debug)]
struct Clip {
    attr_bounds: Option<(f32, f32)>,
}

fn clip(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let attr_bounds = (ctx.opset < 11).then_some((
        args.float_or("min", f32::MIN)?,
        args.float_or("max", f32::MAX)?,
    ));
    Ok(Box::new(Clip { attr_bounds }))
}

impl Op for Clip {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let (mut lo, mut hi) = (None, None);
        if let Some((a, b)) = self.attr_bounds {
            lo = Some(Tensor::from_vec(vec![], vec![a])?);
            hi = Some(Tensor::from_vec(vec![], vec![b])?);
        } else {
            for (slot, i) in [(&mut lo, 1), (&mut hi, 2)] {
                if let Some(t) = inputs.opt_tensor(i)? {
                    if t.numel() != 1 {
                        bail!(
                            "Clip bound input {i} must hold one element, has shape {:?}",
                            t.shape()
                        );
                    }
                    *slot = Some(t.reshaped(vec![])?);
                }
            }
        }
        for bound in [&lo, &hi].into_iter().flatten() {
            if bound.dtype() != x.dtype() {
                bail!(
                    "Clip bounds: bound has dtype {}, input has {}",
                    bound.dtype(),
                    x.dtype()
                );
            }
        }
        // One pass computing max(x, lo) then min(., hi), the same two operations as Max and Min.
        with_numeric_type!(x.dtype(), T => {
            let lo = lo.as_ref().map(|t| t.as_slice::<T>().map(|s| s[0])).transpose()?;
            let hi = hi.as_ref().map(|t| t.as_slice::<T>().map(|s| s[0])).transpose()?;
            let clamp = |v: T| {
                let v = lo.map_or(v, |l| T::binary(Binary::Max, v, l).unwrap_or(v));
                hi.map_or(v, |h| T::binary(Binary::Min, v, h).unwrap_or(v))
            };
            let src = x.as_slice::<T>()?;
            let out: Vec<T> = if src.len() >= 1 << 15 {
                src.par_iter().map(|&v| clamp(v)).collect()
            } else {
                src.iter().map(|&v| clamp(v)).collect()
            };
            Ok(vec![Tensor::from_vec(x.shape().to_vec(), out)?.into()])
        }, else unsupported!("Clip on {}", x.dtype()))
    }
}

#[derive(Debug)]
struct Identity;

impl Op for Identity {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        Ok(vec![inputs.value(0)?.clone()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::View)
    }

    fn view_shape(&self, shape: &[usize], _inputs: &Inputs) -> Result<Vec<usize>> {
        Ok(shape.to_vec())
    }
}
