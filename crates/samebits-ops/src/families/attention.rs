//! Attention (opset 23) and RotaryEmbedding (opset 23), evaluated exactly as docs/contract.md
//! section `attention` writes: score dot products as canonical dots over the head dimension, the
//! engine's one softmax ([`softmax_row`]), and the weighted sum of V as a canonical dot over key
//! positions. LLM decode follows the same formula, so prefill and decode give the same bits.
//!
//! Both ops compute f16 and bf16 tensors in f32 and round at the store. f32 inputs are read in
//! place; the KV cache update copies the past keys and values once, into the present output.

use super::numeric::{Real, permute};
use super::softmax::softmax_row;
use crate::broadcast::broadcast_strides;
use crate::registry::Registry;
use crate::{
    BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, OpError, Result, bail, unsupported,
};
use rayon::prelude::*;
use samebits_ir::{DType, Tensor, Value, ValueType};
use samebits_kernels::{Isa, MatRef, gemm_f32, with_isa};
use std::borrow::Cow;

pub fn register(r: &mut Registry) {
    r.register("", "Attention", Attention::build);
    r.register("", "RotaryEmbedding", Rotary::build);
}

/// A `[batch, heads, seq, head_size]` tensor in f32 (borrowed from an f32 4-D input).
struct Heads<'a> {
    data: Cow<'a, [f32]>,
    batch: usize,
    heads: usize,
    seq: usize,
    size: usize,
}

impl<'a> Heads<'a> {
    /// Input `i` (`name`) as heads: 4-D as is, 3-D `[batch, seq, heads * size]` split into
    /// `heads` (from the attribute `heads_attr`).
    fn read(t: &'a Tensor, i: usize, name: &str, heads_attr: (&str, i64)) -> Result<Heads<'a>> {
        let data = f32::read(t, &format!("input {i} ({name})"))?;
        match *t.shape() {
            [batch, heads, seq, size] => Ok(Heads {
                data,
                batch,
                heads,
                seq,
                size,
            }),
            [batch, seq, hidden] => {
                let (attr, heads) = heads_attr;
                if heads <= 0 || hidden % heads as usize != 0 {
                    bail!(
                        "attribute \"{attr}\" = {heads} must be positive and divide the hidden \
                         size {hidden} of 3-D input {i} ({name})"
                    );
                }
                let heads = heads as usize;
                let size = hidden / heads;
                Ok(Heads {
                    data: Cow::Owned(permute(&data, &[batch, seq, heads, size], &[0, 2, 1, 3])),
                    batch,
                    heads,
                    seq,
                    size,
                })
            }
            _ => bail!(
                "input {i} ({name}) must be 3-D or 4-D, has shape {:?}",
                t.shape()
            ),
        }
    }

    /// Offset of `(b, h, s, 0)`.
    fn row(&self, b: usize, h: usize, s: usize) -> usize {
        ((b * self.heads + h) * self.seq + s) * self.size
    }

    /// `self` followed by `next` along the sequence axis (the KV cache update).
    fn concat_seq(&self, next: &Heads) -> Heads<'static> {
        let seq = self.seq + next.seq;
        let mut data = Vec::with_capacity(self.batch * self.heads * seq * self.size);
        for b in 0..self.batch {
            for h in 0..self.heads {
                for x in [self, next] {
                    let first = x.row(b, h, 0);
                    data.extend_from_slice(&x.data[first..first + x.seq * x.size]);
                }
            }
        }
        Heads {
            data: Cow::Owned(data),
            seq,
            batch: self.batch,
            heads: self.heads,
            size: self.size,
        }
    }

    fn into_tensor(self, dtype: DType) -> Result<Tensor> {
        f32::store(
            dtype,
            vec![self.batch, self.heads, self.seq, self.size],
            self.data.into_owned(),
        )
    }
}

/// The additive attention mask: `attn_mask` broadcast to `[batch, q_heads, q_seq, total]`.
enum Mask {
    None,
    /// `true` keeps a key; positions past the mask's last dim are masked.
    Bool {
        keep: Vec<u8>,
        strides: Vec<usize>,
        len: usize,
    },
    /// Added to the scores; positions past the mask's last dim get `-inf`.
    Float {
        add: Vec<f32>,
        strides: Vec<usize>,
        len: usize,
    },
}

impl Mask {
    fn read(t: Option<&Tensor>, dims: [usize; 4]) -> Result<Mask> {
        let Some(t) = t else { return Ok(Mask::None) };
        let shape = t.shape();
        let len = *shape.last().unwrap_or(&1);
        let mut target = dims;
        target[3] = len;
        let fits = shape.len() <= 4
            && shape
                .iter()
                .rev()
                .zip(target.iter().rev())
                .all(|(&m, &d)| m == 1 || m == d);
        if !fits || len > dims[3] {
            bail!(
                "input 3 (attn_mask) of shape {shape:?} does not broadcast to \
                 [batch, q_heads, q_seq, total_seq] = {dims:?}"
            );
        }
        let strides = broadcast_strides(shape, &target);
        Ok(if t.dtype() == DType::Bool {
            Mask::Bool {
                keep: t.as_bools()?.to_vec(),
                strides,
                len,
            }
        } else {
            Mask::Float {
                add: f32::read(t, "input 3 (attn_mask)")?.into_owned(),
                strides,
                len,
            }
        })
    }

    /// Applies the mask to score `s` of `(b, h, i, j)`.
    fn apply(&self, s: f32, [b, h, i, j]: [usize; 4]) -> f32 {
        let at =
            |strides: &[usize]| b * strides[0] + h * strides[1] + i * strides[2] + j * strides[3];
        match self {
            Mask::None => s,
            Mask::Bool { len, .. } | Mask::Float { len, .. } if j >= *len => f32::NEG_INFINITY,
            Mask::Bool { keep, strides, .. } => {
                if keep[at(strides)] != 0 {
                    s
                } else {
                    f32::NEG_INFINITY
                }
            }
            Mask::Float { add, strides, .. } => s + add[at(strides)],
        }
    }
}

#[derive(Debug)]
struct Attention {
    is_causal: bool,
    q_num_heads: i64,
    kv_num_heads: i64,
    scale: Option<f32>,
    softcap: f32,
    qk_matmul_output_mode: i64,
    correctly_rounded: bool,
    /// Whether the node asks for output 3 (the observed scores), which is computed only then.
    qk_output: bool,
}

impl Attention {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let mode = args.int_or("qk_matmul_output_mode", 0)?;
        if !(0..=3).contains(&mode) {
            bail!("attribute \"qk_matmul_output_mode\" must be 0 to 3, got {mode}");
        }
        let softcap = args.float_or("softcap", 0.0)?;
        if softcap < 0.0 {
            bail!("attribute \"softcap\" must not be negative, got {softcap}");
        }
        Ok(Box::new(Attention {
            is_causal: args.int_or("is_causal", 0)? != 0,
            q_num_heads: args.int_or("q_num_heads", 0)?,
            kv_num_heads: args.int_or("kv_num_heads", 0)?,
            scale: args.float("scale")?,
            softcap,
            qk_matmul_output_mode: mode,
            correctly_rounded: ctx.operation_set.correctly_rounded_math(),
            qk_output: ctx.node.outputs.len() > 3,
        }))
    }

    fn tanh(&self, x: f32) -> f32 {
        if self.correctly_rounded {
            samebits_math::tanh(x)
        } else {
            x.tanh()
        }
    }
}

impl Op for Attention {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().and_then(|t| t.as_ref()?.dtype());
        Ok(vec![dtype.map(|d| ValueType::tensor(d, None))])
    }

    /// Without softcap and the observed scores (masks, `nonpad_kv_seqlen` and shapes are
    /// checked by the backend). The device exp is the correctly rounded one in every set: the
    /// `default` set promises no bits, so it may take the reproducible kernel.
    fn device_kernel(&self) -> Option<DeviceKernel> {
        if self.softcap != 0.0 || self.qk_output {
            return None;
        }
        let heads = |h: i64| usize::try_from(h).ok();
        Some(DeviceKernel::Attention {
            is_causal: self.is_causal,
            q_num_heads: heads(self.q_num_heads)?,
            kv_num_heads: heads(self.kv_num_heads)?,
            scale: self.scale,
        })
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let q_in = inputs.tensor(0)?;
        let dtype = q_in.dtype();
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
            unsupported!("Attention on {dtype} tensors");
        }
        let q = Heads::read(q_in, 0, "Q", ("q_num_heads", self.q_num_heads))?;
        let k = Heads::read(
            inputs.tensor(1)?,
            1,
            "K",
            ("kv_num_heads", self.kv_num_heads),
        )?;
        let v = Heads::read(
            inputs.tensor(2)?,
            2,
            "V",
            ("kv_num_heads", self.kv_num_heads),
        )?;
        let past = |i: usize, name: &str| -> Result<Option<Heads>> {
            inputs
                .opt_tensor(i)?
                .map(|t| Heads::read(t, i, name, ("kv_num_heads", self.kv_num_heads)))
                .transpose()
        };
        let (past_key, past_value) = (past(4, "past_key")?, past(5, "past_value")?);
        if past_key.is_some() != past_value.is_some() {
            bail!("inputs 4 (past_key) and 5 (past_value) must be given together");
        }
        let past_len = past_key.as_ref().map_or(0, |p| p.seq);
        let k = match past_key {
            Some(p) => p.concat_seq(&k),
            None => k,
        };
        let v = match past_value {
            Some(p) => p.concat_seq(&v),
            None => v,
        };
        if k.batch != q.batch || v.batch != q.batch || k.heads != v.heads || k.seq != v.seq {
            bail!(
                "K, V (with their past) must share batch, heads and sequence: Q {:?}, K {:?}, V {:?}",
                [q.batch, q.heads, q.seq, q.size],
                [k.batch, k.heads, k.seq, k.size],
                [v.batch, v.heads, v.seq, v.size]
            );
        }
        if k.size != q.size {
            bail!("Q head size {} differs from K head size {}", q.size, k.size);
        }
        if k.heads == 0 || q.heads % k.heads != 0 {
            bail!(
                "the {} query heads must be a multiple of the {} key/value heads",
                q.heads,
                k.heads
            );
        }
        let group = q.heads / k.heads;
        let total = k.seq;
        let mask = Mask::read(inputs.opt_tensor(3)?, [q.batch, q.heads, q.seq, total])?;
        // Opset 24: valid keys per batch (a static cache padded at its end).
        let nonpad = match inputs.opt_tensor(6)? {
            Some(t) => {
                let lens = t.to_i64_vec()?;
                if lens.len() != q.batch || lens.iter().any(|&l| l < 0 || l as usize > total) {
                    bail!(
                        "input 6 (nonpad_kv_seqlen) must hold {} lengths in 0..={total}, got {lens:?}",
                        q.batch
                    );
                }
                Some(lens.into_iter().map(|l| l as usize).collect::<Vec<_>>())
            }
            None => None,
        };
        // Causal frontier: key j is visible to query i when j <= i + offset(b).
        let causal_offset = |b: usize| -> isize {
            match (&nonpad, past_len) {
                (Some(lens), 0) => lens[b] as isize - q.seq as isize,
                _ => past_len as isize,
            }
        };
        let scale = self.scale.unwrap_or(1.0 / (q.size as f32).sqrt());
        let (vsize, mode) = (v.size, self.qk_matmul_output_mode);
        let mut y = vec![0.0f32; q.batch * q.heads * q.seq * vsize];
        let observed_len = if self.qk_output { total } else { 0 };
        // contract: attention. One task per (batch, KV head): the queries of its `group` heads
        // are consecutive rows, so the scores are one canonical GEMM with K transposed and the
        // outputs one canonical GEMM of the probabilities with V (contract: gemm, the same
        // canonical dots as the formula; masked keys enter with probability 0).
        let isa = Isa::active();
        let rows = group * q.seq;
        let qk_groups: Vec<Vec<f32>> = y
            .par_chunks_mut(rows * vsize.max(1))
            .enumerate()
            .map(|(bg, y_group)| {
                with_isa(isa, || {
                    let (b, g) = (bg / k.heads, bg % k.heads);
                    let q_rows = &q.data[q.row(b, g * group, 0)..][..rows * q.size];
                    let keys = &k.data[k.row(b, g, 0)..][..total * k.size];
                    let values = &v.data[v.row(b, g, 0)..][..total * vsize];
                    let mut scores = vec![0.0f32; rows * total];
                    gemm_f32(
                        1,
                        rows,
                        total,
                        q.size,
                        MatRef::row_major(q_rows, rows, q.size),
                        MatRef::row_major(keys, total, k.size).transposed(),
                        &mut scores,
                    );
                    let mut qk_group = vec![0.0f32; rows * observed_len];
                    for (r, row) in scores.chunks_exact_mut(total.max(1)).enumerate() {
                        let (h, i) = (g * group + r / q.seq, r % q.seq);
                        let observed = &mut qk_group[r * observed_len..][..observed_len];
                        for (j, s) in row.iter_mut().enumerate() {
                            let mut score = *s * scale;
                            if self.softcap > 0.0 {
                                score = self.softcap * self.tanh(score / self.softcap);
                            }
                            if mode <= 1 && self.qk_output {
                                observed[j] = score;
                            }
                            let hidden_by_causal =
                                self.is_causal && j as isize > i as isize + causal_offset(b);
                            let padding = nonpad.as_ref().is_some_and(|lens| j >= lens[b]);
                            if hidden_by_causal || padding {
                                score = f32::NEG_INFINITY;
                            }
                            *s = mask.apply(score, [b, h, i, j]);
                            if mode == 2 && self.qk_output {
                                observed[j] = *s;
                            }
                        }
                        softmax_row(row, false, self.correctly_rounded);
                        if mode == 3 && self.qk_output {
                            observed.copy_from_slice(row);
                        }
                    }
                    gemm_f32(
                        1,
                        rows,
                        vsize,
                        total,
                        MatRef::row_major(&scores, rows, total),
                        MatRef::row_major(values, total, vsize),
                        y_group,
                    );
                    qk_group
                })
            })
            .collect();
        let out_shape = if q_in.rank() == 3 {
            y = permute(&y, &[q.batch, q.heads, q.seq, vsize], &[0, 2, 1, 3]);
            vec![q.batch, q.seq, q.heads * vsize]
        } else {
            vec![q.batch, q.heads, q.seq, vsize]
        };
        let mut outputs = vec![
            f32::store(dtype, out_shape, y)?.into(),
            k.into_tensor(dtype)?.into(),
            v.into_tensor(dtype)?.into(),
        ];
        if self.qk_output {
            // (No heads were run when V's head size is 0: the scores stay zero.)
            let qk = if qk_groups.len() * group == q.batch * q.heads {
                qk_groups.concat()
            } else {
                vec![0.0; q.batch * q.heads * q.seq * total]
            };
            outputs.push(f32::store(dtype, vec![q.batch, q.heads, q.seq, total], qk)?.into());
        }
        Ok(outputs)
    }
}

/// RotaryEmbedding: rotates pairs `(x1, x2)` of the first `rotary_embedding_dim` features of
/// each head by the cached angle of the token's position.
#[derive(Debug)]
struct Rotary {
    interleaved: bool,
    num_heads: i64,
    rotary_dim: i64,
}

impl Rotary {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(Rotary {
            interleaved: args.int_or("interleaved", 0)? != 0,
            num_heads: args.int_or("num_heads", 0)?,
            rotary_dim: args.int_or("rotary_embedding_dim", 0)?,
        }))
    }
}

impl Op for Rotary {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Rotary {
            interleaved: self.interleaved,
            num_heads: usize::try_from(self.num_heads).ok()?,
            rotary_dim: usize::try_from(self.rotary_dim).ok()?,
        })
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x_in = inputs.tensor(0)?;
        let x = Heads::read(x_in, 0, "X", ("num_heads", self.num_heads))?;
        let (cos_t, sin_t) = (inputs.tensor(1)?, inputs.tensor(2)?);
        let cos = f32::read(cos_t, "input 1 (cos_cache)")?;
        let sin = f32::read(sin_t, "input 2 (sin_cache)")?;
        let rot = if self.rotary_dim == 0 {
            x.size
        } else {
            self.rotary_dim as usize
        };
        if self.rotary_dim < 0 || rot > x.size || rot % 2 != 0 {
            bail!(
                "attribute \"rotary_embedding_dim\" = {} must be even and at most the head size {}",
                self.rotary_dim,
                x.size
            );
        }
        let half = rot / 2;
        let cache_width = *cos_t.shape().last().unwrap_or(&0);
        if cos_t.shape() != sin_t.shape() || cache_width < half {
            bail!(
                "cos_cache {:?} and sin_cache {:?} must have one shape with at least {half} \
                 columns",
                cos_t.shape(),
                sin_t.shape()
            );
        }
        // Row of the caches for (batch b, position s).
        let positions = inputs.opt_tensor(3)?.map(|t| t.to_i64_vec()).transpose()?;
        let cache_rows = cos.len() / cache_width.max(1);
        if let Some(p) = &positions
            && p.len() != x.batch * x.seq
        {
            bail!(
                "input 3 (position_ids) must hold [batch, seq] = [{}, {}] positions, has {}",
                x.batch,
                x.seq,
                p.len()
            );
        }
        let cache_row = |b: usize, s: usize| -> Result<usize> {
            let row = match &positions {
                Some(p) => p[b * x.seq + s],
                None => (b * x.seq + s) as i64,
            };
            usize::try_from(row)
                .ok()
                .filter(|&r| r < cache_rows)
                .ok_or_else(|| {
                    OpError::Invalid(format!(
                        "position {row} of (batch {b}, token {s}) lies outside the \
                         {cache_rows}-row cos/sin cache"
                    ))
                })
        };
        let mut out = x.data.to_vec();
        // contract: attention (RotaryEmbedding)
        for b in 0..x.batch {
            for s in 0..x.seq {
                let c = cache_row(b, s)? * cache_width;
                for h in 0..x.heads {
                    let base = x.row(b, h, s);
                    for p in 0..half {
                        let (i1, i2) = if self.interleaved {
                            (base + 2 * p, base + 2 * p + 1)
                        } else {
                            (base + p, base + half + p)
                        };
                        let (x1, x2) = (x.data[i1], x.data[i2]);
                        let (cs, sn) = (cos[c + p], sin[c + p]);
                        out[i1] = (cs * x1) - (sn * x2);
                        out[i2] = (sn * x1) + (cs * x2);
                    }
                }
            }
        }
        let out = if x_in.rank() == 3 {
            permute(&out, &[x.batch, x.heads, x.seq, x.size], &[0, 2, 1, 3])
        } else {
            out
        };
        Ok(vec![
            f32::store(x_in.dtype(), x_in.shape().to_vec(), out)?.into(),
        ])
    }
}
