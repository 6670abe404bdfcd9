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
    r.register("samebits", "RaggedAttention", RaggedAttention::build);
    r.register("", "RotaryEmbedding", Rotary::build);
}

/// A `[batch, heads, seq, size]` view of a dense buffer; the feature index has unit stride.
/// [`HeadsLayout::of_shape`] is the one rule, for the CPU ops here and samebits-cuda's
/// attention and rotary launches, of how an Attention / RotaryEmbedding input splits into heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadsLayout {
    pub batch: usize,
    pub heads: usize,
    pub seq: usize,
    pub size: usize,
    /// Element strides of batch, head and position.
    pub strides: [usize; 3],
}

impl HeadsLayout {
    /// A dense 4-D `[batch, heads, seq, size]` tensor.
    pub fn dense(batch: usize, heads: usize, seq: usize, size: usize) -> Self {
        HeadsLayout {
            batch,
            heads,
            seq,
            size,
            strides: [heads * seq * size, seq * size, size],
        }
    }

    /// A dense 3-D `[batch, seq, heads * size]` tensor split into heads.
    pub fn split(batch: usize, seq: usize, heads: usize, size: usize) -> Self {
        HeadsLayout {
            batch,
            heads,
            seq,
            size,
            strides: [seq * heads * size, size, heads * size],
        }
    }

    /// The heads of a dense tensor of `shape`: 4-D as is, 3-D split into `heads` (which must
    /// divide the hidden size); `None` for other ranks.
    pub fn of_shape(shape: &[usize], heads: usize) -> Option<Self> {
        match *shape {
            [b, h, s, d] => Some(HeadsLayout::dense(b, h, s, d)),
            [b, s, hidden] if heads > 0 && hidden % heads == 0 => {
                Some(HeadsLayout::split(b, s, heads, hidden / heads))
            }
            _ => None,
        }
    }

    /// Elements of the view.
    pub fn len(&self) -> usize {
        self.batch * self.heads * self.seq * self.size
    }

    /// Whether the view holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`HeadsLayout::of_shape`] of input `i` (`name`), its heads from the attribute `heads_attr`
/// when 3-D, or the op's error.
fn heads_layout(
    shape: &[usize],
    i: usize,
    name: &str,
    (attr, heads): (&str, i64),
) -> Result<HeadsLayout> {
    if let Some(layout) = HeadsLayout::of_shape(shape, usize::try_from(heads).unwrap_or(0)) {
        return Ok(layout);
    }
    match *shape {
        [_, _, hidden] => bail!(
            "attribute \"{attr}\" = {heads} must be positive and divide the hidden size \
             {hidden} of 3-D input {i} ({name})"
        ),
        _ => bail!("input {i} ({name}) must be 3-D or 4-D, has shape {shape:?}"),
    }
}

/// Attention's heads resolved from its input shapes (the op and samebits-cuda's attention
/// launch both use it): Q, the new keys K and values V, the past's length, and the output Y
/// (3-D `[batch, seq, heads * v_size]` for a 3-D Q, else 4-D).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttentionHeads {
    pub q: HeadsLayout,
    pub k: HeadsLayout,
    pub v: HeadsLayout,
    /// Positions of past_key / past_value (0 without them).
    pub past: usize,
    pub y: HeadsLayout,
    pub y_shape: Vec<usize>,
}

impl AttentionHeads {
    /// The shapes of Q, K, V and the optional past key and value (given together), with the
    /// node's `q_num_heads` / `kv_num_heads` for 3-D inputs; the op's error when they do not
    /// fit together (batches, key/value heads dividing the query heads, Q and K head sizes,
    /// past and new keys and values of the same batch, heads and sizes).
    pub fn resolve(
        [q, k, v]: [&[usize]; 3],
        past: Option<[&[usize]; 2]>,
        q_num_heads: i64,
        kv_num_heads: i64,
    ) -> Result<AttentionHeads> {
        let q_rank_3 = q.len() == 3;
        let q = heads_layout(q, 0, "Q", ("q_num_heads", q_num_heads))?;
        let kv = ("kv_num_heads", kv_num_heads);
        let (k, v) = (heads_layout(k, 1, "K", kv)?, heads_layout(v, 2, "V", kv)?);
        let past = match past {
            None => 0,
            Some([pk, pv]) => {
                let (pk, pv) = (
                    heads_layout(pk, 4, "past_key", kv)?,
                    heads_layout(pv, 5, "past_value", kv)?,
                );
                let same = |p: HeadsLayout, n: HeadsLayout| {
                    (p.batch, p.heads, p.size) == (n.batch, n.heads, n.size)
                };
                if !same(pk, k) || !same(pv, v) || pk.seq != pv.seq {
                    bail!(
                        "past_key {:?} and past_value {:?} must match K and V in batch, heads \
                         and head size, and each other in length",
                        [pk.batch, pk.heads, pk.seq, pk.size],
                        [pv.batch, pv.heads, pv.seq, pv.size]
                    );
                }
                pk.seq
            }
        };
        if k.batch != q.batch || v.batch != q.batch || k.heads != v.heads || k.seq != v.seq {
            bail!(
                "K, V (with their past) must share batch, heads and sequence: Q {:?}, K {:?}, V {:?}",
                [q.batch, q.heads, q.seq, q.size],
                [k.batch, k.heads, past + k.seq, k.size],
                [v.batch, v.heads, past + v.seq, v.size]
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
        let (y, y_shape) = match q_rank_3 {
            true => (
                HeadsLayout::split(q.batch, q.seq, q.heads, v.size),
                vec![q.batch, q.seq, q.heads * v.size],
            ),
            false => (
                HeadsLayout::dense(q.batch, q.heads, q.seq, v.size),
                vec![q.batch, q.heads, q.seq, v.size],
            ),
        };
        Ok(AttentionHeads {
            q,
            k,
            v,
            past,
            y,
            y_shape,
        })
    }

    /// The score scale: the attribute `scale`, else `1 / sqrt(head size)` (the head size
    /// converted to f32, the square root and the division each rounded once).
    pub fn scale(&self, scale: Option<f32>) -> f32 {
        scale.unwrap_or(1.0 / (self.q.size as f32).sqrt())
    }
}

/// RotaryEmbedding resolved from its input shapes (the op and samebits-cuda's rotary launch
/// both use it): X's heads, the features `rot` rotated in each head, and the cos / sin
/// caches' row `width` and number of rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RotaryShape {
    pub heads: HeadsLayout,
    pub rot: usize,
    pub width: usize,
    pub cache_rows: usize,
}

impl RotaryShape {
    /// The shapes of X (3-D with the node's `num_heads`, or 4-D) and of the cos and sin caches
    /// (one shape, rows of at least `rot / 2`); `rotary_dim` 0 rotates whole heads. The op's
    /// error when they do not fit.
    pub fn resolve(
        x: &[usize],
        [cos, sin]: [&[usize]; 2],
        num_heads: i64,
        rotary_dim: i64,
    ) -> Result<RotaryShape> {
        let heads = heads_layout(x, 0, "X", ("num_heads", num_heads))?;
        let rot = if rotary_dim == 0 {
            heads.size
        } else {
            rotary_dim as usize
        };
        if rotary_dim < 0 || rot > heads.size || rot % 2 != 0 {
            bail!(
                "attribute \"rotary_embedding_dim\" = {rotary_dim} must be even and at most the \
                 head size {}",
                heads.size
            );
        }
        let half = rot / 2;
        let width = *cos.last().unwrap_or(&0);
        if cos != sin || width < half {
            bail!(
                "cos_cache {cos:?} and sin_cache {sin:?} must have one shape with at least {half} \
                 columns"
            );
        }
        Ok(RotaryShape {
            heads,
            rot,
            width,
            cache_rows: cos.iter().product::<usize>() / width.max(1),
        })
    }
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
        let layout = heads_layout(t.shape(), i, name, heads_attr)?;
        let HeadsLayout {
            batch,
            heads,
            seq,
            size,
            ..
        } = layout;
        let data = match t.rank() {
            3 => Cow::Owned(permute(&data, &[batch, seq, heads, size], &[0, 2, 1, 3])),
            _ => data,
        };
        Ok(Heads {
            data,
            batch,
            heads,
            seq,
            size,
        })
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
        Ok(Box::new(Attention::parse(ctx)?))
    }

    fn parse(ctx: &BuildContext) -> Result<Attention> {
        let args = NodeArgs::new(ctx.node);
        let mode = args.int_or("qk_matmul_output_mode", 0)?;
        if !(0..=3).contains(&mode) {
            bail!("attribute \"qk_matmul_output_mode\" must be 0 to 3, got {mode}");
        }
        let softcap = args.float_or("softcap", 0.0)?;
        if softcap < 0.0 {
            bail!("attribute \"softcap\" must not be negative, got {softcap}");
        }
        Ok(Attention {
            is_causal: args.int_or("is_causal", 0)? != 0,
            q_num_heads: args.int_or("q_num_heads", 0)?,
            kv_num_heads: args.int_or("kv_num_heads", 0)?,
            scale: args.float("scale")?,
            softcap,
            qk_matmul_output_mode: mode,
            correctly_rounded: ctx.operation_set.correctly_rounded_math(),
            qk_output: ctx.node.outputs.len() > 3,
        })
    }

    fn tanh(&self, x: f32) -> f32 {
        if self.correctly_rounded {
            samebits_math::tanh(x)
        } else {
            x.tanh()
        }
    }
}

/// Query rows per block of a causal step's blocked evaluation (a tiling choice: the bits are
/// those of the whole rows).
const CAUSAL_BLOCK_ROWS: usize = 64;

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
        let (k_in, v_in) = (inputs.tensor(1)?, inputs.tensor(2)?);
        let (past_key, past_value) = (inputs.opt_tensor(4)?, inputs.opt_tensor(5)?);
        let past = match (past_key, past_value) {
            (Some(pk), Some(pv)) => Some([pk.shape(), pv.shape()]),
            (None, None) => None,
            _ => bail!("inputs 4 (past_key) and 5 (past_value) must be given together"),
        };
        let shape = AttentionHeads::resolve(
            [q_in.shape(), k_in.shape(), v_in.shape()],
            past,
            self.q_num_heads,
            self.kv_num_heads,
        )?;
        let q = Heads::read(q_in, 0, "Q", ("q_num_heads", self.q_num_heads))?;
        let kv = ("kv_num_heads", self.kv_num_heads);
        let (k, v) = (
            Heads::read(k_in, 1, "K", kv)?,
            Heads::read(v_in, 2, "V", kv)?,
        );
        let past_len = shape.past;
        let (k, v) = match (past_key, past_value) {
            (Some(pk), Some(pv)) => (
                Heads::read(pk, 4, "past_key", kv)?.concat_seq(&k),
                Heads::read(pv, 5, "past_value", kv)?.concat_seq(&v),
            ),
            _ => (k, v),
        };
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
        let scale = shape.scale(self.scale);
        let (vsize, mode) = (v.size, self.qk_matmul_output_mode);
        let mut y = vec![0.0f32; q.batch * q.heads * q.seq * vsize];
        let observed_len = if self.qk_output { total } else { 0 };
        // contract: attention. One task per (batch, KV head): the queries of its `group` heads
        // are consecutive rows, so the scores are a canonical GEMM with K transposed and the
        // outputs a canonical GEMM of the probabilities with V (contract: gemm, the same
        // canonical dots as the formula; masked keys enter with probability 0). A causal step
        // of more than one block of queries without mask, padding or observed scores goes in
        // blocks of query rows of one head, each over the keys its last row sees: the keys past
        // that are -inf scores, +0 probabilities and `fma(+0, v, p) = p` terms for finite
        // values, so leaving them out changes no bit (a V with an infinity or NaN takes the
        // whole rows instead). A shorter step (a decode step) would see every key in its one
        // block, so it keeps the group's rows together.
        let isa = Isa::active();
        let rows = group * q.seq;
        let causal_blocks = self.is_causal
            && q.seq > CAUSAL_BLOCK_ROWS
            && matches!(mask, Mask::None)
            && nonpad.is_none()
            && !self.qk_output;
        let qk_groups: Vec<Vec<f32>> = y
            // No query rows (a sequence of 0) leaves `y` empty: chunks of 1 then yield none.
            .par_chunks_mut((rows * vsize.max(1)).max(1))
            .enumerate()
            .map(|(bg, y_group)| {
                with_isa(isa, || {
                    let (b, g) = (bg / k.heads, bg % k.heads);
                    let q_rows = &q.data[q.row(b, g * group, 0)..][..rows * q.size];
                    let keys = &k.data[k.row(b, g, 0)..][..total * k.size];
                    let values = &v.data[v.row(b, g, 0)..][..total * vsize];
                    // Blocks of rows (first row, rows, keys seen).
                    let blocks: Vec<(usize, usize, usize)> =
                        match causal_blocks && values.iter().all(|x| x.is_finite()) {
                            true => (0..group)
                                .flat_map(|h| {
                                    (0..q.seq).step_by(CAUSAL_BLOCK_ROWS).map(move |i0| {
                                        let n = CAUSAL_BLOCK_ROWS.min(q.seq - i0);
                                        let seen = (i0 + n).saturating_add(past_len).min(total);
                                        (h * q.seq + i0, n, seen)
                                    })
                                })
                                .collect(),
                            false => vec![(0, rows, total)],
                        };
                    // Each block writes its own rows of the output (and of the observed
                    // scores), so the blocks are tasks of their own: a prompt's few KV heads
                    // then still give every thread work.
                    let mut qk_group = vec![0.0f32; rows * observed_len];
                    let mut tasks = Vec::with_capacity(blocks.len());
                    let (mut y_rest, mut qk_rest) = (&mut y_group[..], &mut qk_group[..]);
                    for (r0, n, seen) in blocks {
                        let (y_block, y_tail) = std::mem::take(&mut y_rest).split_at_mut(n * vsize);
                        let (qk_block, qk_tail) =
                            std::mem::take(&mut qk_rest).split_at_mut(n * observed_len);
                        tasks.push((r0, n, seen, y_block, qk_block));
                        (y_rest, qk_rest) = (y_tail, qk_tail);
                    }
                    tasks
                        .into_par_iter()
                        .for_each(|(r0, n, seen, y_block, qk_block)| {
                            with_isa(isa, || {
                                let mut scores = vec![0.0f32; n * seen];
                                gemm_f32(
                                    1,
                                    n,
                                    seen,
                                    q.size,
                                    MatRef::row_major(&q_rows[r0 * q.size..], n, q.size),
                                    MatRef::row_major(keys, seen, k.size).transposed(),
                                    &mut scores,
                                );
                                for (dr, row) in scores.chunks_exact_mut(seen.max(1)).enumerate() {
                                    let r = r0 + dr;
                                    let (h, i) = (g * group + r / q.seq, r % q.seq);
                                    let observed =
                                        &mut qk_block[dr * observed_len..][..observed_len];
                                    for (j, s) in row.iter_mut().enumerate() {
                                        let mut score = *s * scale;
                                        if self.softcap > 0.0 {
                                            score = self.softcap * self.tanh(score / self.softcap);
                                        }
                                        if mode <= 1 && self.qk_output {
                                            observed[j] = score;
                                        }
                                        let hidden_by_causal = self.is_causal
                                            && j as isize > i as isize + causal_offset(b);
                                        let padding =
                                            nonpad.as_ref().is_some_and(|lens| j >= lens[b]);
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
                                    n,
                                    vsize,
                                    seen,
                                    MatRef::row_major(&scores, n, seen),
                                    MatRef::row_major(values, seen, vsize),
                                    y_block,
                                );
                            })
                        });
                    qk_group
                })
            })
            .collect();
        if q_in.rank() == 3 {
            y = permute(&y, &[q.batch, q.heads, q.seq, vsize], &[0, 2, 1, 3]);
        }
        let out_shape = shape.y_shape;
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

/// `samebits::RaggedAttention`: the attention of several sequences in one step, each over its
/// own KV cache, for a batched decoder (samebits-llm's batched plan; docs/contract.md section
/// `attention`, "Ragged batches").
///
/// Inputs: Q, K, V `[1, R, heads * size]` (the rows of every sequence, one after the other),
/// `rows` i64 `[B]` (how many of those rows each sequence has), `past_key` and `past_value`,
/// sequences of B tensors `[1, kv_heads, P_b, size]`. Outputs: Y `[1, R, q_heads * v_size]` and
/// `present_key`, `present_value`, sequences of B tensors `[1, kv_heads, P_b + rows_b, size]`.
/// Attributes: those of Attention (`is_causal`, `q_num_heads`, `kv_num_heads`, `scale`,
/// `softcap`).
///
/// Sequence `b`'s rows are evaluated by this module's Attention on its own inputs, exactly as a
/// lone sequence's step evaluates them, so its bits never depend on the other sequences (how
/// many, how long): no padding, no shared reduction.
#[derive(Debug)]
struct RaggedAttention(Attention);

impl RaggedAttention {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        if ctx.node.outputs.len() > 3 {
            bail!("RaggedAttention has 3 outputs (Y, present_key, present_value)");
        }
        Ok(Box::new(RaggedAttention(Attention::parse(ctx)?)))
    }
}

/// Rows `rows` of a `[1, R, width]` tensor, as a tensor `[1, rows.len(), width]`.
fn tensor_rows(t: &Tensor, rows: std::ops::Range<usize>, input: usize) -> Result<Tensor> {
    let [1, r, width] = t.shape()[..] else {
        bail!(
            "input {input} must be [1, rows, width], has shape {:?}",
            t.shape()
        );
    };
    if rows.end > r {
        bail!(
            "input {input} has {r} rows, the sequences' rows need {}",
            rows.end
        );
    }
    let row_bytes = width * t.dtype().size();
    let bytes = &t.bytes()?[rows.start * row_bytes..rows.end * row_bytes];
    Ok(Tensor::from_le_bytes(
        t.dtype(),
        vec![1, rows.len(), width],
        bytes,
    )?)
}

impl Op for RaggedAttention {
    fn device_kernel(&self) -> Option<DeviceKernel> {
        match self.0.device_kernel()? {
            DeviceKernel::Attention {
                is_causal,
                q_num_heads,
                kv_num_heads,
                scale,
            } => Some(DeviceKernel::RaggedAttention {
                is_causal,
                q_num_heads,
                kv_num_heads,
                scale,
            }),
            _ => None,
        }
    }

    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().and_then(|t| t.as_ref()?.dtype());
        let cache = inputs.get(4).cloned().flatten();
        Ok(vec![
            dtype.map(|d| ValueType::tensor(d, None)),
            cache.clone(),
            cache,
        ])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (q, k, v) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        let rows = inputs.ints(3, "rows")?;
        let caches = |i: usize, name: &str| -> Result<&[Tensor]> {
            match inputs.value(i)? {
                Value::Sequence(ts) if ts.len() == rows.len() => Ok(ts),
                Value::Sequence(ts) => bail!(
                    "input {i} ({name}) holds {} caches for {} sequences",
                    ts.len(),
                    rows.len()
                ),
                other => bail!(
                    "input {i} ({name}) must be a sequence, got a {}",
                    other.kind()
                ),
            }
        };
        let (past_keys, past_values) = (caches(4, "past_key")?, caches(5, "past_value")?);
        let mut starts = Vec::with_capacity(rows.len());
        let mut end = 0usize;
        for &n in &rows {
            let n = usize::try_from(n).map_err(|_| {
                OpError::Invalid(format!(
                    "input 3 (rows) must hold row counts >= 0, got {rows:?}"
                ))
            })?;
            starts.push(end..end + n);
            end += n;
        }
        let total = q.shape().get(1).copied().unwrap_or(0);
        if end != total {
            bail!("input 3 (rows) adds up to {end} rows, Q has {total}");
        }
        let isa = Isa::active();
        let per_sequence: Vec<Vec<Value>> = starts
            .par_iter()
            .enumerate()
            .map(|(b, range)| {
                with_isa(isa, || {
                    let (qb, kb, vb) = (
                        tensor_rows(q, range.clone(), 0)?,
                        tensor_rows(k, range.clone(), 1)?,
                        tensor_rows(v, range.clone(), 2)?,
                    );
                    let (pk, pv) = (
                        Value::from(past_keys[b].clone()),
                        Value::from(past_values[b].clone()),
                    );
                    let (qb, kb, vb) = (Value::from(qb), Value::from(kb), Value::from(vb));
                    self.0
                        .eval(&[Some(&qb), Some(&kb), Some(&vb), None, Some(&pk), Some(&pv)])
                        .map_err(|e| OpError::Invalid(format!("sequence {b}: {e}")))
                })
            })
            .collect::<Result<_>>()?;
        let mut y = Vec::new();
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        let mut width = 0;
        for outputs in per_sequence {
            let mut outputs = outputs.into_iter();
            let mut next = || {
                outputs
                    .next()
                    .ok_or_else(|| OpError::Invalid("Attention gave too few outputs".into()))
            };
            let yb = next()?.into_tensor()?;
            width = yb.shape().last().copied().unwrap_or(0);
            y.extend_from_slice(yb.bytes()?);
            keys.push(next()?.into_tensor()?);
            values.push(next()?.into_tensor()?);
        }
        let y = Tensor::from_le_bytes(q.dtype(), vec![1, total, width], &y)?;
        Ok(vec![
            y.into(),
            Value::Sequence(keys),
            Value::Sequence(values),
        ])
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
        let (cos_t, sin_t) = (inputs.tensor(1)?, inputs.tensor(2)?);
        let RotaryShape {
            rot,
            width: cache_width,
            cache_rows,
            ..
        } = RotaryShape::resolve(
            x_in.shape(),
            [cos_t.shape(), sin_t.shape()],
            self.num_heads,
            self.rotary_dim,
        )?;
        let x = Heads::read(x_in, 0, "X", ("num_heads", self.num_heads))?;
        let cos = f32::read(cos_t, "input 1 (cos_cache)")?;
        let sin = f32::read(sin_t, "input 2 (sin_cache)")?;
        let half = rot / 2;
        // Row of the caches for (batch b, position s).
        let positions = inputs.opt_tensor(3)?.map(|t| t.to_i64_vec()).transpose()?;
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
