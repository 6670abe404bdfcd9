//! The generic launch of an op's own kernel ([`SourceKernel`]): samebits-ops registers the
//! `.cu` source beside the op's family (compiled into the program by src/program.rs) and
//! resolves the launch; this file uploads the host tables, fills [`SbSourceKernel`] and runs
//! one thread per output element. Nothing here knows any particular op.

use cudarc::driver::{DevicePtr, DevicePtrMut, PushKernelArg};
use samebits_ops::{
    SOURCE_KERNEL_MAX_BUFFERS, SOURCE_KERNEL_MAX_FLOATS, SOURCE_KERNEL_MAX_INTS, SourceKernel,
};

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::device_abi::device_struct;
use crate::error::{CudaError, Result};

device_struct! {
    /// The argument of an op's own kernel (samebits-ops `SourceKernel`): its float32 input
    /// buffers then its tables, the output, the output's element count and the parameters.
    pub(crate) struct SbSourceKernel {
        buffers: [u64; SOURCE_KERNEL_MAX_BUFFERS] as "const float*",
        out: u64 as "float*",
        count: i64,
        ints: [i64; SOURCE_KERNEL_MAX_INTS],
        floats: [f32; SOURCE_KERNEL_MAX_FLOATS],
    }
}

impl CudaBackend {
    /// Runs `kernel` with `inputs` (its [`SourceKernel::inputs`], in order).
    pub fn source_kernel(
        &self,
        kernel: &SourceKernel,
        inputs: &[&DeviceBuffer],
    ) -> Result<DeviceBuffer> {
        if !kernel.fits() || inputs.len() != kernel.inputs.len() {
            return Err(CudaError::Invalid(format!(
                "{}: {} inputs, {} tables, {} ints, {} floats do not fit the kernel argument",
                kernel.entry,
                inputs.len(),
                kernel.tables.len(),
                kernel.ints.len(),
                kernel.floats.len()
            )));
        }
        let total: usize = kernel.output.iter().product();
        let mut y = self.alloc(total)?;
        if total == 0 {
            return Ok(y);
        }
        let tables = kernel
            .tables
            .iter()
            .map(|t| self.upload(t))
            .collect::<Result<Vec<_>>>()?;
        let f = self.function(kernel.entry)?;
        let stream = self.stream();
        let mut params = SbSourceKernel {
            buffers: [0; SOURCE_KERNEL_MAX_BUFFERS],
            out: 0,
            count: total as i64,
            ints: [0; SOURCE_KERNEL_MAX_INTS],
            floats: [0.0; SOURCE_KERNEL_MAX_FLOATS],
        };
        let mut syncs = Vec::with_capacity(inputs.len() + tables.len());
        for (slot, buffer) in params
            .buffers
            .iter_mut()
            .zip(inputs.iter().copied().chain(&tables))
        {
            let (ptr, sync) = buffer.slice().device_ptr(stream);
            syncs.push(sync);
            *slot = ptr;
        }
        params.ints[..kernel.ints.len()].copy_from_slice(&kernel.ints);
        params.floats[..kernel.floats.len()].copy_from_slice(&kernel.floats);
        let (out, out_sync) = y.slice_mut().device_ptr_mut(stream);
        params.out = out;
        let mut launch = stream.launch_builder(&f);
        launch.arg(&params);
        // SAFETY: the buffers stay alive until the launch is queued (`syncs`, `tables`,
        // `out_sync`); `out` holds `count` elements; the op that resolved the launch sized the
        // tables and parameters its kernel indexes (samebits-ops, tested against its CPU
        // evaluation).
        unsafe { launch.launch(launch_1d(blocks_for(total), 0))? };
        drop((syncs, out_sync));
        Ok(y)
    }
}
