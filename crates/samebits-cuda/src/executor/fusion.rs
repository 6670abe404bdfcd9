//! Adjacent steps that run as one launch, where that changes no operation (an LLM decode step
//! is a few hundred tiny launches, so each one saved counts):
//!
//! - `MatMulGguf` then `Add` of its product and another tensor of the product's shape (a
//!   residual connection): the product's kernel adds the other term to each finished dot
//!   (`y = dot + x`, the Add's one rounding; IEEE addition commutes, so either operand order).
//! - `Sigmoid(g)`, `Mul(g, s)`, `Mul(t, u)` (a SiLU gate): one kernel computing
//!   `(g * sigmoid(g)) * u`, the same three roundings (kernels/fused.cu).
//!
//! A fusion applies only when the steps are consecutive in the plan, each intermediate value
//! is read by no other step (the consuming step releases it), every operand is a float32
//! tensor of the same shape (no broadcasting), and the steps would have run on the device
//! anyway; under an observer (which watches every step's outputs) nothing fuses.

use samebits_ir::DType;
use samebits_math::Activation;
use samebits_ops::{BinaryKernel, DeviceKernel, PlanStep, UnaryKernel};

use super::dispatch::{ArgInfo, Launch};
use super::{CudaExecutor, DeviceValue, RunStats, Slot, arg_info, at_step};
use crate::error::Result;

impl CudaExecutor {
    /// Runs a fusion starting at `steps[0]` if one applies; returns the steps it ran.
    pub(super) fn run_fused(
        &self,
        steps: &[PlanStep],
        kernels: &[Option<DeviceKernel>],
        slots: &mut [Slot],
        stats: &mut RunStats,
    ) -> Result<Option<usize>> {
        let fused = match self.product_add(steps, kernels, slots) {
            Some(fused) => Some(fused),
            None => silu_gate(steps, kernels, slots),
        };
        let Some(Fused {
            launch,
            inputs,
            output,
            steps: n,
        }) = fused
        else {
            return Ok(None);
        };
        self.run_device(&launch, &inputs, &[output], slots, stats)
            .map_err(at_step(&steps[0]))?;
        for step in &steps[..n] {
            for slot in step.release {
                if *slot != output {
                    slots[*slot] = Slot::default();
                }
            }
        }
        stats.device_steps += n;
        Ok(Some(n))
    }

    /// `MatMulGguf` then `Add(product, x)` or `Add(x, product)`.
    fn product_add(
        &self,
        steps: &[PlanStep],
        kernels: &[Option<DeviceKernel>],
        slots: &[Slot],
    ) -> Option<Fused> {
        let (Some(DeviceKernel::MatMulGguf { .. }), Some(DeviceKernel::Binary(BinaryKernel::Add))) =
            (kernels.first().copied()?, kernels.get(1).copied()?)
        else {
            return None;
        };
        let (product, add) = (steps[0], steps[1]);
        let Some(Launch::Gguf {
            ggml_type,
            rows,
            cols,
            out_shape,
            add: false,
        }) = self.launch_for(&product, kernels[0], slots)
        else {
            return None;
        };
        let y = *product.outputs.first()?;
        let other = match add.inputs {
            [Some(a), Some(b)] if *a == y && *b != y => *b,
            [Some(a), Some(b)] if *b == y && *a != y => *a,
            _ => return None,
        };
        let fits = add.outputs.len() == 1
            && product.outputs.len() == 1
            && add.release.contains(&y)
            && dense_f32(slots, other).is_some_and(|shape| shape == out_shape);
        fits.then(|| Fused {
            launch: Launch::Gguf {
                ggml_type,
                rows,
                cols,
                out_shape,
                add: true,
            },
            inputs: vec![product.inputs[0], product.inputs[1], Some(other)],
            output: add.outputs[0],
            steps: 2,
        })
    }
}

/// `Sigmoid(g)`, `Mul(g, s)` (either order), `Mul(t, u)` (either order).
fn silu_gate(
    steps: &[PlanStep],
    kernels: &[Option<DeviceKernel>],
    slots: &[Slot],
) -> Option<Fused> {
    let mul = Some(DeviceKernel::Binary(BinaryKernel::Mul));
    let sigmoid = Some(DeviceKernel::Unary(UnaryKernel::Activation(
        Activation::Sigmoid,
    )));
    if kernels.len() < 3 || kernels[0] != sigmoid || kernels[1] != mul || kernels[2] != mul {
        return None;
    }
    let [Some(g)] = *steps[0].inputs else {
        return None;
    };
    let [s] = *steps[0].outputs else { return None };
    let [t] = *steps[1].outputs else { return None };
    let [h] = *steps[2].outputs else { return None };
    let pair = |inputs: &[Option<usize>]| match *inputs {
        [Some(a), Some(b)] => Some((a, b)),
        _ => None,
    };
    let (a, b) = pair(steps[1].inputs)?;
    let (c, d) = pair(steps[2].inputs)?;
    let u = match (c == t, d == t) {
        (true, false) => d,
        (false, true) => c,
        _ => return None,
    };
    let shape = dense_f32(slots, g)?;
    let fits = ((a, b) == (g, s) || (a, b) == (s, g))
        && steps[1].release.contains(&s)
        && steps[2].release.contains(&t)
        && dense_f32(slots, u).is_some_and(|us| us == shape);
    fits.then(|| Fused {
        launch: Launch::SiluMul,
        inputs: vec![Some(g), Some(u)],
        output: h,
        steps: 3,
    })
}

/// A launch replacing `steps` consecutive steps: its input slots and its one output slot.
struct Fused {
    launch: Launch,
    inputs: Vec<Option<usize>>,
    output: usize,
    steps: usize,
}

/// The shape of the slot's value if it is a float32 tensor held densely (not a cache prefix).
fn dense_f32(slots: &[Slot], slot: usize) -> Option<Vec<usize>> {
    let slot_value = &slots[slot];
    if let Some(device) = &slot_value.device
        && matches!(device.as_ref(), DeviceValue::Kv { .. })
    {
        return None;
    }
    let ArgInfo { dtype, shape, .. } = arg_info(slot_value)?;
    (dtype == DType::F32).then(|| shape.to_vec())
}
