//! Fused elementwise steps (kernels/fused.cu) for decoder fusion's ops (samebits-passes'
//! `decoder_fusion.rs`): the operations of the replaced steps in their order, each rounded
//! once, so the same bits.

use cudarc::driver::PushKernelArg;

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::error::{CudaError, Result};

impl CudaBackend {
    /// `h = (g * sigmoid(g)) * u` elementwise (the SiLU gate: Sigmoid, Mul, Mul), with
    /// samebits-math's sigmoid.
    pub fn silu_mul(&self, g: &DeviceBuffer, u: &DeviceBuffer) -> Result<DeviceBuffer> {
        if g.len() != u.len() {
            return Err(CudaError::Invalid(format!(
                "silu_mul of {} and {} values",
                g.len(),
                u.len()
            )));
        }
        let mut h = self.alloc(g.len())?;
        if h.is_empty() {
            return Ok(h);
        }
        let f = self.function("sb_silu_mul")?;
        let n = g.len() as i64;
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(g.slice())
            .arg(u.slice())
            .arg(h.slice_mut())
            .arg(&n);
        // SAFETY: grid-stride over the equal-length buffers.
        unsafe { launch.launch(launch_1d(blocks_for(g.len()), 0))? };
        Ok(h)
    }
}
