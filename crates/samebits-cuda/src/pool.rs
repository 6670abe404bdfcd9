//! Max and average pooling on device buffers (contract section `pool`, kernels/pool.cu), from
//! the geometries samebits-ops resolves for `samebits_kernels::pool_f32`; global pooling as the
//! canonical row reduction (`reduce.rs`) and, for the average, one division by the plane size.

use cudarc::driver::PushKernelArg;
use samebits_kernels::{PoolGeometry, PoolKind, ReduceKind, widen};

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::conv::{check_spatial_axes, device_axes, device_taps};
use crate::device_abi::device_struct;
use crate::error::{CudaError, Result};

device_struct! {
    /// A pooling window's geometry (kernels/pool.cu): spatial sizes widened to 3 axes.
    pub(crate) struct SbPool {
        input: [i32; 3],
        output: [i32; 3],
        kernel: [i32; 3],
        strides: [i32; 3],
        dilations: [i32; 3],
        pads_begin: [i32; 3],
        pads_end: [i32; 3],
        /// 0 max, 1 average over taps in the input, 2 average with count_include_pad
        kind: i32,
    }
}

impl CudaBackend {
    /// MaxPool's Y or AveragePool of `[N, C, in...]` as `pool_f32` computes it.
    pub fn pool(
        &self,
        geometry: &PoolGeometry,
        kind: PoolKind,
        x: &DeviceBuffer,
    ) -> Result<DeviceBuffer> {
        let out_spatial = geometry.out_spatial();
        let planes = geometry.batch * geometry.channels;
        if x.len() != planes * geometry.in_spatial.iter().product::<usize>() {
            return Err(CudaError::Invalid("pool: input length".into()));
        }
        check_spatial_axes(geometry.in_spatial.len())?;
        let [input, output, kernel, strides, dilations, pads_begin] =
            device_taps(&geometry.taps())?;
        let g = SbPool {
            input,
            output,
            kernel,
            strides,
            dilations,
            pads_begin,
            pads_end: device_axes(widen(&geometry.pads_end, 0))?,
            kind: match kind {
                PoolKind::Max => 0,
                PoolKind::Average {
                    count_include_pad: false,
                } => 1,
                PoolKind::Average {
                    count_include_pad: true,
                } => 2,
            },
        };
        let total = planes * out_spatial.iter().product::<usize>();
        let mut y = self.alloc(total)?;
        if total > 0 {
            let f = self.function("sb_pool")?;
            let total_i = total as i64;
            let mut launch = self.stream().launch_builder(&f);
            launch
                .arg(x.slice())
                .arg(y.slice_mut())
                .arg(&total_i)
                .arg(&g);
            // SAFETY: x holds every plane (checked); y holds `total` outputs.
            unsafe { launch.launch(launch_1d(blocks_for(total), 0))? };
        }
        Ok(y)
    }

    /// GlobalMaxPool / GlobalAveragePool of `planes` planes of `len` elements.
    pub fn global_pool(
        &self,
        kind: PoolKind,
        x: &DeviceBuffer,
        planes: usize,
        len: usize,
    ) -> Result<DeviceBuffer> {
        let reduce = match kind {
            PoolKind::Max => ReduceKind::Max,
            PoolKind::Average { .. } => ReduceKind::Sum,
        };
        let mut y = self.reduce(reduce, x, planes, len, 1)?;
        if matches!(kind, PoolKind::Average { .. }) {
            self.divide_by(&mut y, len as f32)?;
        }
        Ok(y)
    }
}
