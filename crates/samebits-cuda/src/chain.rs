//! Elementwise chains on the device (contract sections `elementwise-fusion`, `normalization`;
//! kernels/chain.cu): `samebits::ElementwiseChain` and inference BatchNormalization as the
//! [`ChainKernel`] samebits-ops resolves, evaluated per element in the steps' order.

use cudarc::driver::{DevicePtr, DeviceRepr, PushKernelArg};
use samebits_ops::{BinaryKernel, ChainKernel, ChainLayout, ChainOp, ChainOperand};

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::error::{CudaError, Result};
use crate::program::{activation_index, activation_params};

/// Most steps and inputs of a device chain (`SB_CHAIN_STEPS`, `SB_CHAIN_INPUTS`).
const STEPS: usize = 16;
const INPUTS: usize = 32;
/// `SB_CHAIN_ABSENT`.
const ABSENT: i32 = -1000;

/// `SbChain` of kernels/chain.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SbChain {
    inputs: [u64; INPUTS],
    layout: [i32; INPUTS],
    op: [i32; STEPS],
    arg: [[i32; 5]; STEPS],
    eps: [f32; STEPS],
    p1: [f32; STEPS],
    steps: i32,
    channels: i32,
    inner: i64,
}

// SAFETY: a #[repr(C)] struct of plain numbers (device pointers as u64), the layout of `SbChain`.
unsafe impl DeviceRepr for SbChain {}

/// Whether the device runs `chain` (at most 16 steps, 32 inputs, 5 operands a step).
pub(crate) fn chain_supported(chain: &ChainKernel) -> bool {
    (1..=STEPS).contains(&chain.steps.len())
        && chain.layouts.len() <= INPUTS
        && chain.steps.iter().all(|s| s.operands.len() <= 5)
        && chain.shape.get(1).is_none_or(|&c| c <= i32::MAX as usize)
}

/// The step code of a binary operation: its `sb_binary_op` code.
fn binary_code(op: BinaryKernel) -> i32 {
    op as i32
}

impl CudaBackend {
    /// The chain's output from its inputs (in the chain's input order).
    pub fn chain(&self, chain: &ChainKernel, inputs: &[&DeviceBuffer]) -> Result<DeviceBuffer> {
        if !chain_supported(chain) || inputs.len() != chain.layouts.len() {
            return Err(CudaError::Invalid(
                "chain: unsupported or wrong input count".into(),
            ));
        }
        let numel: usize = chain.shape.iter().product();
        let (channels, inner) = match chain.shape.len() {
            0 | 1 => (1, 1),
            _ => (chain.shape[1], chain.shape[2..].iter().product::<usize>()),
        };
        let mut y = self.alloc(numel)?;
        if numel == 0 {
            return Ok(y);
        }
        let mut params = SbChain {
            inputs: [0; INPUTS],
            layout: [0; INPUTS],
            op: [0; STEPS],
            arg: [[ABSENT; 5]; STEPS],
            eps: [0.0; STEPS],
            p1: [0.0; STEPS],
            steps: chain.steps.len() as i32,
            channels: channels as i32,
            inner: inner as i64,
        };
        let stream = self.stream();
        let mut syncs = Vec::with_capacity(inputs.len());
        for (i, (buffer, layout)) in inputs.iter().zip(&chain.layouts).enumerate() {
            let (code, needed) = match layout {
                ChainLayout::Full => (0, numel),
                ChainLayout::Scalar => (1, 1),
                ChainLayout::Channel => (2, channels),
            };
            if buffer.len() < needed {
                return Err(CudaError::Invalid(format!(
                    "chain input {i}: {} elements, needs {needed}",
                    buffer.len()
                )));
            }
            let (ptr, sync) = buffer.slice().device_ptr(stream);
            syncs.push(sync);
            params.inputs[i] = ptr;
            params.layout[i] = code;
        }
        for (s, step) in chain.steps.iter().enumerate() {
            params.op[s] = match step.op {
                ChainOp::Binary(op) => binary_code(op),
                ChainOp::Relu => 6,
                ChainOp::Clip => 7,
                ChainOp::BatchNorm { epsilon } => {
                    params.eps[s] = epsilon;
                    8
                }
                ChainOp::Activation(a) => {
                    let index = activation_index(a).ok_or_else(|| {
                        CudaError::Invalid(format!("chain step {s}: activation {a:?}"))
                    })?;
                    (params.eps[s], params.p1[s]) = activation_params(a);
                    16 + index as i32
                }
            };
            for (k, operand) in step.operands.iter().enumerate() {
                params.arg[s][k] = match *operand {
                    ChainOperand::Input(i) if i < inputs.len() => i as i32,
                    ChainOperand::Temp(j) if j < s => -1 - j as i32,
                    ChainOperand::Absent => ABSENT,
                    other => {
                        return Err(CudaError::Invalid(format!(
                            "chain step {s}: operand {other:?}"
                        )));
                    }
                };
            }
            let needs = match step.op {
                ChainOp::Binary(_) => 2,
                ChainOp::Relu | ChainOp::Clip | ChainOp::Activation(_) => 1,
                ChainOp::BatchNorm { .. } => 5,
            };
            if params.arg[s][..needs].contains(&ABSENT) {
                return Err(CudaError::Invalid(format!(
                    "chain step {s}: missing operand"
                )));
            }
        }
        let f = self.function("sb_chain")?;
        let n = numel as i64;
        let mut launch = stream.launch_builder(&f);
        launch.arg(y.slice_mut()).arg(&n).arg(&params);
        // SAFETY: every input holds what its layout reads (checked); operands name inputs or
        // earlier steps; y holds `numel` outputs.
        unsafe { launch.launch(launch_1d(blocks_for(numel), 0))? };
        drop(syncs);
        Ok(y)
    }
}
