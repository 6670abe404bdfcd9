//! Adjacent steps that run as one launch, where that changes no operation (an LLM decode step
//! is a few hundred tiny launches, so each one saved counts). The SiLU gate and the product
//! with its residual Add are graph rewrites now (samebits-passes' `decoder_fusion.rs`, ops
//! `samebits::SiluGate` and `samebits::MatMulGgufAdd` with their own device kernels); the two
//! fusions below, which depend on the run's shapes (few activation rows), still join steps here:
//!
//! - Few activation rows (decode): an `RMSNormalization` over the last axis, then up to three
//!   `MatMulGguf` of its output (one weight type and width), then `RotaryEmbedding`
//!   (interleaved) of some of the products, or the `SiluGate` of two products: one launch of
//!   kernels/gguf.cu, each block recomputing the row's RMS statistic in the canonical order
//!   (a llama layer's norm, Q, K, V and rotaries, or its norm, gate, up and gate). Without the
//!   norm, at least two products or an epilogue.
//! - Few queries (decode): `Attention` (heads of 64 values), then the `MatMulGgufAdd` of its
//!   output and a residual term: the attention launch computes the product too, head h's
//!   outputs being the 64-term tile h of every dot, the tiles folded in order by the last head
//!   block (kernels/attention.cu, `sb_attention_product`).
//!
//! A fusion applies only when the steps are consecutive in the plan, each intermediate value
//! is read by no other step (the consuming step releases it), every operand is a float32
//! tensor of the same shape (no broadcasting), and the steps would have run on the device
//! anyway; under an observer (which watches every step's outputs) nothing fuses, nor with
//! `SAMEBITS_CUDA_FUSE=0` (`no-attention` keeps all but the attention's product; the same
//! switch turns the graph rewrites off in samebits-llm).

use samebits_ir::DType;
use samebits_ops::{DeviceKernel, PlanStep};

use super::dispatch::{ArgInfo, FusedRotary, GROUPED_ATTENTION_MIN_QUERIES, Launch, plan_launch};
use super::{CudaExecutor, DeviceValue, RunStats, Slot, arg_info, at_step};
use crate::attention::HeadsLayout;
use crate::error::Result;
use crate::gguf::GGUF_GEMM_MIN_ROWS;

impl CudaExecutor {
    /// Runs a fusion starting at `steps[0]` if one applies; returns the steps it ran.
    pub(super) fn run_fused(
        &self,
        steps: &[PlanStep],
        kernels: &[Option<DeviceKernel>],
        slots: &mut [Slot],
        stats: &mut RunStats,
    ) -> Result<Option<usize>> {
        let switch = fusions();
        if switch == Fusions::None {
            return Ok(None);
        }
        let fused = (switch == Fusions::All)
            .then(|| self.attention_product(steps, kernels, slots))
            .flatten()
            .or_else(|| self.norm_products(steps, kernels, slots));
        let Some(Fused {
            launch,
            inputs,
            outputs,
            steps: n,
        }) = fused
        else {
            return Ok(None);
        };
        self.run_device(&launch, &inputs, &outputs, slots, stats)
            .map_err(at_step(&steps[0]))?;
        for step in &steps[..n] {
            for slot in step.release {
                if !outputs.contains(slot) {
                    slots[*slot] = Slot::default();
                }
            }
        }
        stats.device_steps += n;
        Ok(Some(n))
    }

    /// `Attention` of few queries (heads of 64 values, 3-D output), then the `MatMulGgufAdd` of
    /// its output Y and another tensor (module docs).
    fn attention_product(
        &self,
        steps: &[PlanStep],
        kernels: &[Option<DeviceKernel>],
        slots: &[Slot],
    ) -> Option<Fused> {
        let (
            Some(DeviceKernel::Attention { .. }),
            Some(DeviceKernel::MatMulGgufAdd {
                ggml_type,
                rows,
                cols,
            }),
        ) = (kernels.first().copied()?, kernels.get(1).copied()?)
        else {
            return None;
        };
        let (attention, product) = (steps[0], steps[1]);
        let Some(Launch::Attention {
            q,
            k,
            v,
            y,
            y_shape,
            causal,
            scale,
            product: None,
        }) = self.launch_for(&attention, kernels[0], slots)
        else {
            return None;
        };
        let [y_slot, present_k, present_v] = *attention.outputs else {
            return None;
        };
        let ([Some(x), Some(w), Some(other)], [out]) = (product.inputs, product.outputs) else {
            return None;
        };
        let args = [
            Some(ArgInfo {
                dtype: DType::F32,
                shape: &y_shape,
                host: None,
            }),
            arg_info(&slots[*w]),
        ];
        let product_kernel = DeviceKernel::MatMulGguf {
            ggml_type,
            rows,
            cols,
        };
        let Some(Launch::Gguf {
            ggml_type,
            rows,
            cols,
            out_shape,
            add: false,
        }) = plan_launch(product_kernel, &args, 1)
        else {
            return None;
        };
        let tile = samebits_kernels::REDUCTION_TILE;
        let fits = *x == y_slot
            && *other != y_slot
            && product.release.contains(&y_slot)
            && q.seq < GROUPED_ATTENTION_MIN_QUERIES
            && v.size == tile
            && cols == q.heads * tile
            // The fused kernel addresses a head's tile of a weight row in whole blocks.
            && ggml_type.row_bytes(tile).is_some()
            && y == HeadsLayout::split(q.batch, q.seq, q.heads, tile)
            && dense_f32(slots, *other).is_some_and(|shape| shape == out_shape);
        if !fits {
            return None;
        }
        let mut inputs: Vec<Option<usize>> = attention.inputs.to_vec();
        inputs.resize(6, None);
        inputs.extend([Some(*w), Some(*other)]);
        Some(Fused {
            launch: Launch::Attention {
                q,
                k,
                v,
                y,
                y_shape,
                causal,
                scale,
                product: Some((ggml_type, rows, out_shape)),
            },
            inputs,
            outputs: vec![*out, present_k, present_v],
            steps: 2,
        })
    }

    /// `RMSNormalization` (optional), 1 to 3 `MatMulGguf` of its output, then `RotaryEmbedding`
    /// of product outputs or the SiLU gate of two products (module docs).
    fn norm_products(
        &self,
        steps: &[PlanStep],
        kernels: &[Option<DeviceKernel>],
        slots: &[Slot],
    ) -> Option<Fused> {
        let mut i = 0;
        let mut norm = None;
        if let Some(DeviceKernel::RmsNorm { .. }) = kernels.first().copied()? {
            let Some(Launch::RmsNorm { epsilon }) = self.launch_for(&steps[0], kernels[0], slots)
            else {
                return None;
            };
            let ([Some(x), Some(scale)], [normed]) = (steps[0].inputs, steps[0].outputs) else {
                return None;
            };
            norm = Some((*x, *scale, *normed, epsilon));
            i = 1;
        }
        // The activations of the products (the norm's input, of the normalized row's shape).
        let x_in = match norm {
            Some((x_in, ..)) => x_in,
            None => (*steps.first()?.inputs.first()?)?,
        };
        let shape = dense_f32(slots, x_in)?;
        // The products: (weight slot, rows, output slot, output shape).
        let mut products: Vec<(usize, usize, usize, Vec<usize>)> = Vec::new();
        let mut kind = None;
        while products.len() < 3 && i < steps.len() {
            let Some(Some(kernel @ DeviceKernel::MatMulGguf { .. })) = kernels.get(i).copied()
            else {
                break;
            };
            let step = &steps[i];
            let ([Some(x), Some(w)], [y]) = (step.inputs, step.outputs) else {
                break;
            };
            if *x != norm.map_or(x_in, |(_, _, normed, _)| normed) {
                break;
            }
            let args = [
                Some(ArgInfo {
                    dtype: DType::F32,
                    shape: &shape,
                    host: None,
                }),
                arg_info(&slots[*w]),
            ];
            let Some(Launch::Gguf {
                ggml_type,
                rows,
                cols,
                out_shape,
                add: false,
            }) = plan_launch(kernel, &args, 1)
            else {
                break;
            };
            if kind.is_some_and(|k| k != (ggml_type, cols)) {
                break;
            }
            kind = Some((ggml_type, cols));
            products.push((*w, rows, *y, out_shape));
            i += 1;
        }
        let (ggml_type, cols) = kind?;
        let last_product = &steps[i - 1];
        // The normalized row is read by these products alone; the activations are few rows.
        let m = shape.iter().product::<usize>() / cols.max(1);
        let fits = shape.last() == Some(&cols)
            && m < GGUF_GEMM_MIN_ROWS
            && self.backend.gguf_products_fit(cols)
            && norm.is_none_or(|(_, scale, normed, _)| {
                last_product.release.contains(&normed)
                    && dense_f32(slots, scale).is_some_and(|s| s.iter().product::<usize>() == cols)
            });
        if !fits {
            return None;
        }
        let mut outputs: Vec<usize> = products.iter().map(|p| p.2).collect();
        let mut matrices: Vec<(usize, Option<FusedRotary>)> =
            products.iter().map(|p| (p.1, None)).collect();
        let mut weights: Vec<usize> = products.iter().map(|p| p.0).collect();
        let mut out_shapes: Vec<Vec<usize>> = products.iter().map(|p| p.3.clone()).collect();
        let mut tables = None;
        let mut gate = false;
        let pair = (outputs.first().copied(), outputs.get(1).copied());
        if products.len() == 2
            && out_shapes[0] == out_shapes[1]
            && let Some(Some(DeviceKernel::SiluGate)) = kernels.get(i)
            && let ([Some(g), Some(u)], [h]) = (steps[i].inputs, steps[i].outputs)
            && (pair == (Some(*g), Some(*u)) || pair == (Some(*u), Some(*g)))
            && steps[i].release.contains(g)
            && steps[i].release.contains(u)
        {
            // Matrix 0 is the gate.
            if pair.0 == Some(*u) {
                weights.swap(0, 1);
                matrices.swap(0, 1);
            }
            gate = true;
            outputs = vec![*h];
            out_shapes.truncate(1);
            i += 1;
        } else {
            // Rotary steps of product outputs, one table pair for all.
            while let Some(Some(DeviceKernel::Rotary { .. })) = kernels.get(i) {
                let step = &steps[i];
                let ([Some(input), Some(cos), Some(sin)], [out]) = (step.inputs, step.outputs)
                else {
                    break;
                };
                let Some(j) = outputs.iter().position(|o| o == input) else {
                    break;
                };
                let info = |slot: usize| arg_info(&slots[slot]);
                let args = [
                    Some(ArgInfo {
                        dtype: DType::F32,
                        shape: &out_shapes[j],
                        host: None,
                    }),
                    info(*cos),
                    info(*sin),
                ];
                let Some(Launch::Rotary {
                    layout,
                    width,
                    rot,
                    interleaved: true,
                }) = kernels[i].and_then(|k| plan_launch(k, &args, 1))
                else {
                    break;
                };
                let rows = matrices[j].0;
                let split = match out_shapes[j][..] {
                    [b, s, n] => {
                        HeadsLayout::split(b, s, layout.heads, layout.size) == layout && n == rows
                    }
                    _ => false,
                };
                let same_tables = tables.is_none_or(|t| t == (*cos, *sin, width));
                if !split
                    || !same_tables
                    || matrices[j].1.is_some()
                    || !step.release.contains(input)
                    || dense_f32(slots, *cos).is_none()
                    || dense_f32(slots, *sin).is_none()
                {
                    break;
                }
                tables = Some((*cos, *sin, width));
                matrices[j].1 = Some((layout.size, rot, width));
                outputs[j] = *out;
                i += 1;
            }
        }
        let epilogue = gate || tables.is_some();
        if norm.is_none() && products.len() < 2 && !epilogue {
            return None;
        }
        let mut inputs = vec![
            Some(x_in),
            norm.map(|(_, scale, ..)| scale),
            None,
            None,
            None,
        ];
        for (k, w) in weights.iter().enumerate() {
            inputs[2 + k] = Some(*w);
        }
        inputs.push(None);
        inputs.push(tables.map(|t| t.0));
        inputs.push(tables.map(|t| t.1));
        Some(Fused {
            launch: Launch::GgufProducts {
                ggml_type,
                cols,
                norm: norm.map(|(.., eps)| eps),
                matrices,
                gate,
                out_shapes,
            },
            inputs,
            outputs,
            steps: i,
        })
    }
}

/// Which fusions run (`SAMEBITS_CUDA_FUSE`: unset, every one; `0`, none; `no-attention`, all
/// but the attention with its product): a switch for measuring and diagnosing, the bits are
/// the same either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fusions {
    All,
    NoAttention,
    None,
}

fn fusions() -> Fusions {
    static SWITCH: std::sync::OnceLock<Fusions> = std::sync::OnceLock::new();
    *SWITCH.get_or_init(|| match std::env::var("SAMEBITS_CUDA_FUSE").as_deref() {
        Ok("0") => Fusions::None,
        Ok("no-attention") => Fusions::NoAttention,
        _ => Fusions::All,
    })
}

/// A launch replacing `steps` consecutive steps: its input slots and its output slots.
struct Fused {
    launch: Launch,
    inputs: Vec<Option<usize>>,
    outputs: Vec<usize>,
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
