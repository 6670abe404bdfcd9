//! Resize on device buffers (contract section `resize`, kernels/resize.cu). samebits-ops
//! computes each axis' taps with the CPU's own code ([`ResizeTaps`]); they travel as four
//! tables and the kernel combines them per output element in the CPU's order.

use cudarc::driver::PushKernelArg;
use samebits_ops::ResizeTaps;

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::device_abi::device_struct;
use crate::elementwise::MAX_RANK;
use crate::error::{CudaError, Result};

device_struct! {
    /// The output of a resize (kernels/resize.cu).
    pub(crate) struct SbResize {
        /// output dims (the first `rank` entries)
        out: [i64; MAX_RANK],
        /// per axis: index of coordinate 0 in `first` / `count`
        coord_base: [i32; MAX_RANK],
        rank: i32,
        extrapolation: f32,
    }
}

/// Whether the device resizes with these taps (rank at most [`MAX_RANK`], 32-bit tables).
pub(crate) fn resize_supported(taps: &ResizeTaps) -> bool {
    let entries: usize = taps.axes.iter().map(Vec::len).sum();
    let tap_count: usize = taps
        .axes
        .iter()
        .flatten()
        .map(|t| t.as_ref().map_or(0, Vec::len))
        .sum();
    (1..=MAX_RANK).contains(&taps.out_shape.len())
        && taps.axes.len() == taps.out_shape.len()
        && entries < i32::MAX as usize
        && tap_count < i32::MAX as usize
}

impl CudaBackend {
    /// Resize of `x` (of `taps.in_shape`) to `taps.out_shape`.
    pub fn resize(&self, taps: &ResizeTaps, x: &DeviceBuffer) -> Result<DeviceBuffer> {
        if !resize_supported(taps) || x.len() != taps.in_shape.iter().product::<usize>() {
            return Err(CudaError::Invalid(
                "resize: unsupported taps or input length".into(),
            ));
        }
        let total: usize = taps.out_shape.iter().product();
        let mut y = self.alloc(total)?;
        if total == 0 {
            return Ok(y);
        }
        let rank = taps.out_shape.len();
        let mut params = SbResize {
            out: [1; MAX_RANK],
            coord_base: [0; MAX_RANK],
            rank: rank as i32,
            extrapolation: taps.extrapolation,
        };
        let (mut first, mut count) = (Vec::new(), Vec::new());
        let (mut offsets, mut weights) = (Vec::<i64>::new(), Vec::<f32>::new());
        for (a, axis) in taps.axes.iter().enumerate() {
            params.out[a] = taps.out_shape[a] as i64;
            params.coord_base[a] = first.len() as i32;
            for coordinate in axis {
                first.push(offsets.len() as i32);
                match coordinate {
                    Some(list) => {
                        count.push(list.len() as i32);
                        for &(offset, weight) in list {
                            if offset >= x.len() {
                                return Err(CudaError::Invalid("resize: tap outside X".into()));
                            }
                            offsets.push(offset as i64);
                            weights.push(weight);
                        }
                    }
                    None => count.push(-1),
                }
            }
        }
        let first: Vec<u8> = first.iter().flat_map(|v| v.to_le_bytes()).collect();
        let count: Vec<u8> = count.iter().flat_map(|v| v.to_le_bytes()).collect();
        let weights: Vec<u8> = weights.iter().flat_map(|v| v.to_le_bytes()).collect();
        let offsets: Vec<u8> = offsets.iter().flat_map(|v| v.to_le_bytes()).collect();
        let [first, count, weights, offsets] =
            [first, count, weights, offsets].map(|t| self.table(&t));
        let (first, count, weights, offsets) = (first?, count?, weights?, offsets?);
        let f = self.function("sb_resize")?;
        let total_i = total as i64;
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(x.slice())
            .arg(y.slice_mut())
            .arg(&total_i)
            .arg(first.slice())
            .arg(count.slice())
            .arg(offsets.slice())
            .arg(weights.slice())
            .arg(&params);
        // SAFETY: every coordinate of every axis has its entry, every tap offset lies in x
        // (checked), y holds `total` outputs.
        unsafe { launch.launch(launch_1d(blocks_for(total), 0))? };
        Ok(y)
    }
}
