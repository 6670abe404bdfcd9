//! Steps whose device kernel depends on the input shapes ([`DeviceKernel::Shaped`]): the op
//! resolves its [`ShapedKernel`] from the inputs' shapes and host values (the CPU's own
//! geometry code), the inputs it reads on the device must be float32, the others must be on
//! the host (where the op read them), and the backend runs it.
//! Anything the device does not take leaves the step to the CPU op.
//!
//! [`DeviceKernel::Shaped`]: samebits_ops::DeviceKernel::Shaped

use std::sync::Arc;

use samebits_ir::{DType, Value};
use samebits_ops::{PlanStep, ShapedKernel};

use super::{CudaExecutor, DeviceValue, RunStats, Slot, arg_info};
use crate::buffer::DeviceBuffer;
use crate::chain::chain_supported;
use crate::error::{CudaError, Result};
use crate::layout::copy_supported;
use crate::resize::resize_supported;

/// The step's shaped kernel, if the op resolves one for these inputs and the device takes it.
pub(super) fn resolve(step: &PlanStep<'_>, slots: &[Slot]) -> Option<ShapedKernel> {
    let infos: Vec<_> = step
        .inputs
        .iter()
        .map(|s| s.and_then(|s| arg_info(&slots[s])))
        .collect();
    let shapes: Vec<Option<&[usize]>> = infos.iter().map(|a| a.map(|a| a.shape)).collect();
    let host: Vec<Option<&Value>> = step
        .inputs
        .iter()
        .map(|s| s.and_then(|s| slots[s].host.as_ref()))
        .collect();
    let kernel = step.op.shaped_kernel(&shapes, &host).ok()?;
    let f32_inputs = infos
        .iter()
        .enumerate()
        .all(|(i, info)| !kernel.reads_on_device(i) || info.is_some_and(|a| a.dtype == DType::F32));
    // Inputs the kernel does not read on the device were read on the host while resolving; one
    // held only on the device looked absent there (Pad's value would have been zero), so such a
    // step is left to the CPU op.
    let host_inputs_seen = step
        .inputs
        .iter()
        .zip(&host)
        .enumerate()
        .all(|(i, (s, h))| s.is_none() || kernel.reads_on_device(i) || h.is_some());
    let supported = match &kernel {
        ShapedKernel::Resize(taps) => resize_supported(taps),
        ShapedKernel::Copy { parts, .. } => parts.iter().all(copy_supported),
        ShapedKernel::Chain(chain) | ShapedKernel::ConvChain { chain, .. } => {
            chain_supported(chain)
        }
        ShapedKernel::Source(source) => source.fits(),
        _ => true,
    };
    (f32_inputs
        && host_inputs_seen
        && supported
        && step.outputs.len() <= kernel.output_shapes().len())
    .then_some(kernel)
}

impl CudaExecutor {
    /// Runs a resolved shaped kernel: its device inputs uploaded where needed, its outputs
    /// left on the device.
    pub(super) fn run_shaped(
        &self,
        step: &PlanStep<'_>,
        kernel: &ShapedKernel,
        slots: &mut [Slot],
        stats: &mut RunStats,
    ) -> Result<()> {
        let mut held = Vec::with_capacity(step.inputs.len());
        for (i, s) in step.inputs.iter().enumerate() {
            held.push(match s {
                Some(s) if kernel.reads_on_device(i) => {
                    Some(self.on_device(slots, *s, false, stats)?)
                }
                _ => None,
            });
        }
        let buffers: Vec<Option<&DeviceBuffer>> = held
            .iter()
            .map(|v| match v.as_deref() {
                Some(DeviceValue::F32 { buffer, .. }) => Some(buffer.as_ref()),
                _ => None,
            })
            .collect();
        let input = |i: usize| {
            buffers.get(i).copied().flatten().ok_or_else(|| {
                CudaError::Invalid(format!("input {i} is not a float32 device tensor"))
            })
        };
        let backend = &self.backend;
        // A convolution's output from inputs X, W and the bias among the first `count`.
        let convolve = |conv: &ShapedKernel, count: usize| {
            let bias = buffers[..count.min(buffers.len())]
                .get(2)
                .copied()
                .flatten();
            match conv {
                ShapedKernel::Conv(g) => {
                    backend.conv(g, input(0)?, input(1)?, bias, self.kernel_set)
                }
                ShapedKernel::ConvTranspose(g) => {
                    backend.conv_transpose(g, input(0)?, input(1)?, bias, self.kernel_set)
                }
                _ => Err(CudaError::Invalid("ConvChain: no convolution".into())),
            }
        };
        let buffers_out: Vec<DeviceBuffer> = match kernel {
            ShapedKernel::Conv(_) | ShapedKernel::ConvTranspose(_) => {
                vec![convolve(kernel, buffers.len())?]
            }
            ShapedKernel::Pool(g, kind) => vec![backend.pool(g, *kind, input(0)?)?],
            ShapedKernel::GlobalPool {
                kind, planes, len, ..
            } => vec![backend.global_pool(*kind, input(0)?, *planes, *len)?],
            ShapedKernel::Resize(taps) => vec![backend.resize(taps, input(0)?)?],
            ShapedKernel::Reduce {
                kind,
                outer,
                len,
                inner,
                divisor,
                ..
            } => {
                let mut y = backend.reduce(*kind, input(0)?, *outer, *len, *inner)?;
                if let Some(d) = divisor {
                    backend.divide_by(&mut y, *d)?;
                }
                vec![y]
            }
            ShapedKernel::Copy { outputs, parts } => {
                backend.copy_parts(&buffers, outputs, parts)?
            }
            ShapedKernel::Chain(chain) => {
                let inputs = (0..chain.layouts.len())
                    .map(input)
                    .collect::<Result<Vec<_>>>()?;
                vec![backend.chain(chain, &inputs)?]
            }
            ShapedKernel::Source(source) => {
                let inputs = source
                    .inputs
                    .iter()
                    .map(|&i| input(i))
                    .collect::<Result<Vec<_>>>()?;
                backend.source_kernel(source, &inputs)?
            }
            ShapedKernel::ConvChain {
                conv,
                conv_inputs,
                chain,
                mapped,
            } => {
                let y = convolve(conv, *conv_inputs)?;
                let inputs = (0..chain.layouts.len())
                    .map(|c| match c == *mapped {
                        true => Ok(&y),
                        false => input(ShapedKernel::conv_chain_input(*conv_inputs, *mapped, c)),
                    })
                    .collect::<Result<Vec<_>>>()?;
                vec![backend.chain(chain, &inputs)?]
            }
        };
        let outputs = buffers_out.into_iter().zip(kernel.output_shapes());
        for (slot, (buffer, shape)) in step.outputs.iter().zip(outputs) {
            slots[*slot] = Slot {
                host: None,
                device: Some(Arc::new(DeviceValue::F32 {
                    buffer: Arc::new(buffer),
                    shape,
                })),
            };
        }
        Ok(())
    }
}
