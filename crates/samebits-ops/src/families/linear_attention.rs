//! LinearAttention (opset 27): attention as a recurrence over a fixed-size state per key head,
//! the `linear`, `gated`, `delta` and `gated_delta` (default) update rules.
//!
//! Inputs `query [B, T, Hq * dk]`, `key [B, T, Hkv * dk]`, `value [B, T, Hkv * dv]`, optional
//! `past_state [B, Hkv, dk, dv]` (zeros when absent), `decay` (gated rules: `[B, T, Hkv * dk]`
//! or `[B, T, Hkv]`, log-space) and `beta` (delta rules: `[B, T, Hkv]` or `[B, T, 1]`);
//! attributes `q_num_heads`, `kv_num_heads` (Hq a multiple of Hkv, query head `i` reading key
//! head `i / (Hq / Hkv)`), `scale` (0 or absent: `1 / sqrt(dk)`), `update_rule`; `chunk_size`
//! is a tuning hint without effect. The recurrence is docs/contract.md's section
//! `linear-attention`, in f32 (f16 / bf16 widened, rounded once at the store): per step, in
//! this order, `S = S * exp(g)` (gated), `v = beta * (v - S^T k)` (delta), `S = S + k v^T`,
//! `out = scale * (S^T q)`, every `S^T x` a canonical dot over `dk` (contract `canonical-sum`).
//! Outputs: `[B, T, Hq * dv]` in the query's dtype and the last state in `past_state`'s dtype
//! (the query's without one).

use crate::registry::Registry;
use crate::staging::{f32_values, store_f32};
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{Value, ValueType};
use samebits_kernels::canonical_dot_strided;
use samebits_math::UnaryFn;

const OP: &str = "LinearAttention";

pub fn register(r: &mut Registry) {
    r.register("", OP, LinearAttention::build);
}

#[derive(Debug)]
struct LinearAttention {
    q_heads: usize,
    kv_heads: usize,
    /// 0: `1 / sqrt(dk)`.
    scale: f32,
    gated: bool,
    delta: bool,
}

impl LinearAttention {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let heads = |name: &str| -> Result<usize> {
            match args.int(name)? {
                Some(n) if n > 0 => Ok(n as usize),
                Some(n) => bail!("{OP}: attribute \"{name}\" must be positive, got {n}"),
                None => bail!("{OP}: the attribute \"{name}\" is required"),
            }
        };
        let (q_heads, kv_heads) = (heads("q_num_heads")?, heads("kv_num_heads")?);
        if !q_heads.is_multiple_of(kv_heads) {
            bail!("{OP}: q_num_heads {q_heads} is not a multiple of kv_num_heads {kv_heads}");
        }
        let (gated, delta) = match args
            .string_or("update_rule", "gated_delta".into())?
            .as_str()
        {
            "linear" => (false, false),
            "gated" => (true, false),
            "delta" => (false, true),
            "gated_delta" => (true, true),
            other => bail!(
                "{OP}: attribute \"update_rule\" must be linear, gated, delta or gated_delta, \
                 got {other:?}"
            ),
        };
        Ok(Box::new(LinearAttention {
            q_heads,
            kv_heads,
            scale: args.float_or("scale", 0.0)?,
            gated,
            delta,
        }))
    }
}

/// `[B, T, width]` of input `i` (`name`), with `width` one of `widths`.
fn check_3d(shape: &[usize], b: usize, t: usize, widths: &[usize], name: &str) -> Result<usize> {
    match *shape {
        [sb, st, w] if sb == b && st == t && widths.contains(&w) => Ok(w),
        _ => bail!("{OP}: {name} must be [{b}, {t}, one of {widths:?}], got {shape:?}"),
    }
}

impl Op for LinearAttention {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = |i: usize| inputs.get(i).cloned().flatten().and_then(|t| t.dtype());
        let state = dtype(3).or(dtype(0));
        Ok(vec![
            dtype(0).map(|d| ValueType::tensor(d, None)),
            state.map(|d| ValueType::tensor(d, None)),
        ])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (q, k, v) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        let (hq, hkv) = (self.q_heads, self.kv_heads);
        let &[b, t, q_width] = q.shape() else {
            bail!(
                "{OP}: query must be [batch, length, heads * size], got {:?}",
                q.shape()
            );
        };
        if !q_width.is_multiple_of(hq) {
            bail!("{OP}: query width {q_width} is not a multiple of q_num_heads {hq}");
        }
        let dk = q_width / hq;
        check_3d(k.shape(), b, t, &[hkv * dk], "key")?;
        let v_width = match *v.shape() {
            [vb, vt, w] if vb == b && vt == t && w.is_multiple_of(hkv) => w,
            _ => bail!(
                "{OP}: value must be [{b}, {t}, kv_num_heads * size], got {:?}",
                v.shape()
            ),
        };
        let dv = v_width / hkv;
        let optional =
            |i: usize, wanted: bool, name: &str, rule: &str| match inputs.opt_tensor(i)? {
                Some(x) if wanted => Ok(Some(x)),
                None if !wanted => Ok(None),
                Some(_) => bail!("{OP}: the update rule forbids input {name} (it is {rule})"),
                None => bail!("{OP}: the update rule needs input {name} (it is {rule})"),
            };
        let decay = optional(4, self.gated, "decay", "gated or gated_delta only")?;
        let beta = optional(5, self.delta, "beta", "delta or gated_delta only")?;
        let decay_width = match decay {
            Some(d) => check_3d(d.shape(), b, t, &[hkv * dk, hkv], "decay")?,
            None => 0,
        };
        let beta_width = match beta {
            Some(x) => check_3d(x.shape(), b, t, &[hkv, 1], "beta")?,
            None => 0,
        };
        let past = inputs.opt_tensor(3)?;
        if let Some(p) = past
            && p.shape() != [b, hkv, dk, dv]
        {
            bail!(
                "{OP}: past_state must be [{b}, {hkv}, {dk}, {dv}], got {:?}",
                p.shape()
            );
        }
        check_tensor_size(&format!("{OP} output"), &[b, t, hq, dv], q.dtype())?;
        check_tensor_size(&format!("{OP} state"), &[b, hkv, dk, dv], q.dtype())?;
        let (qv, kv, vv) = (
            f32_values(q, "query")?,
            f32_values(k, "key")?,
            f32_values(v, "value")?,
        );
        let decay = decay.map(|d| f32_values(d, "decay")).transpose()?;
        let beta = beta.map(|x| f32_values(x, "beta")).transpose()?;
        let mut state = match past {
            Some(p) => f32_values(p, "past_state")?.into_owned(),
            None => vec![0.0f32; b * hkv * dk * dv],
        };
        let scale = match self.scale {
            0.0 => 1.0 / (dk as f32).sqrt(),
            s => s,
        };
        let group = hq / hkv;
        let mut out = vec![0.0f32; b * t * hq * dv];
        let mut new_v = vec![0.0f32; dv];
        for bi in 0..b {
            for h in 0..hkv {
                let s = &mut state[(bi * hkv + h) * dk * dv..][..dk * dv];
                for ti in 0..t {
                    let row = bi * t + ti;
                    let key = &kv[(row * hkv + h) * dk..][..dk];
                    let val = &vv[(row * hkv + h) * dv..][..dv];
                    if let Some(decay) = &decay {
                        for (d, s_row) in s.chunks_exact_mut(dv).enumerate() {
                            let g = match decay_width == hkv {
                                true => decay[row * hkv + h],
                                false => decay[(row * hkv + h) * dk + d],
                            };
                            let e = UnaryFn::Exp.eval(g);
                            s_row.iter_mut().for_each(|x| *x *= e);
                        }
                    }
                    match &beta {
                        Some(beta) => {
                            let bt = beta[row * beta_width + if beta_width == 1 { 0 } else { h }];
                            for (m, nv) in new_v.iter_mut().enumerate() {
                                let retrieved = canonical_dot_strided(&s[m..], dv, key, 1, dk);
                                *nv = bt * (val[m] - retrieved);
                            }
                        }
                        None => new_v.copy_from_slice(val),
                    }
                    for (d, s_row) in s.chunks_exact_mut(dv).enumerate() {
                        for (x, &nv) in s_row.iter_mut().zip(&new_v) {
                            *x += key[d] * nv;
                        }
                    }
                    for qh in h * group..(h + 1) * group {
                        let query = &qv[(row * hq + qh) * dk..][..dk];
                        let y = &mut out[(row * hq + qh) * dv..][..dv];
                        for (m, ym) in y.iter_mut().enumerate() {
                            *ym = scale * canonical_dot_strided(&s[m..], dv, query, 1, dk);
                        }
                    }
                }
            }
        }
        let state_dtype = past.map_or(q.dtype(), |p| p.dtype());
        Ok(vec![
            store_f32(q.dtype(), vec![b, t, hq * dv], out)?.into(),
            store_f32(state_dtype, vec![b, hkv, dk, dv], state)?.into(),
        ])
    }
}
