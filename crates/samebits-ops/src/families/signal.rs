//! Signal processing: the window generators HannWindow, HammingWindow and BlackmanWindow
//! (contract section `windows`).
//!
//! Windows are computed in f32 with samebits-math's correctly rounded sin and cos, each
//! operation rounded in the written order, then converted to `output_datatype` by the rules of
//! Cast.

use super::cast::{cast_tensor, onnx_dtype};
use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Tensor, Value, ValueType};
use std::f32::consts::PI;

pub fn register(r: &mut Registry) {
    r.register("", "HannWindow", |ctx| Window::build(ctx, WindowKind::Hann));
    r.register("", "HammingWindow", |ctx| {
        Window::build(ctx, WindowKind::Hamming)
    });
    r.register("", "BlackmanWindow", |ctx| {
        Window::build(ctx, WindowKind::Blackman)
    });
}

#[derive(Clone, Copy, Debug)]
enum WindowKind {
    Hann,
    Hamming,
    Blackman,
}

impl WindowKind {
    /// Element `n` of a window whose period is `period` (f32, contract: windows).
    fn at(self, n: f32, period: f32) -> f32 {
        match self {
            WindowKind::Hann => {
                let s = samebits_math::sin((PI * n) / period);
                s * s
            }
            WindowKind::Hamming => {
                let alpha = 25.0f32 / 46.0;
                alpha - samebits_math::cos((2.0 * PI * n) / period) * (1.0 - alpha)
            }
            WindowKind::Blackman => {
                let first = samebits_math::cos((2.0 * PI * n) / period) * -0.5;
                let second = samebits_math::cos((4.0 * PI * n) / period) * 0.08;
                (first + second) + 0.42
            }
        }
    }
}

#[derive(Debug)]
struct Window {
    kind: WindowKind,
    periodic: bool,
    dtype: DType,
}

impl Window {
    fn build(ctx: &BuildContext, kind: WindowKind) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(Window {
            kind,
            periodic: args.int_or("periodic", 1)? != 0,
            dtype: onnx_dtype(args.int_or("output_datatype", 1)?, "output_datatype")?,
        }))
    }
}

impl Op for Window {
    fn infer(&self, _: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(ValueType::tensor(self.dtype, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let size = match inputs.ints(0, "size")?.as_slice() {
            [s] if *s >= 0 => *s as usize,
            other => bail!("input 0 (size) must be one non-negative integer, got {other:?}"),
        };
        // Computed in f32, then cast to the output type.
        check_tensor_size("window", &[size], DType::F32)?;
        check_tensor_size("window", &[size], self.dtype)?;
        let period = if self.periodic {
            size
        } else {
            size.saturating_sub(1)
        } as f32;
        let values: Vec<f32> = (0..size).map(|n| self.kind.at(n as f32, period)).collect();
        let window = Tensor::from_vec(vec![size], values)?;
        Ok(vec![cast_tensor(&window, self.dtype)?.into()])
    }
}
