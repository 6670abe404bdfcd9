//! `samebits::RaggedAttention` on the device: the attention of several sequences in one step
//! (a batched decoder's, samebits-llm `batched.rs`), each sequence's rows over its own KV cache.
//!
//! Inputs: Q, K, V `[1, R, heads * size]` with every sequence's rows one after the other, the
//! rows per sequence (`[B]`, on the host), and the past keys and values as sequences of B
//! caches, each a cache storage prefix (`DeviceValue::Kv`), a dense device tensor or a host
//! tensor. Each sequence's cache extends as a lone step's would (`kv_extend`: in place when it
//! has room), then one launch (`sb_ragged_attention`) runs every sequence's blocks: each runs
//! the very block code a lone Attention launch runs (`sb_attention_block`) on its own rows and
//! storage, so its bits are the lone step's (docs/contract.md, "Ragged batches"). Outputs: Y
//! `[1, R, q_heads * v_size]` and the present keys and values as device sequences of the
//! extended storages, which the next step takes as they are.
//!
//! The step falls back to the CPU op (before touching any cache) when its inputs are not
//! these: other ranks or dtypes, a sequence without rows, or score rows beyond one block's
//! shared memory.

use std::sync::Arc;

use samebits_ir::{DType, Tensor, Value};
use samebits_ops::{AttentionHeads, PlanStep};

use super::dispatch::{GROUPED_ATTENTION_MIN_QUERIES, f32_input, past_of};
use super::{CudaExecutor, DeviceTensor, DeviceValue, IoValue, RunStats, Slot, arg_info};
use crate::attention::{HeadsLayout, KvLease, KvPast, KvSite, RaggedPart, attention_rows};
use crate::error::Result;

/// One cache of the past: on the host or on the device.
enum PastItem {
    Host(Tensor),
    Device(Arc<DeviceValue>),
}

impl PastItem {
    fn shape(&self) -> Option<&[usize]> {
        match self {
            PastItem::Host(t) => (t.dtype() == DType::F32).then(|| t.shape()),
            PastItem::Device(d) => d.info().filter(|i| i.dtype == DType::F32).map(|i| i.shape),
        }
    }
}

/// The caches a slot holds: a host sequence, or a device sequence of host or device tensors.
fn past_items(slot: &Slot) -> Option<Vec<PastItem>> {
    if let Some(device) = &slot.device {
        let DeviceValue::Sequence(items) = device.as_ref() else {
            return None;
        };
        return items
            .iter()
            .map(|item| match item {
                IoValue::Host(Value::Tensor(t)) => Some(PastItem::Host(t.clone())),
                IoValue::Device(t) => Some(PastItem::Device(Arc::clone(&t.0))),
                IoValue::Host(_) => None,
            })
            .collect();
    }
    match &slot.host {
        Some(Value::Sequence(ts)) => Some(ts.iter().cloned().map(PastItem::Host).collect()),
        _ => None,
    }
}

/// A sequence's past keys and values, as a launch takes them.
type Pasts = (Option<Arc<DeviceValue>>, Option<Arc<DeviceValue>>);

fn past((keys, values): &Pasts) -> Result<(KvPast<'_>, KvPast<'_>)> {
    Ok((past_of(keys.as_deref(), 4)?, past_of(values.as_deref(), 5)?))
}

/// One sequence's part of the step: its layouts and its first row.
struct Part {
    heads: AttentionHeads,
    first: usize,
}

impl CudaExecutor {
    /// Runs a RaggedAttention step on the device (module docs); `false`, with nothing
    /// changed, when its inputs are not ones the device takes (the CPU op runs it then).
    pub(super) fn run_ragged(
        &self,
        step: &PlanStep,
        causal: bool,
        (q_heads, kv_heads): (usize, usize),
        scale: Option<f32>,
        slots: &mut [Slot],
        stats: &mut RunStats,
    ) -> Result<bool> {
        let (
            [
                Some(q),
                Some(k),
                Some(v),
                Some(rows),
                Some(past_k),
                Some(past_v),
            ],
            [y, pk, pv],
        ) = (step.inputs, step.outputs)
        else {
            return Ok(false);
        };
        let (q, k, v, rows) = (*q, *k, *v, *rows);
        let Some(Ok(rows)) = slots[rows].host.as_ref().map(|r| {
            r.as_tensor()
                .and_then(|t| t.to_i64_vec())
                .map_err(|e| e.to_string())
        }) else {
            return Ok(false);
        };
        let rows: Vec<usize> = match rows.iter().map(|&n| usize::try_from(n)).collect() {
            Ok(rows) => rows,
            Err(_) => return Ok(false),
        };
        let shape_of = |s: usize| {
            arg_info(&slots[s])
                .filter(|a| a.dtype == DType::F32 && a.shape.len() == 3 && a.shape[0] == 1)
                .map(|a| a.shape.to_vec())
        };
        let (Some(qs), Some(ks), Some(vs)) = (shape_of(q), shape_of(k), shape_of(v)) else {
            return Ok(false);
        };
        let total_rows: usize = rows.iter().sum();
        if [qs[1], ks[1], vs[1]] != [total_rows; 3] {
            return Ok(false);
        }
        let (Some(keys), Some(values)) = (past_items(&slots[*past_k]), past_items(&slots[*past_v]))
        else {
            return Ok(false);
        };
        if keys.len() != rows.len() || values.len() != rows.len() {
            return Ok(false);
        }
        // Every sequence's layouts, checked before any cache changes.
        let (Ok(q_num), Ok(kv_num)) = (i64::try_from(q_heads), i64::try_from(kv_heads)) else {
            return Ok(false);
        };
        let mut parts = Vec::with_capacity(rows.len());
        let mut first = 0;
        for (b, &n) in rows.iter().enumerate() {
            let (Some(pk_shape), Some(pv_shape)) = (keys[b].shape(), values[b].shape()) else {
                return Ok(false);
            };
            let at = |width: usize| [1, n, width];
            let (qb, kb, vb) = (at(qs[2]), at(ks[2]), at(vs[2]));
            let Ok(heads) =
                AttentionHeads::resolve([&qb, &kb, &vb], Some([pk_shape, pv_shape]), q_num, kv_num)
            else {
                return Ok(false);
            };
            if n == 0 || heads.q.size == 0 || heads.v.size == 0 {
                return Ok(false);
            }
            parts.push(Part { heads, first });
            first += n;
        }
        // One launch for every sequence: the score rows of the longest must fit a block; heads
        // are grouped per block when some sequence brings many queries.
        let Some(lead) = parts.first().map(|p| &p.heads) else {
            return Ok(false);
        };
        let (group, d, dv) = (lead.q.heads / lead.k.heads, lead.q.size, lead.v.size);
        let longest = parts.iter().map(|p| p.heads.past + p.heads.q.seq).max();
        let Some(widest) = attention_rows(group, longest.unwrap_or(0), d, dv) else {
            return Ok(false);
        };
        let most_rows = parts.iter().map(|p| p.heads.q.seq).max().unwrap_or(0);
        let per_block = match most_rows >= GROUPED_ATTENTION_MIN_QUERIES {
            true => widest,
            false => 1,
        };
        let y_width = lead.y_shape[2];
        // The device values: the new rows, and each past cache (host ones uploaded, empty ones
        // none).
        let new = [q, k, v]
            .into_iter()
            .map(|s| self.on_device(slots, s, false, stats).map(Some))
            .collect::<Result<Vec<_>>>()?;
        let new: Vec<Option<&DeviceValue>> = new.iter().map(Option::as_deref).collect();
        let (qb, kb, vb) = (
            f32_input(&new, 0)?.0,
            f32_input(&new, 1)?.0,
            f32_input(&new, 2)?.0,
        );
        let mut device_past = |item: &PastItem| -> Result<Option<Arc<DeviceValue>>> {
            Ok(match item {
                PastItem::Host(t) if t.shape().get(2) == Some(&0) => None,
                PastItem::Host(t) => {
                    stats.uploads += 1;
                    stats.upload_bytes += t.bytes().map_or(0, <[u8]>::len);
                    Some(Arc::new(self.upload_value(t)?))
                }
                PastItem::Device(d) => Some(Arc::clone(d)),
            })
        };
        let mut pasts = Vec::with_capacity(parts.len());
        for (key, value) in keys.iter().zip(&values) {
            pasts.push((device_past(key)?, device_past(value)?));
        }
        let mut extended = Vec::with_capacity(parts.len());
        for (sequence, (part, pasts)) in parts.iter().zip(&pasts).enumerate() {
            let h = &part.heads;
            let site = KvSite {
                step: step as *const PlanStep as usize,
                sequence,
            };
            extended.push(self.backend.kv_extend(past(pasts)?, (h.k, h.v), site)?);
        }
        let ragged: Vec<RaggedPart> = parts
            .iter()
            .zip(&extended)
            .map(|(part, (storage, past))| RaggedPart {
                storage,
                past: *past,
                first: part.first,
                rows: part.heads.q.seq,
            })
            .collect();
        let mut out = self.backend.alloc(total_rows * y_width)?;
        let layout = |heads: usize, size: usize| HeadsLayout::split(1, total_rows, heads, size);
        let (q_heads, kv_heads) = (lead.q.heads, lead.k.heads);
        self.backend.ragged_attention(
            (qb, layout(q_heads, d)),
            (kb, layout(kv_heads, d)),
            (vb, layout(kv_heads, dv)),
            (&mut out, layout(q_heads, dv)),
            &ragged,
            (causal, lead.scale(scale)),
            per_block,
        )?;
        stats.device_launches += 1;
        let (mut present_keys, mut present_values) = (Vec::new(), Vec::new());
        for (part, (storage, past)) in parts.iter().zip(extended) {
            let h = &part.heads;
            let total = past + h.q.seq;
            let present = |values: bool, size: usize| {
                IoValue::Device(DeviceTensor(Arc::new(DeviceValue::Kv {
                    storage: KvLease::new(&storage),
                    values,
                    len: total,
                    shape: vec![1, h.k.heads, total, size],
                })))
            };
            present_keys.push(present(false, h.k.size));
            present_values.push(present(true, h.v.size));
        }
        let device = |value: DeviceValue| Slot {
            host: None,
            device: Some(Arc::new(value)),
        };
        slots[*y] = device(DeviceValue::F32 {
            buffer: Arc::new(out),
            shape: vec![1, total_rows, y_width],
        });
        slots[*pk] = device(DeviceValue::Sequence(present_keys));
        slots[*pv] = device(DeviceValue::Sequence(present_values));
        Ok(true)
    }
}
