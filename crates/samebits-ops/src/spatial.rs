//! Attributes shared by the spatial ops (Conv, ConvTranspose, the pools): `auto_pad`, `pads`,
//! `strides`, `dilations` and `kernel_shape`, parsed once and resolved against input sizes.

use samebits_ir::limits::max_window_attribute;

use crate::{NodeArgs, Result, bail};

/// ONNX `auto_pad`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

/// The spatial attributes of one node, checked for sign.
#[derive(Clone, Debug)]
pub struct SpatialAttrs {
    pub op: &'static str,
    pub auto_pad: AutoPad,
    pub kernel_shape: Option<Vec<usize>>,
    strides: Option<Vec<usize>>,
    dilations: Option<Vec<usize>>,
    /// Explicit pads: every axis' begin, then every axis' end.
    pads: Option<Vec<usize>>,
}

/// Reads an ints attribute whose entries must be at least `min` and at most
/// [`max_window_attribute`] (so that window arithmetic cannot overflow).
fn usizes(op: &str, args: &NodeArgs, name: &str, min: i64) -> Result<Option<Vec<usize>>> {
    let Some(values) = args.ints(name)? else {
        return Ok(None);
    };
    if let Some(bad) = values.iter().find(|&&v| v < min) {
        bail!("{op}: attribute \"{name}\" must hold values >= {min}, got {bad} in {values:?}");
    }
    let max = max_window_attribute();
    if let Some(bad) = values.iter().find(|&&v| v as u64 > max) {
        bail!(
            "{op}: attribute \"{name}\" holds {bad}, more than {max} (the limit \
             SAMEBITS_MAX_WINDOW_ATTRIBUTE sets)"
        );
    }
    Ok(Some(values.iter().map(|&v| v as usize).collect()))
}

impl SpatialAttrs {
    pub fn parse(op: &'static str, args: &NodeArgs) -> Result<SpatialAttrs> {
        let auto_pad = match args.string_or("auto_pad", "NOTSET".into())?.as_str() {
            "NOTSET" | "" => AutoPad::NotSet,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            "VALID" => AutoPad::Valid,
            other => bail!(
                "{op}: attribute \"auto_pad\" must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, \
                 got {other:?}"
            ),
        };
        Ok(SpatialAttrs {
            op,
            auto_pad,
            kernel_shape: usizes(op, args, "kernel_shape", 1)?,
            strides: usizes(op, args, "strides", 1)?,
            dilations: usizes(op, args, "dilations", 1)?,
            pads: usizes(op, args, "pads", 0)?,
        })
    }

    fn per_axis(&self, name: &str, value: &Option<Vec<usize>>, dims: usize) -> Result<Vec<usize>> {
        match value {
            None => Ok(vec![1; dims]),
            Some(v) if v.len() == dims => Ok(v.clone()),
            Some(v) => bail!(
                "{}: attribute \"{name}\" needs {dims} values (one per spatial axis), got {v:?}",
                self.op
            ),
        }
    }

    pub fn strides(&self, dims: usize) -> Result<Vec<usize>> {
        self.per_axis("strides", &self.strides, dims)
    }

    pub fn dilations(&self, dims: usize) -> Result<Vec<usize>> {
        self.per_axis("dilations", &self.dilations, dims)
    }

    /// The explicit `pads` as (begin, end) per axis; zeros when absent.
    pub fn explicit_pads(&self, dims: usize) -> Result<(Vec<usize>, Vec<usize>)> {
        match &self.pads {
            None => Ok((vec![0; dims], vec![0; dims])),
            Some(p) if p.len() == 2 * dims => Ok((p[..dims].to_vec(), p[dims..].to_vec())),
            Some(p) => bail!(
                "{}: attribute \"pads\" needs {} values (begin and end per spatial axis), got \
                 {p:?}",
                self.op,
                2 * dims
            ),
        }
    }

    /// (begin, end) pads of a forward window op (conv, pool): explicit pads, none for `VALID`,
    /// or for `SAME_*` the total `max(0, (ceil(in / s) - 1) * s + dil * (k - 1) + 1 - in)` split
    /// with the odd element at the end (upper) or the beginning (lower).
    pub fn window_pads(
        &self,
        input: &[usize],
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let dims = input.len();
        match self.auto_pad {
            AutoPad::NotSet => self.explicit_pads(dims),
            AutoPad::Valid => Ok((vec![0; dims], vec![0; dims])),
            AutoPad::SameUpper | AutoPad::SameLower => {
                let (mut begin, mut end) = (vec![0; dims], vec![0; dims]);
                for d in 0..dims {
                    let out = input[d].div_ceil(strides[d]);
                    let extent = dilations[d] * (kernel[d] - 1) + 1;
                    let total = ((out.max(1) - 1) * strides[d] + extent).saturating_sub(input[d]);
                    let small = total / 2;
                    (begin[d], end[d]) = if self.auto_pad == AutoPad::SameUpper {
                        (small, total - small)
                    } else {
                        (total - small, small)
                    };
                }
                Ok((begin, end))
            }
        }
    }

    /// The kernel's spatial shape: `kernel_shape` if given, which must agree with `from_weight`
    /// when that is known.
    pub fn kernel(&self, from_weight: Option<&[usize]>) -> Result<Vec<usize>> {
        match (&self.kernel_shape, from_weight) {
            (Some(k), Some(w)) if k.as_slice() != w => bail!(
                "{}: attribute \"kernel_shape\" {k:?} disagrees with the weight's spatial shape \
                 {w:?}",
                self.op
            ),
            (Some(k), _) => Ok(k.clone()),
            (None, Some(w)) => Ok(w.to_vec()),
            (None, None) => bail!("{}: missing attribute \"kernel_shape\"", self.op),
        }
    }
}

/// Errors unless every window of extent `dil * (k - 1) + 1` fits in the padded input.
pub fn check_windows_fit(
    op: &str,
    input: &[usize],
    kernel: &[usize],
    dilations: &[usize],
    pads: &(Vec<usize>, Vec<usize>),
) -> Result<()> {
    for d in 0..input.len() {
        let padded = input[d]
            .checked_add(pads.0[d])
            .and_then(|p| p.checked_add(pads.1[d]));
        let extent = dilations[d]
            .checked_mul(kernel[d] - 1)
            .and_then(|e| e.checked_add(1));
        let (Some(padded), Some(extent)) = (padded, extent) else {
            bail!("{op}: the padded input or the kernel's extent overflows on spatial axis {d}");
        };
        if padded < extent {
            bail!(
                "{op}: the kernel's extent {extent} exceeds the padded input size {padded} on \
                 spatial axis {d}"
            );
        }
    }
    Ok(())
}
