//! Convolution and transposed convolution on device buffers (contract sections `conv` and
//! `conv-transpose`), from the geometries samebits-ops resolves for the CPU kernels.
//!
//! Every path computes each output's canonical dot product over (input channel within the
//! group, kernel taps row-major) with padded taps as `fma(0, w, p)`, then `+ bias`, so they all
//! give the bits of `samebits_kernels::conv_f32` / `conv_transpose_f32`:
//! - groups of at most 4 input channels (depthwise above all): `sb_conv_direct`, one thread
//!   per output (kernels/conv.cu);
//! - 1x1 convolutions with unit stride and no padding: the reproducible GEMM of the filters
//!   with the input planes, read in place;
//! - otherwise: the im2col matrix of each image (`sb_im2col`, padded taps written as 0.0) and
//!   the reproducible GEMM over it (K = the reduction length, never padded);
//! - transposed convolution: `sb_conv_transpose_direct`, one thread per output (gather form).
//!
//! With [`Kernels::Fast`] (the default operation set) the GEMMs run on cuBLAS when it loads
//! (`fast.rs`): no promise about bits.

use cudarc::driver::PushKernelArg;
use samebits_kernels::{ConvGeometry, ConvTransposeGeometry, Taps};

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::device_abi::device_struct;
use crate::error::{CudaError, Result};
use crate::fast::Kernels;
use crate::gemm::{DeviceMat, GemmEpilogue, GemmShape};

/// Most input channels per group of the direct kernel (samebits-kernels' direct path uses the
/// same bound; the bits do not depend on it).
const DIRECT_MAX_GROUP_CHANNELS: usize = 4;

device_struct! {
    /// A convolution's geometry (kernels/conv.cu): spatial sizes widened to 3 axes.
    pub(crate) struct SbConv {
        input: [i32; 3],
        output: [i32; 3],
        kernel: [i32; 3],
        strides: [i32; 3],
        dilations: [i32; 3],
        /// pads at the beginning of each axis
        pads: [i32; 3],
        groups: i32,
        /// input channels per group
        cg: i32,
        /// output channels per group
        mg: i32,
    }
}

/// The widened vectors of `taps` ([`Taps`], the kernels' one definition of the widening) as
/// the device's i32, in the order kernels/conv.cu and kernels/pool.cu declare them: input,
/// output, kernel, strides, dilations, pads at the beginning.
pub(crate) fn device_taps(taps: &Taps) -> Result<[[i32; 3]; 6]> {
    Ok([
        device_axes(taps.input)?,
        device_axes(taps.output)?,
        device_axes(taps.kernel)?,
        device_axes(taps.strides)?,
        device_axes(taps.dilations)?,
        device_axes(taps.pads_begin)?,
    ])
}

/// A widened spatial vector as the device's i32.
pub(crate) fn device_axes(v: [usize; 3]) -> Result<[i32; 3]> {
    let mut out = [0i32; 3];
    for (o, x) in out.iter_mut().zip(v) {
        *o = small(x)?;
    }
    Ok(out)
}

/// Errors unless a geometry has 1 to 3 spatial axes (before [`Taps`] widens it).
pub(crate) fn check_spatial_axes(axes: usize) -> Result<()> {
    if (1..=3).contains(&axes) {
        Ok(())
    } else {
        Err(CudaError::Invalid(format!(
            "1 to 3 spatial axes, got {axes}"
        )))
    }
}

fn small(x: usize) -> Result<i32> {
    i32::try_from(x).map_err(|_| CudaError::Invalid(format!("size {x} too large")))
}

impl SbConv {
    /// The device geometry of `taps` with `groups` groups of `cg` input and `mg` output
    /// channels.
    fn new(taps: Taps, groups: usize, cg: usize, mg: usize) -> Result<SbConv> {
        let [input, output, kernel, strides, dilations, pads] = device_taps(&taps)?;
        Ok(SbConv {
            input,
            output,
            kernel,
            strides,
            dilations,
            pads,
            groups: small(groups)?,
            cg: small(cg)?,
            mg: small(mg)?,
        })
    }
}

/// Errors unless `buffer` holds `len` elements.
fn check_len(buffer: &DeviceBuffer, len: usize, what: &str) -> Result<()> {
    if buffer.len() != len {
        return Err(CudaError::Invalid(format!(
            "{what}: {} elements, expected {len}",
            buffer.len()
        )));
    }
    Ok(())
}

impl CudaBackend {
    /// Convolution `[N, C, in...] * [M, C/g, k...] (+ bias [M])` of contract section `conv`.
    pub fn conv(
        &self,
        geometry: &ConvGeometry,
        x: &DeviceBuffer,
        w: &DeviceBuffer,
        bias: Option<&DeviceBuffer>,
        kernels: Kernels,
    ) -> Result<DeviceBuffer> {
        let (x_len, w_len, y_len) = geometry.sizes();
        check_len(x, x_len, "conv input")?;
        check_len(w, w_len, "conv weight")?;
        if let Some(b) = bias {
            check_len(b, geometry.out_channels, "conv bias")?;
        }
        let out_spatial = geometry.out_spatial();
        let groups = geometry.groups;
        let (cg, mg) = (
            geometry.in_channels / groups,
            geometry.out_channels / groups,
        );
        check_spatial_axes(geometry.in_spatial.len())?;
        let g = SbConv::new(geometry.taps(), groups, cg, mg)?;
        let mut y = self.alloc(y_len)?;
        if y_len == 0 {
            return Ok(y);
        }
        if cg <= DIRECT_MAX_GROUP_CHANNELS {
            self.conv_direct("sb_conv_direct", g, x, w, bias, &mut y)?;
            return Ok(y);
        }
        let (in_len, out_len) = (
            geometry.in_spatial.iter().product::<usize>(),
            out_spatial.iter().product::<usize>(),
        );
        let klen = geometry.kernel.iter().product::<usize>();
        let reduction = cg * klen;
        let pointwise = klen == 1
            && geometry.strides.iter().all(|&s| s == 1)
            && geometry
                .pads_begin
                .iter()
                .chain(&geometry.pads_end)
                .all(|&p| p == 0);
        // Per image: batch = groups, A = the filters [g][mg, reduction], B = the input planes
        // (pointwise) or the im2col matrix [g][reduction, out_len], C = the image's output.
        let shape = GemmShape {
            batch: groups,
            m: mg,
            n: out_len,
            k: reduction,
        };
        let filters = DeviceMat {
            buffer: w,
            offset: 0,
            batch_stride: mg * reduction,
            row_stride: reduction,
            col_stride: 1,
        };
        let epilogue = match bias {
            Some(b) => GemmEpilogue::Add(DeviceMat {
                buffer: b,
                offset: 0,
                batch_stride: mg,
                row_stride: 1,
                col_stride: 0,
            }),
            None => GemmEpilogue::None,
        };
        let image_out = geometry.out_channels * out_len;
        let mut columns = None;
        for n in 0..geometry.batch {
            let b = if pointwise {
                DeviceMat {
                    buffer: x,
                    offset: n * geometry.in_channels * in_len,
                    batch_stride: cg * in_len,
                    row_stride: in_len,
                    col_stride: 1,
                }
            } else {
                let cols = match &mut columns {
                    Some(c) => c,
                    None => columns.insert(self.alloc(groups * reduction * out_len)?),
                };
                let blocks = blocks_for(cols.len());
                let total = cols.len() as i64;
                let x_offset = (n * geometry.in_channels * in_len) as i64;
                let f = self.function("sb_im2col")?;
                let mut launch = self.stream().launch_builder(&f);
                launch
                    .arg(x.slice())
                    .arg(&x_offset)
                    .arg(cols.slice_mut())
                    .arg(&total)
                    .arg(&g);
                // SAFETY: the kernel reads image n of x (checked length) and writes `total`
                // elements of cols.
                unsafe { launch.launch(launch_1d(blocks, 0))? };
                DeviceMat::row_major(cols, reduction, out_len)
            };
            let image = self.gemm_with(shape, filters, b, epilogue, kernels)?;
            if geometry.batch == 1 {
                return Ok(image);
            }
            let mut dst = y.slice_mut().slice_mut(n * image_out..(n + 1) * image_out);
            self.stream()
                .memcpy_dtod(&image.slice().slice(..image_out), &mut dst)?;
        }
        Ok(y)
    }

    /// Transposed convolution `[N, C, in...]`, weight `[C, M/g, k...]` (+ bias [M]) of
    /// contract section `conv-transpose`.
    pub fn conv_transpose(
        &self,
        geometry: &ConvTransposeGeometry,
        x: &DeviceBuffer,
        w: &DeviceBuffer,
        bias: Option<&DeviceBuffer>,
    ) -> Result<DeviceBuffer> {
        let (x_len, w_len, y_len) = geometry.sizes();
        check_len(x, x_len, "conv_transpose input")?;
        check_len(w, w_len, "conv_transpose weight")?;
        if let Some(b) = bias {
            check_len(b, geometry.out_channels, "conv_transpose bias")?;
        }
        let groups = geometry.groups;
        check_spatial_axes(geometry.in_spatial.len())?;
        let g = SbConv::new(
            geometry.taps(),
            groups,
            geometry.in_channels / groups,
            geometry.out_channels / groups,
        )?;
        let mut y = self.alloc(y_len)?;
        if y_len > 0 {
            self.conv_direct("sb_conv_transpose_direct", g, x, w, bias, &mut y)?;
        }
        Ok(y)
    }

    /// One of the one-thread-per-output kernels over all of `y`.
    fn conv_direct(
        &self,
        kernel: &str,
        g: SbConv,
        x: &DeviceBuffer,
        w: &DeviceBuffer,
        bias: Option<&DeviceBuffer>,
        y: &mut DeviceBuffer,
    ) -> Result<()> {
        let f = self.function(kernel)?;
        let blocks = blocks_for(y.len());
        let total = y.len() as i64;
        let has_bias = i32::from(bias.is_some());
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(x.slice())
            .arg(w.slice())
            .arg(bias.unwrap_or(w).slice())
            .arg(&has_bias)
            .arg(y.slice_mut())
            .arg(&total)
            .arg(&g);
        // SAFETY: the geometry's sizes were checked against every buffer; the bias is read only
        // when present.
        unsafe { launch.launch(launch_1d(blocks, 0))? };
        Ok(())
    }
}
