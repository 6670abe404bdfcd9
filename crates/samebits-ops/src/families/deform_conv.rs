//! DeformConv (opsets 19 and 22): a 2-D convolution whose kernel taps read the input at learned
//! fractional offsets, optionally weighted by a mask.
//!
//! Inputs `X [N, C, H, W]`, `W [M, C/group, kh, kw]`, `offset [N, offset_group * kh * kw * 2,
//! oh, ow]` (per tap a (y, x) pair), optional `B [M]` and `mask [N, offset_group * kh * kw,
//! oh, ow]`; attributes `dilations`, `group`, `kernel_shape`, `offset_group`, `pads`,
//! `strides` as Conv's. docs/contract.md, section `deform-conv`: each tap's input value is
//! GridSample's bilinear sample with zeros padding at `(base + offset)`
//! (`grid_sample::BilinearZeros`), times the mask; each output is Conv's canonical dot of
//! the filter row with those values in the weight's row-major order, then the bias.
//! f16 / bf16 compute in f32 and round once at the store.

use super::grid_sample::BilinearZeros;
use crate::registry::Registry;
use crate::staging::{f32_values, store_f32};
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{Value, ValueType};
use samebits_kernels::canonical_dot;

const OP: &str = "DeformConv";

pub fn register(r: &mut Registry) {
    r.register("", OP, DeformConv::build);
}

#[derive(Debug)]
struct DeformConv {
    dilations: Option<Vec<i64>>,
    group: usize,
    offset_group: usize,
    pads: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
}

impl DeformConv {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let count = |name: &str| -> Result<usize> {
            match args.int_or(name, 1)? {
                n if n >= 1 => Ok(n as usize),
                n => bail!("{OP}: attribute \"{name}\" must be at least 1, got {n}"),
            }
        };
        Ok(Box::new(DeformConv {
            dilations: args.ints("dilations")?,
            group: count("group")?,
            offset_group: count("offset_group")?,
            pads: args.ints("pads")?,
            strides: args.ints("strides")?,
        }))
    }

    /// A per-axis attribute of `len` positive values (`low` the least allowed), or `default`.
    fn axis_values(
        values: &Option<Vec<i64>>,
        name: &str,
        len: usize,
        low: i64,
        default: usize,
    ) -> Result<Vec<usize>> {
        match values {
            None => Ok(vec![default; len]),
            Some(v) if v.len() == len && v.iter().all(|&x| x >= low) => {
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            Some(v) => bail!("{OP}: attribute \"{name}\" must be {len} values >= {low}, got {v:?}"),
        }
    }
}

impl Op for DeformConv {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().cloned().flatten().and_then(|t| t.dtype());
        Ok(vec![dtype.map(|d| ValueType::tensor(d, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (x, w, offset) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        let (&[n, c, h, wd], &[m, cg, kh, kw]) = (x.shape(), w.shape()) else {
            if x.shape().len() != 4 {
                unsupported!(
                    "{OP} over {} spatial axes (2 are supported)",
                    x.shape().len().saturating_sub(2)
                );
            }
            bail!("{OP}: W must be [M, C/group, kh, kw], got {:?}", w.shape());
        };
        let (g, og) = (self.group, self.offset_group);
        if cg * g != c || !m.is_multiple_of(g) || !c.is_multiple_of(og) {
            bail!(
                "{OP}: X {:?} and W {:?} do not fit group {g} and offset_group {og}",
                x.shape(),
                w.shape()
            );
        }
        let dil = Self::axis_values(&self.dilations, "dilations", 2, 1, 1)?;
        let strides = Self::axis_values(&self.strides, "strides", 2, 1, 1)?;
        let pads = Self::axis_values(&self.pads, "pads", 4, 0, 0)?;
        // Checked: attribute values and zero-element tensors' dims can be as large as they like.
        let out_len = |len: usize, a: usize, k: usize| -> Option<usize> {
            let padded = len.checked_add(pads[a])?.checked_add(pads[a + 2])?;
            let extent = dil[a].checked_mul(k.checked_sub(1)?)?.checked_add(1)?;
            (padded >= extent).then(|| (padded - extent) / strides[a] + 1)
        };
        let (Some(oh), Some(ow)) = (out_len(h, 0, kh), out_len(wd, 1, kw)) else {
            bail!(
                "{OP}: the kernel does not fit the padded input {:?}",
                x.shape()
            );
        };
        let taps = kh * kw;
        if offset.shape() != [n, og * taps * 2, oh, ow] {
            bail!(
                "{OP}: offset must be [{n}, {}, {oh}, {ow}], got {:?}",
                og * taps * 2,
                offset.shape()
            );
        }
        let bias = match inputs.opt_tensor(3)? {
            Some(b) if b.shape() == [m] => Some(f32_values(b, "B")?),
            Some(b) => bail!("{OP}: B must be [{m}], got {:?}", b.shape()),
            None => None,
        };
        let mask = match inputs.opt_tensor(4)? {
            Some(k) if k.shape() == [n, og * taps, oh, ow] => Some(f32_values(k, "mask")?),
            Some(k) => bail!(
                "{OP}: mask must be [{n}, {}, {oh}, {ow}], got {:?}",
                og * taps,
                k.shape()
            ),
            None => None,
        };
        check_tensor_size(&format!("{OP} output"), &[n, m, oh, ow], x.dtype())?;
        // Every sampled coordinate below is then an ordinary number.
        let reach = |o: usize, a: usize, k: usize| {
            o.checked_mul(strides[a])?
                .checked_add(k.checked_mul(dil[a])?)
        };
        if reach(oh, 0, kh).is_none() || reach(ow, 1, kw).is_none() {
            bail!("{OP}: strides and dilations too large for the output");
        }
        let (xv, wv, ov) = (
            f32_values(x, "X")?,
            f32_values(w, "W")?,
            f32_values(offset, "offset")?,
        );
        let plane = h * wd;
        let per_offset_group = c / og;
        let per_group = m / g;
        let mut out = vec![0.0f32; n * m * oh * ow];
        let mut terms = vec![0.0f32; cg * taps];
        let mut sampler = BilinearZeros::default();
        // The tap values of an (image, group, output position) serve every output channel of
        // the group.
        for ((ni, group), (i, j)) in (0..n)
            .flat_map(|ni| (0..g).map(move |gi| (ni, gi)))
            .flat_map(|ng| (0..oh).flat_map(move |i| (0..ow).map(move |j| (ng, (i, j)))))
        {
            for ci in 0..cg {
                let channel = group * cg + ci;
                let ogi = channel / per_offset_group;
                let input = &xv[(ni * c + channel) * plane..][..plane];
                for t in 0..taps {
                    let (ky, kx) = (t / kw, t % kw);
                    let tap = (ni * og + ogi) * taps + t;
                    let at = |comp: usize| ((tap * 2 + comp) * oh + i) * ow + j;
                    let base_y = (i * strides[0] + ky * dil[0]) as f32 - pads[0] as f32;
                    let base_x = (j * strides[1] + kx * dil[1]) as f32 - pads[1] as f32;
                    let sample = sampler.at(input, h, wd, base_y + ov[at(0)], base_x + ov[at(1)]);
                    terms[ci * taps + t] = match &mask {
                        Some(mask) => sample * mask[(tap * oh + i) * ow + j],
                        None => sample,
                    };
                }
            }
            for mi in group * per_group..(group + 1) * per_group {
                let acc = canonical_dot(&wv[mi * cg * taps..][..cg * taps], &terms);
                out[((ni * m + mi) * oh + i) * ow + j] = bias.as_ref().map_or(acc, |b| acc + b[mi]);
            }
        }
        Ok(vec![store_f32(x.dtype(), vec![n, m, oh, ow], out)?.into()])
    }
}
