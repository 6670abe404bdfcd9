//! Discrete Fourier transforms: DFT (opsets 17 and 20) and STFT (opset 17).
//!
//! Implements contract section `dft`: every output bin is the direct sum over the signal's
//! samples, a `canonical-sum` of `2 * L` terms (real and imaginary parts interleaved) in
//! binary64, each term the exact product of an f32 sample and an f32 twiddle factor from
//! samebits-math's correctly rounded `cos` / `sin` of an angle folded exactly in integers. This is O(L^2) per line on purpose: a fast
//! Fourier transform evaluates a different sum tree, and the contract fixes one order. f16 /
//! bf16 compute in f32 and round once at the store; f64 is refused (there is no correctly
//! rounded binary64 cos / sin in samebits-math). There is no GPU kernel: on a GPU the step runs
//! this CPU op.

use crate::registry::Registry;
use crate::staging::{f32_values, store_f32};
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use rayon::prelude::*;
use samebits_ir::limits::{check_dft_work, check_tensor_size};
use samebits_ir::{DType, Tensor, Value, ValueType};
use samebits_kernels::canonical_fold;
use std::f32::consts::FRAC_PI_2;

pub fn register(r: &mut Registry) {
    r.register("", "DFT", Dft::build);
    r.register("", "STFT", Stft::build);
}

/// The twiddle factors `w(m) = (cos(2πm/L), sin(2πm/L))` for `m = 0 .. L-1` (contract: dft).
///
/// The angle is `t / 4L` of a turn with `t = 4m`, folded exactly in integers onto the first
/// octant: `t > 2L` becomes `4L - t` (conjugate: `s` negated), then `t > L` becomes `2L - t`
/// (`c` negated), then `2t > L` becomes `L - t` (`c` and `s` swapped). Then
/// `φ = (π/2 * t) / L` in f32 (`π/2` is `FRAC_PI_2`, `t` and `L` converted to f32, so
/// `0 <= φ <= π/4`) and `(cos φ, sin φ)` are correctly rounded. The symmetries of the circle
/// are therefore exact in the table: `w(L - m) = conj(w(m))`, and the quarter turns are exact.
struct Twiddles(Vec<(f32, f32)>);

impl Twiddles {
    fn new(len: usize) -> Result<Twiddles> {
        check_tensor_size("DFT twiddle factors", &[len, 2], DType::F32)?;
        let l = len as u64;
        let table = (0..l)
            .map(|m| {
                let mut t = 4 * m;
                let conjugate = t > 2 * l;
                if conjugate {
                    t = 4 * l - t;
                }
                let negate_cos = t > l;
                if negate_cos {
                    t = 2 * l - t;
                }
                let swap = 2 * t > l;
                if swap {
                    t = l - t;
                }
                let phi = (FRAC_PI_2 * t as f32) / len as f32;
                let (mut c, mut s) = (samebits_math::cos(phi), samebits_math::sin(phi));
                if swap {
                    (c, s) = (s, c);
                }
                if negate_cos {
                    c = -c;
                }
                if conjugate {
                    s = -s;
                }
                (c, s)
            })
            .collect();
        Ok(Twiddles(table))
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    /// The factor of sample `n` in bin `k`: `w(+k n mod L)` for the inverse transform,
    /// `w(-k n mod L)` for the forward one (the index product reduced exactly in integers).
    fn at(&self, k: usize, n: usize, inverse: bool) -> (f32, f32) {
        let l = self.len() as u64;
        let m = ((k as u64 % l) * (n as u64 % l)) % l;
        let m = if inverse || m == 0 { m } else { l - m };
        self.0[m as usize]
    }
}

/// Bin `k` of the transform of the complex line `x` (length `L`, the twiddles' length), in
/// binary64 (contract: dft): the real part is the canonical sum of the `2L` interleaved terms
/// `xr[0] * c_0, -(xi[0] * s_0), xr[1] * c_1, ...`, the imaginary part that of
/// `xr[0] * s_0, xi[0] * c_0, ...`; each product of two f32 values is exact in binary64, each
/// addition rounded to binary64. `real_only` skips the imaginary part.
fn bin(x: &[(f32, f32)], k: usize, inverse: bool, tw: &Twiddles, real_only: bool) -> (f64, f64) {
    let term = |j: usize, imaginary: bool| -> f64 {
        let n = j / 2;
        let (c, s) = tw.at(k, n, inverse);
        let (xr, xi) = (f64::from(x[n].0), f64::from(x[n].1));
        match (imaginary, j % 2) {
            (false, 0) => xr * f64::from(c),
            (false, _) => -(xi * f64::from(s)),
            (true, 0) => xr * f64::from(s),
            (true, _) => xi * f64::from(c),
        }
    };
    let sum = |imaginary: bool| {
        canonical_fold(
            2 * x.len(),
            0.0f64,
            |p, j| p + term(j, imaginary),
            |a, b| a + b,
        )
    };
    match real_only {
        true => (sum(false), 0.0),
        false => (sum(false), sum(true)),
    }
}

/// What one line's transform takes and gives.
#[derive(Clone, Copy, Debug)]
struct Transform {
    /// The transform length `L` (`dft_length`, or its default).
    len: usize,
    inverse: bool,
    /// Forward: keep bins `0 ..= L/2`. Inverse: the input holds bins `0 ..= L/2` of a Hermitian
    /// spectrum and the output is the real signal.
    onesided: bool,
}

impl Transform {
    /// Output bins (or samples) per line.
    fn out_len(&self) -> usize {
        match self.onesided && !self.inverse {
            true => self.len / 2 + 1,
            false => self.len,
        }
    }

    /// Components of each output element: 1 for a one-sided inverse (real), else 2.
    fn out_components(&self) -> usize {
        match self.onesided && self.inverse {
            true => 1,
            false => 2,
        }
    }

    /// The complex line of length `L` the sum runs over, from the `n_in` input samples given
    /// by `sample`: zero-padded or truncated; for a one-sided inverse the Hermitian extension
    /// `Y[k] = X[k]` for `k <= L/2`, `Y[k] = conj(X[L - k])` above (missing bins are zero).
    fn line(&self, n_in: usize, sample: impl Fn(usize) -> (f32, f32), line: &mut Vec<(f32, f32)>) {
        line.clear();
        let get = |i: usize| if i < n_in { sample(i) } else { (0.0, 0.0) };
        for k in 0..self.len {
            line.push(match self.onesided && self.inverse && k > self.len / 2 {
                true => {
                    let (r, i) = get(self.len - k);
                    (r, -i)
                }
                false => get(k),
            });
        }
    }

    /// Writes the `out_len() * out_components()` values of the transform of `line`.
    fn run(&self, line: &[(f32, f32)], tw: &Twiddles, out: &mut [f32]) {
        let parts = self.out_components();
        let scale = self.len as f64;
        for (k, dst) in out.chunks_mut(parts).enumerate() {
            let (mut re, mut im) = bin(line, k, self.inverse, tw, parts == 1);
            if self.inverse {
                (re, im) = (re / scale, im / scale);
            }
            dst[0] = re as f32;
            if parts == 2 {
                dst[1] = im as f32;
            }
        }
    }
}

/// Reads a scalar integer input (`dft_length`, `axis`, `frame_step`, `frame_length`).
fn scalar_int(inputs: &Inputs, i: usize, name: &str) -> Result<Option<i64>> {
    match inputs.opt_ints(i, name)? {
        None => Ok(None),
        Some(v) if v.len() == 1 => Ok(Some(v[0])),
        Some(v) => bail!(
            "input {i} ({name}) must be one integer, got {} values",
            v.len()
        ),
    }
}

/// The signal's values as f32 and its components per element (1 real, 2 complex).
fn signal_values<'a>(x: &'a Tensor, op: &str) -> Result<(std::borrow::Cow<'a, [f32]>, usize)> {
    if x.dtype() == DType::F64 {
        unsupported!("{op} of f64 input (f32, f16 and bf16 are supported)");
    }
    let components = match x.shape().last() {
        Some(&c @ (1 | 2)) => c,
        _ => bail!(
            "{op}: input 0 must end in an axis of 1 (real) or 2 (complex) components, got shape \
             {:?}",
            x.shape()
        ),
    };
    Ok((f32_values(x, &format!("{op} input 0"))?, components))
}

#[derive(Debug)]
struct Dft {
    /// Opset 17 to 19: the `axis` attribute (else the `axis` input, default -2).
    axis_attribute: Option<i64>,
    inverse: bool,
    onesided: bool,
}

impl Dft {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let axis_attribute = match ctx.opset < 20 {
            true => Some(args.int_or("axis", 1)?),
            false => None,
        };
        Ok(Box::new(Dft {
            axis_attribute,
            inverse: args.int_or("inverse", 0)? != 0,
            onesided: args.int_or("onesided", 0)? != 0,
        }))
    }
}

impl Op for Dft {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(super::output_of(super::input_dtype(inputs, 0)))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let (values, components) = signal_values(x, "DFT")?;
        let shape = x.shape();
        let rank = shape.len() as i64;
        let axis = match self.axis_attribute {
            Some(a) => a,
            None => scalar_int(inputs, 2, "axis")?.unwrap_or(-2),
        };
        let normalized = if axis < 0 { axis + rank } else { axis };
        if rank < 2 || normalized < 0 || normalized > rank - 2 {
            bail!(
                "DFT: axis {axis} is outside [-{rank}, -2] and [0, {}] for input of shape \
                 {shape:?} (the last axis holds the components)",
                rank - 2
            );
        }
        let axis = normalized as usize;
        let n_in = shape[axis];
        let len = match scalar_int(inputs, 1, "dft_length")? {
            Some(l) if l >= 1 => l as usize,
            Some(l) => bail!("DFT: input 1 (dft_length) must be at least 1, got {l}"),
            None if self.onesided && self.inverse => 2 * n_in.saturating_sub(1),
            None => n_in,
        };
        if len == 0 {
            bail!("DFT: transform length 0 (input axis {axis} of shape {shape:?})");
        }
        let transform = Transform {
            len,
            inverse: self.inverse,
            onesided: self.onesided,
        };
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..shape.len() - 1].iter().product();
        let mut out_shape = shape.to_vec();
        out_shape[axis] = transform.out_len();
        out_shape[shape.len() - 1] = transform.out_components();
        check_tensor_size("DFT output", &out_shape, DType::F32)?;
        check_tensor_size("DFT line", &[len, 2], DType::F32)?;
        check_dft_work("DFT", outer * inner, len, transform.out_len())?;
        let tw = Twiddles::new(len)?;
        let line_out = transform.out_len() * transform.out_components();
        // One line (outer index o, inner index i) per task; lines are written in (o, i) order.
        let lines: Vec<Vec<f32>> = (0..outer * inner)
            .into_par_iter()
            .map(|li| {
                let (o, i) = (li / inner.max(1), li % inner.max(1));
                let sample = |n: usize| {
                    let at = ((o * n_in + n) * inner + i) * components;
                    match components {
                        2 => (values[at], values[at + 1]),
                        _ => (values[at], 0.0),
                    }
                };
                let mut line = Vec::with_capacity(len);
                transform.line(n_in, sample, &mut line);
                let mut out = vec![0.0f32; line_out];
                transform.run(&line, &tw, &mut out);
                out
            })
            .collect();
        let parts = transform.out_components();
        let out_len = transform.out_len();
        let mut out = vec![0.0f32; out_shape.iter().product()];
        for (li, line) in lines.iter().enumerate() {
            let (o, i) = (li / inner.max(1), li % inner.max(1));
            for k in 0..out_len {
                let at = ((o * out_len + k) * inner + i) * parts;
                out[at..at + parts].copy_from_slice(&line[k * parts..][..parts]);
            }
        }
        Ok(vec![store_f32(x.dtype(), out_shape, out)?.into()])
    }
}

#[derive(Debug)]
struct Stft {
    onesided: bool,
}

impl Stft {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(Stft {
            onesided: args.int_or("onesided", 1)? != 0,
        }))
    }
}

impl Op for Stft {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(super::output_of(super::input_dtype(inputs, 0)))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let (values, components) = signal_values(x, "STFT")?;
        let shape = x.shape();
        if shape.len() != 3 {
            bail!("STFT: input 0 (signal) must be [batch, length, 1 or 2], got shape {shape:?}");
        }
        let (batch, length) = (shape[0], shape[1]);
        let step = match scalar_int(inputs, 1, "frame_step")? {
            Some(s) if s >= 1 => s as usize,
            other => bail!("STFT: input 1 (frame_step) must be a positive integer, got {other:?}"),
        };
        let window = match inputs.opt_tensor(2)? {
            Some(w) if w.shape().len() == 1 => Some(f32_values(w, "STFT input 2 (window)")?),
            Some(w) => bail!(
                "STFT: input 2 (window) must be 1-D, got shape {:?}",
                w.shape()
            ),
            None => None,
        };
        let frame = match (scalar_int(inputs, 3, "frame_length")?, &window) {
            (Some(f), Some(w)) if f >= 1 && f as usize != w.len() => bail!(
                "STFT: input 3 (frame_length) {f} differs from the window's length {}",
                w.len()
            ),
            (Some(f), _) if f >= 1 => f as usize,
            (Some(f), _) => bail!("STFT: input 3 (frame_length) must be at least 1, got {f}"),
            (None, Some(w)) if !w.is_empty() => w.len(),
            (None, _) => bail!("STFT: needs input 2 (window) or input 3 (frame_length)"),
        };
        if frame > length {
            bail!("STFT: frame_length {frame} is longer than the signal ({length} samples)");
        }
        if self.onesided && components == 2 {
            bail!("STFT: onesided = 1 needs a real signal, got a complex one (shape {shape:?})");
        }
        let frames = (length - frame) / step + 1;
        let transform = Transform {
            len: frame,
            inverse: false,
            onesided: self.onesided,
        };
        let bins = transform.out_len();
        let out_shape = vec![batch, frames, bins, 2];
        check_tensor_size("STFT output", &out_shape, DType::F32)?;
        check_dft_work("STFT", batch * frames, frame, bins)?;
        let tw = Twiddles::new(frame)?;
        let mut out = vec![0.0f32; out_shape.iter().product()];
        // One frame per task: (b, f) in row-major order, each frame's bins contiguous.
        out.par_chunks_mut(bins * 2)
            .enumerate()
            .for_each(|(bf, dst)| {
                let (b, f) = (bf / frames, bf % frames);
                let sample = |n: usize| {
                    let at = (b * length + f * step + n) * components;
                    let (re, im) = match components {
                        2 => (values[at], values[at + 1]),
                        _ => (values[at], 0.0),
                    };
                    match &window {
                        Some(w) => (re * w[n], im * w[n]),
                        None => (re, im),
                    }
                };
                let mut line = Vec::with_capacity(frame);
                transform.line(frame, sample, &mut line);
                transform.run(&line, &tw, dst);
            });
        Ok(vec![store_f32(x.dtype(), out_shape, out)?.into()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarter_turns_are_exact() {
        let tw = Twiddles::new(8).unwrap();
        assert_eq!(tw.0[0], (1.0, 0.0));
        assert_eq!(tw.0[2], (0.0, 1.0));
        assert_eq!(tw.0[4], (-1.0, 0.0));
        assert_eq!(tw.0[6], (0.0, -1.0));
        // The table is exactly conjugate-symmetric, and w(1) and w(3) mirror each other.
        for len in [7usize, 10, 16, 97] {
            let tw = Twiddles::new(len).unwrap();
            for m in 1..len {
                let (c, s) = tw.0[len - m];
                assert_eq!(tw.0[m], (c, -s), "length {len}, m {m}");
            }
        }
        assert_eq!((tw.0[1].0, tw.0[1].1), (-tw.0[3].0, tw.0[3].1));
        // Forward bin 1, sample 2 of length 8: w(-2) = w(6).
        assert_eq!(tw.at(1, 2, false), (0.0, -1.0));
        assert_eq!(tw.at(1, 2, true), (0.0, 1.0));
    }

    #[test]
    fn an_impulse_transforms_to_ones() {
        let tw = Twiddles::new(5).unwrap();
        let x = [(1.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)];
        for k in 0..5 {
            assert_eq!(bin(&x, k, false, &tw, false), (1.0, 0.0));
        }
    }
}
