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
//! - transposed convolution: with at most 4 input channels per group
//!   `sb_conv_transpose_direct`, one thread per output (gather form); otherwise the gather
//!   form's column matrix (`sb_im2col_transposed`, each input scattered to the one output
//!   of each tap it reaches in a zeroed matrix: each (channel, tap) row holds the input term
//!   of every output, 0.0 where no input reaches it) and the same GEMM, against the filters
//!   rearranged to `[groups][mg][cg * klen]` (`sb_conv_transpose_filters`).
//!
//! With [`Kernels::Fast`] (the default operation set) the GEMMs run on cuBLAS when it loads
//! (`fast.rs`): no promise about bits.

use cudarc::driver::{LaunchConfig, PushKernelArg};
use samebits_kernels::{ConvGeometry, ConvTransposeGeometry, Taps};

use crate::backend::{BLOCK, CudaBackend, blocks_for, launch_1d};
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

/// The sizes of a convolution's GEMM form: images, input and output plane lengths, groups,
/// input and output channels per group, kernel taps.
#[derive(Clone, Copy)]
struct ConvGemm {
    batch: usize,
    in_len: usize,
    out_len: usize,
    groups: usize,
    cg: usize,
    mg: usize,
    klen: usize,
}

/// Which column matrix `sb_im2col` builds: a convolution's, or the gather form's of a
/// transposed convolution.
#[derive(Clone, Copy, PartialEq)]
enum Columns {
    Convolution,
    Transposed,
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
        // Empty outputs take the direct path too (it launches nothing).
        if y_len == 0 || cg <= DIRECT_MAX_GROUP_CHANNELS {
            return self.conv_direct("sb_conv_direct", g, x, w, bias, y_len);
        }
        let klen = geometry.kernel.iter().product::<usize>();
        let pointwise = klen == 1
            && geometry.strides.iter().all(|&s| s == 1)
            && geometry
                .pads_begin
                .iter()
                .chain(&geometry.pads_end)
                .all(|&p| p == 0);
        let form = ConvGemm {
            batch: geometry.batch,
            in_len: geometry.in_spatial.iter().product(),
            out_len: out_spatial.iter().product(),
            groups,
            cg,
            mg,
            klen,
        };
        let columns = (!pointwise).then_some(Columns::Convolution);
        self.conv_by_gemm(form, g, columns, x, w, bias, kernels)
    }

    /// The GEMM form of a convolution (`columns`: which column matrix `sb_im2col` builds;
    /// `None`: a pointwise convolution reading the input planes in place): per image, batch = groups,
    /// A = `filters [groups][mg, cg * klen]`, B = the image's column matrix
    /// `[groups][cg * klen, out_len]`, C = the image's output, plus the bias.
    #[allow(clippy::too_many_arguments)]
    fn conv_by_gemm(
        &self,
        form: ConvGemm,
        g: SbConv,
        columns: Option<Columns>,
        x: &DeviceBuffer,
        filters: &DeviceBuffer,
        bias: Option<&DeviceBuffer>,
        kernels: Kernels,
    ) -> Result<DeviceBuffer> {
        let ConvGemm {
            batch,
            in_len,
            out_len,
            groups,
            cg,
            mg,
            klen,
        } = form;
        let reduction = cg * klen;
        let shape = GemmShape {
            batch: groups,
            m: mg,
            n: out_len,
            k: reduction,
        };
        let filters = DeviceMat {
            buffer: filters,
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
        let image_out = groups * mg * out_len;
        // A single image's GEMM output is the output; several are copied into one.
        let mut y = match batch {
            1 => None,
            _ => Some(self.alloc(batch * image_out)?),
        };
        let mut cols = None;
        for n in 0..batch {
            let x_offset = n * groups * cg * in_len;
            let b = match columns {
                None => DeviceMat {
                    buffer: x,
                    offset: x_offset,
                    batch_stride: cg * in_len,
                    row_stride: in_len,
                    col_stride: 1,
                },
                Some(kind) => {
                    let cols = match &mut cols {
                        Some(c) => c,
                        None => cols.insert(self.alloc(groups * reduction * out_len)?),
                    };
                    let rows = small(groups * reduction)?;
                    let (in_len_i, out_len_i) = (small(in_len)?, small(out_len)?);
                    // A convolution's threads walk the outputs of a row; a transposed one's
                    // walk the inputs, scattered into a zeroed matrix.
                    let (name, walked) = match kind {
                        Columns::Convolution => ("sb_im2col", out_len),
                        Columns::Transposed => {
                            self.stream().memset_zeros(cols.slice_mut())?;
                            ("sb_im2col_transposed", in_len)
                        }
                    };
                    let config = LaunchConfig {
                        grid_dim: (blocks_for(walked).min(1024), rows.min(65_535) as u32, 1),
                        block_dim: (BLOCK, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    let x_offset = x_offset as i64;
                    let f = self.function(name)?;
                    let mut launch = self.stream().launch_builder(&f);
                    launch
                        .arg(x.slice())
                        .arg(&x_offset)
                        .arg(cols.slice_mut())
                        .arg(&rows);
                    if kind == Columns::Transposed {
                        launch.arg(&in_len_i);
                    }
                    launch.arg(&out_len_i).arg(&g);
                    // SAFETY: the kernel reads image n of x (checked length) and writes
                    // elements of the `rows * out_len` of cols.
                    unsafe { launch.launch(config)? };
                    DeviceMat::row_major(cols, reduction, out_len)
                }
            };
            let image = self.gemm_with(shape, filters, b, epilogue, kernels)?;
            let Some(y) = y.as_mut() else {
                return Ok(image);
            };
            let mut dst = y.slice_mut().slice_mut(n * image_out..(n + 1) * image_out);
            self.stream()
                .memcpy_dtod(&image.slice().slice(..image_out), &mut dst)?;
        }
        y.ok_or_else(|| CudaError::Invalid("a convolution of no image".into()))
    }

    /// Transposed convolution `[N, C, in...]`, weight `[C, M/g, k...]` (+ bias [M]) of
    /// contract section `conv-transpose`.
    pub fn conv_transpose(
        &self,
        geometry: &ConvTransposeGeometry,
        x: &DeviceBuffer,
        w: &DeviceBuffer,
        bias: Option<&DeviceBuffer>,
        kernels: Kernels,
    ) -> Result<DeviceBuffer> {
        let (x_len, w_len, y_len) = geometry.sizes();
        check_len(x, x_len, "conv_transpose input")?;
        check_len(w, w_len, "conv_transpose weight")?;
        if let Some(b) = bias {
            check_len(b, geometry.out_channels, "conv_transpose bias")?;
        }
        let groups = geometry.groups;
        check_spatial_axes(geometry.in_spatial.len())?;
        let (cg, mg) = (
            geometry.in_channels / groups,
            geometry.out_channels / groups,
        );
        let g = SbConv::new(geometry.taps(), groups, cg, mg)?;
        // Empty outputs take the direct path too (it launches nothing).
        if y_len == 0 || cg <= DIRECT_MAX_GROUP_CHANNELS {
            return self.conv_direct("sb_conv_transpose_direct", g, x, w, bias, y_len);
        }
        let klen = geometry.kernel.iter().product::<usize>();
        // The filters as the GEMM's A, [groups][mg][cg * klen] (the weight is [groups * cg,
        // mg, klen]), rearranged on the device.
        let mut filters = self.alloc(w_len)?;
        let f = self.function("sb_conv_transpose_filters")?;
        let total = w_len as i64;
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(w.slice())
            .arg(filters.slice_mut())
            .arg(&total)
            .arg(&g);
        // SAFETY: reads and writes the weight's checked `w_len` elements.
        unsafe { launch.launch(launch_1d(blocks_for(w_len), 0))? };
        let form = ConvGemm {
            batch: geometry.batch,
            in_len: geometry.in_spatial.iter().product(),
            out_len: geometry.out_spatial().iter().product(),
            groups,
            cg,
            mg,
            klen,
        };
        let columns = Some(Columns::Transposed);
        self.conv_by_gemm(form, g, columns, x, &filters, bias, kernels)
    }

    /// The output of `y_len` values by one of the one-thread-per-output kernels.
    fn conv_direct(
        &self,
        kernel: &str,
        g: SbConv,
        x: &DeviceBuffer,
        w: &DeviceBuffer,
        bias: Option<&DeviceBuffer>,
        y_len: usize,
    ) -> Result<DeviceBuffer> {
        let mut y = self.alloc(y_len)?;
        if y_len == 0 {
            return Ok(y);
        }
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
        Ok(y)
    }
}
