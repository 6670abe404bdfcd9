//! The generic launch of an op's own kernel ([`SourceKernel`]): samebits-ops registers the
//! `.cu` source beside the op's family (compiled into the program by src/program.rs) and
//! resolves the launch; this file places the host tables on the device (`CudaBackend::table`,
//! kept by content), fills [`SbSourceKernel`] and runs one thread per element of output 0 or
//! the op's blocks ([`SourceLaunch`]). Nothing here knows any particular op.

use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use samebits_ops::{
    SOURCE_KERNEL_MAX_BUFFERS, SOURCE_KERNEL_MAX_FLOATS, SOURCE_KERNEL_MAX_INTS,
    SOURCE_KERNEL_MAX_OUTPUTS, SourceKernel, SourceLaunch,
};

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::device_abi::device_struct;
use crate::error::{CudaError, Result};

device_struct! {
    /// The argument of an op's own kernel (samebits-ops `SourceKernel`): its float32 input
    /// buffers then its tables, the outputs, output 0's element count (per-element launches)
    /// or the number of blocks, and the parameters.
    pub(crate) struct SbSourceKernel {
        buffers: [u64; SOURCE_KERNEL_MAX_BUFFERS] as "const float*",
        out: [u64; SOURCE_KERNEL_MAX_OUTPUTS] as "float*",
        count: i64,
        ints: [i64; SOURCE_KERNEL_MAX_INTS],
        floats: [f32; SOURCE_KERNEL_MAX_FLOATS],
    }
}

impl CudaBackend {
    /// Runs `kernel` with `inputs` (its [`SourceKernel::inputs`], in order); returns its
    /// outputs.
    pub fn source_kernel(
        &self,
        kernel: &SourceKernel,
        inputs: &[&DeviceBuffer],
    ) -> Result<Vec<DeviceBuffer>> {
        if !kernel.fits() || inputs.len() != kernel.inputs.len() {
            return Err(CudaError::Invalid(format!(
                "{}: {} inputs, {} tables, {} outputs, {} ints, {} floats do not fit the kernel \
                 argument",
                kernel.entry,
                inputs.len(),
                kernel.tables.len(),
                kernel.outputs.len(),
                kernel.ints.len(),
                kernel.floats.len()
            )));
        }
        let mut outputs = kernel
            .outputs
            .iter()
            .map(|shape| self.alloc(shape.iter().product()))
            .collect::<Result<Vec<_>>>()?;
        let (count, config) = match kernel.launch {
            SourceLaunch::PerElement => {
                let total: usize = kernel.outputs[0].iter().product();
                (total, launch_1d(blocks_for(total), 0))
            }
            SourceLaunch::Blocks {
                blocks,
                threads,
                shared,
            } => {
                if threads == 0 || threads > 1024 || threads % 32 != 0 || shared > 48 * 1024 {
                    return Err(CudaError::Invalid(format!(
                        "{}: blocks of {threads} threads with {shared} bytes of shared memory",
                        kernel.entry
                    )));
                }
                let config = LaunchConfig {
                    grid_dim: (blocks as u32, 1, 1),
                    block_dim: (threads as u32, 1, 1),
                    shared_mem_bytes: shared as u32,
                };
                (blocks, config)
            }
        };
        if count == 0 {
            return Ok(outputs);
        }
        let tables = kernel
            .tables
            .iter()
            .map(|t| self.table(&t.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()))
            .collect::<Result<Vec<_>>>()?;
        let f = self.function(kernel.entry)?;
        let stream = self.stream();
        let mut params = SbSourceKernel {
            buffers: [0; SOURCE_KERNEL_MAX_BUFFERS],
            out: [0; SOURCE_KERNEL_MAX_OUTPUTS],
            count: count as i64,
            ints: [0; SOURCE_KERNEL_MAX_INTS],
            floats: [0.0; SOURCE_KERNEL_MAX_FLOATS],
        };
        let mut syncs = Vec::with_capacity(inputs.len() + tables.len());
        for (slot, buffer) in params.buffers.iter_mut().zip(inputs) {
            let (ptr, sync) = buffer.slice().device_ptr(stream);
            syncs.push(sync);
            *slot = ptr;
        }
        for (slot, table) in params.buffers[inputs.len()..].iter_mut().zip(&tables) {
            let (ptr, sync) = table.slice().device_ptr(stream);
            syncs.push(sync);
            *slot = ptr;
        }
        params.ints[..kernel.ints.len()].copy_from_slice(&kernel.ints);
        params.floats[..kernel.floats.len()].copy_from_slice(&kernel.floats);
        let mut out_syncs = Vec::with_capacity(outputs.len());
        for (slot, y) in params.out.iter_mut().zip(&mut outputs) {
            let (ptr, sync) = y.slice_mut().device_ptr_mut(stream);
            out_syncs.push(sync);
            *slot = ptr;
        }
        let mut launch = stream.launch_builder(&f);
        launch.arg(&params);
        // SAFETY: the buffers stay alive until the launch is queued (`syncs`, `tables`,
        // `out_syncs`); each output holds its shape's elements; the op that resolved the
        // launch sized the tables and parameters its kernel indexes (samebits-ops, tested
        // against its CPU evaluation).
        unsafe { launch.launch(config)? };
        drop((syncs, out_syncs));
        Ok(outputs)
    }
}
