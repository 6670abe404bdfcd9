//! Elementwise chains on the device (contract sections `elementwise-fusion`, `normalization`;
//! kernels/chain.cu): `samebits::ElementwiseChain` and inference BatchNormalization as the
//! [`ChainKernel`] samebits-ops resolves, evaluated per element in the steps' order.

use cudarc::driver::{DevicePtr, PushKernelArg};
use samebits_ops::{BinaryKernel, ChainKernel, ChainLayout, ChainOp, ChainOperand};

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::device_abi::device_struct;
use crate::error::{CudaError, Result};

/// Most steps, inputs and operands a step of a device chain (`SB_CHAIN_STEPS`,
/// `SB_CHAIN_INPUTS`, `SB_CHAIN_OPERANDS` of the device ABI, like every constant below).
pub(crate) const STEPS: usize = 16;
pub(crate) const INPUTS: usize = 32;
pub(crate) const OPERANDS: usize = 5;
/// `SB_CHAIN_ABSENT`: a missing operand.
pub(crate) const ABSENT: i32 = -1000;
/// Input layouts (`SbChain::layout`): the whole output shape, one element, one value per
/// channel, one value per row of the last axis, one value per position along the last axis.
pub(crate) const FULL: i32 = 0;
pub(crate) const SCALAR: i32 = 1;
pub(crate) const CHANNEL: i32 = 2;
pub(crate) const ROW: i32 = 3;
pub(crate) const LAST: i32 = 4;
/// Step codes (`SbChain::op`) after those of the binary operations (`sb_binary_op`, below
/// `RELU`): Relu, Clip (operands x, lo, hi), BatchNormalization (operands x, scale, bias, mean,
/// var), and activation `a` of `sb_activation` as `ACTIVATION + a`.
pub(crate) const RELU: i32 = BinaryKernel::ALL.len() as i32;
pub(crate) const CLIP: i32 = RELU + 1;
pub(crate) const BATCH_NORM: i32 = RELU + 2;
pub(crate) const ACTIVATION: i32 = 16;

device_struct! {
    /// One chain (kernels/chain.cu): its inputs, then its steps in order.
    pub(crate) struct SbChain {
        inputs: [u64; INPUTS] as "const float*",
        /// SB_CHAIN_FULL, SB_CHAIN_SCALAR, SB_CHAIN_CHANNEL, SB_CHAIN_ROW or SB_CHAIN_LAST
        layout: [i32; INPUTS],
        /// step codes: the binary operations of sb_binary_op, SB_CHAIN_RELU, ...
        op: [i32; STEPS],
        /// i >= 0: input i; -1 - j: step j; SB_CHAIN_ABSENT
        arg: [[i32; OPERANDS]; STEPS],
        /// batch norm's epsilon, or an activation's first parameter
        eps: [f32; STEPS],
        /// an activation's second parameter
        p1: [f32; STEPS],
        steps: i32,
        channels: i32,
        /// elements per (image, channel) row
        inner: i64,
        /// the length of the output's last axis
        last: i64,
    }
}

/// Whether the device runs `chain` (at most [`STEPS`] steps, [`INPUTS`] inputs, [`OPERANDS`]
/// operands a step).
pub(crate) fn chain_supported(chain: &ChainKernel) -> bool {
    (1..=STEPS).contains(&chain.steps.len())
        && chain.layouts.len() <= INPUTS
        && chain.steps.iter().all(|s| s.operands.len() <= OPERANDS)
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
        let last = chain.shape.last().copied().unwrap_or(1).max(1);
        let mut y = self.alloc(numel)?;
        if numel == 0 {
            return Ok(y);
        }
        let mut params = SbChain {
            inputs: [0; INPUTS],
            layout: [0; INPUTS],
            op: [0; STEPS],
            arg: [[ABSENT; OPERANDS]; STEPS],
            eps: [0.0; STEPS],
            p1: [0.0; STEPS],
            steps: chain.steps.len() as i32,
            channels: channels as i32,
            inner: inner as i64,
            last: last as i64,
        };
        let stream = self.stream();
        let mut syncs = Vec::with_capacity(inputs.len());
        for (i, (buffer, layout)) in inputs.iter().zip(&chain.layouts).enumerate() {
            let (code, needed) = match layout {
                ChainLayout::Full => (FULL, numel),
                ChainLayout::Scalar => (SCALAR, 1),
                ChainLayout::Channel => (CHANNEL, channels),
                ChainLayout::Row => (ROW, numel / last),
                ChainLayout::Last => (LAST, last),
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
                ChainOp::Relu => RELU,
                ChainOp::Clip => CLIP,
                ChainOp::BatchNorm { epsilon } => {
                    params.eps[s] = epsilon;
                    BATCH_NORM
                }
                ChainOp::Activation(a) => {
                    (params.eps[s], params.p1[s]) = a.params();
                    ACTIVATION + a.index() as i32
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
