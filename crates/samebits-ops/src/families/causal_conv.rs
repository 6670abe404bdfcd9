//! CausalConvWithState (opset 27): a depthwise causal 1-D convolution that carries its last
//! inputs from call to call, as state-space and linear-attention decoders use it.
//!
//! Inputs `input [B, C, L]`, `weight [C, 1, k]`, optional `bias [C]` and `past_state
//! [B, C, k - 1]` (zeros when absent); attribute `activation`: `none` (default), `silu` or its
//! alias `swish`. The padded rows `P = past_state ++ input` (length `k - 1 + L`) go through
//! Conv's own kernel (`samebits_kernels::conv_f32`, groups = C, no padding: contract section
//! `conv`), then, with `silu`, each output becomes `y * sigmoid(y)` (samebits-math's correctly
//! rounded sigmoid, one product: the Swish of section `activation` with alpha 1). Outputs: those
//! `[B, C, L]` values and `present_state`, the last `k - 1` positions of `P` (copied). f16 /
//! bf16 are computed in f32 and rounded once at the store.

use crate::registry::Registry;
use crate::staging::{f32_values, store_f32};
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{Value, ValueType};
use samebits_kernels::{ConvGeometry, conv_f32};
use samebits_math::Activation;

pub fn register(r: &mut Registry) {
    r.register("", "CausalConvWithState", CausalConvWithState::build);
}

#[derive(Debug)]
struct CausalConvWithState {
    silu: bool,
}

impl CausalConvWithState {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let silu = match args.string_or("activation", "none".into())?.as_str() {
            "none" => false,
            "silu" | "swish" => true,
            other => bail!(
                "CausalConvWithState: attribute \"activation\" must be \"none\", \"silu\" or \
                 \"swish\", got {other:?}"
            ),
        };
        Ok(Box::new(CausalConvWithState { silu }))
    }
}

impl Op for CausalConvWithState {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let input = inputs.first().cloned().flatten();
        let dtype = input.as_ref().and_then(|t| t.dtype());
        Ok(vec![input, dtype.map(|d| ValueType::tensor(d, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        const OP: &str = "CausalConvWithState";
        let x = inputs.tensor(0)?;
        let w = inputs.tensor(1)?;
        let (&[batch, channels, len], &[w_channels, 1, k]) = (x.shape(), w.shape()) else {
            bail!(
                "{OP}: input must be [batch, channels, length] and weight [channels, 1, k], got \
                 {:?} and {:?}",
                x.shape(),
                w.shape()
            );
        };
        if w_channels != channels || k == 0 || w.dtype() != x.dtype() {
            bail!(
                "{OP}: weight {} {:?} does not fit input {} {:?} (it must be [{channels}, 1, k], \
                 k >= 1, of the input's dtype)",
                w.dtype(),
                w.shape(),
                x.dtype(),
                x.shape()
            );
        }
        let bias = match inputs.opt_tensor(2)? {
            Some(b) if b.shape() == [channels] && b.dtype() == x.dtype() => {
                Some(f32_values(b, "bias")?)
            }
            Some(b) => bail!(
                "{OP}: bias must be [{channels}] of the input's dtype, got {} {:?}",
                b.dtype(),
                b.shape()
            ),
            None => None,
        };
        let state = k - 1;
        let past = match inputs.opt_tensor(3)? {
            Some(p) if p.shape() == [batch, channels, state] && p.dtype() == x.dtype() => {
                Some(f32_values(p, "past_state")?)
            }
            Some(p) => bail!(
                "{OP}: past_state must be [{batch}, {channels}, {state}] of the input's dtype, \
                 got {} {:?}",
                p.dtype(),
                p.shape()
            ),
            None => None,
        };
        let Some(padded_len) = state.checked_add(len) else {
            bail!("{OP}: k - 1 + length overflows ({state} + {len})");
        };
        check_tensor_size(
            &format!("{OP} padded input"),
            &[batch, channels, padded_len],
            x.dtype(),
        )?;
        let values = f32_values(x, "input")?;
        let mut padded = vec![0.0f32; batch * channels * padded_len];
        for (row, out) in padded.chunks_exact_mut(padded_len).enumerate() {
            if let Some(past) = &past {
                out[..state].copy_from_slice(&past[row * state..][..state]);
            }
            out[state..].copy_from_slice(&values[row * len..][..len]);
        }
        let mut geometry = ConvGeometry::new(batch, channels, channels, &[padded_len], &[k]);
        geometry.groups = channels;
        let mut y = vec![0.0f32; batch * channels * len];
        let weight = f32_values(w, "weight")?;
        conv_f32(&geometry, &padded, &weight, bias.as_deref(), &mut y);
        if self.silu {
            for v in &mut y {
                *v *= Activation::Sigmoid.eval(*v);
            }
        }
        let present: Vec<f32> = padded
            .chunks_exact(padded_len)
            .flat_map(|row| row[len..].iter().copied())
            .collect();
        Ok(vec![
            store_f32(x.dtype(), vec![batch, channels, len], y)?.into(),
            store_f32(x.dtype(), vec![batch, channels, state], present)?.into(),
        ])
    }
}
