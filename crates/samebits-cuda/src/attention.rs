//! RotaryEmbedding and Attention on the device (contract section `attention`, the bits of
//! `crates/samebits-ops/src/families/attention.rs`), and the device-resident KV cache they
//! append to (kernels/attention.cu).
//!
//! - [`HeadsLayout`] (samebits-ops resolves it from a shape, for its CPU op too): a
//!   `[batch, heads, seq, size]` view of a dense buffer, 4-D as is or 3-D
//!   `[batch, seq, heads * size]` split into heads.
//! - [`CudaBackend::rotary`]: RotaryEmbedding without `position_ids`.
//! - [`KvStorage`]: one layer's cache, keys and values `[batch, heads, capacity, size]`. A
//!   present key or value is a prefix of one; `kv_extend` makes room for a step's new positions
//!   in place when the past is the storage's latest prefix and fits, and otherwise copies the
//!   past into new storage (twice the length, so decode reallocates rarely); the step's
//!   attention launch then stores them. An older prefix stays valid: appending never writes
//!   below the filled length. The filled length also lives on the device, read and advanced by
//!   the attention launch, so a recorded decode step replays at any length.
//! - [`KvLease`]: a cache value's hold on its storage. When a storage's last lease goes (its
//!   sequence finished or moved to a larger storage) it waits among the backend's idle
//!   storages, and a later new storage of its shape is one of them instead of a fresh
//!   allocation: the one most recently let go by the same step ([`KvSite`]), else the one
//!   most recently let go. So a server's next request gets, layer for layer, the storages of
//!   the request that finished last, and with them the decode step recorded for them (a CUDA
//!   graph is bound to its storages, `executor/graph.rs`): it replays from its first decode
//!   step instead of rehearsing and recording again. The contents never matter (attention
//!   reads only filled positions). Storages idle for a whole trim interval are let go.
//! - [`CudaBackend::attention`]: causal or not, grouped-query, over keys and values read
//!   through strides (a cache storage or a dense tensor); one launch, or for long score rows
//!   two with the keys split over blocks ([`AttentionShape::split`]); optionally computing the
//!   GGUF product of its output too ([`AttentionProduct`]).

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use samebits_ggml::GgmlType;

pub use samebits_ops::HeadsLayout;

use crate::backend::{BLOCK, CudaBackend, blocks_for, launch_1d};
use crate::buffer::{DeviceBuffer, DeviceBytes, TRIM_INTERVAL};
use crate::device_abi::device_struct;
use crate::error::{CudaError, Result};
use crate::gguf::gguf_supported;

/// Dynamic shared memory an attention block may take: 48 KiB without opting in to more, less
/// the static shared memory of the block reductions (canonical.cu).
const ATTENTION_SHARED_MAX: usize = 47 * 1024;
/// Keys per reduction tile (contract: canonical-sum).
const TILE: usize = samebits_kernels::REDUCTION_TILE;
/// Positions a new cache storage holds at least.
const KV_MIN_CAPACITY: usize = 256;

device_struct! {
    /// Strides of one tensor: batch, head, position (the feature stride is 1).
    pub(crate) struct SbStrides {
        b: i64,
        h: i64,
        s: i64,
    }
}

impl From<HeadsLayout> for SbStrides {
    fn from(layout: HeadsLayout) -> Self {
        let [b, h, s] = layout.strides.map(|stride| stride as i64);
        SbStrides { b, h, s }
    }
}

/// The KV cache storage of one attention layer: keys `[batch, heads, capacity, key_size]` and
/// values `[batch, heads, capacity, value_size]`, their first `filled` positions written. On
/// the device a counter `[filled, ticket]` mirrors `filled`: the step's append reads it and its
/// attention kernel advances it, so a recorded step (CUDA graph) replays at any length.
pub struct KvStorage {
    state: Mutex<KvState>,
    batch: usize,
    heads: usize,
    capacity: usize,
    key_size: usize,
    value_size: usize,
    /// Cache values holding it ([`KvLease`]).
    leases: AtomicUsize,
    /// The step that last took it.
    site: Mutex<KvSite>,
    /// Where it waits once no value holds it (the backend's).
    idle: Weak<IdleStorages>,
}

struct KvState {
    keys: DeviceBuffer,
    values: DeviceBuffer,
    counter: DeviceBytes,
    filled: usize,
}

impl KvStorage {
    /// The view of the keys (or values) at positions `0 .. len`.
    pub fn layout(&self, values: bool, len: usize) -> HeadsLayout {
        let size = if values {
            self.value_size
        } else {
            self.key_size
        };
        HeadsLayout {
            batch: self.batch,
            heads: self.heads,
            seq: len,
            size,
            strides: [
                self.heads * self.capacity * size,
                self.capacity * size,
                size,
            ],
        }
    }

    /// Positions the storage holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Positions written so far (the host's mirror of the device counter).
    pub fn filled(&self) -> usize {
        self.state.lock().expect("kv storage lock").filled
    }

    /// Runs `f` on the keys, the values and the counter.
    pub(crate) fn with_buffers<T>(
        &self,
        f: impl FnOnce(&DeviceBuffer, &DeviceBuffer, &DeviceBytes) -> T,
    ) -> T {
        let state = self.state.lock().expect("kv storage lock");
        f(&state.keys, &state.values, &state.counter)
    }

    /// Advances the host mirror by `new_len` positions if `len` is the filled length and the
    /// storage has room (a replayed step appends in place); false otherwise.
    pub(crate) fn advance(&self, len: usize, new_len: usize) -> bool {
        let mut state = self.state.lock().expect("kv storage lock");
        let fits = state.filled == len && len + new_len <= self.capacity;
        if fits {
            state.filled = len + new_len;
        }
        fits
    }
}

/// A cache value's hold on its storage (module docs); derefs to the storage.
pub struct KvLease(Arc<KvStorage>);

impl KvLease {
    pub(crate) fn new(storage: &Arc<KvStorage>) -> Self {
        storage.leases.fetch_add(1, Ordering::AcqRel);
        KvLease(Arc::clone(storage))
    }
}

impl Clone for KvLease {
    fn clone(&self) -> Self {
        KvLease::new(&self.0)
    }
}

impl Deref for KvLease {
    type Target = Arc<KvStorage>;

    fn deref(&self) -> &Arc<KvStorage> {
        &self.0
    }
}

impl Drop for KvLease {
    fn drop(&mut self) {
        if self.0.leases.fetch_sub(1, Ordering::AcqRel) == 1
            && let Some(idle) = self.0.idle.upgrade()
        {
            idle.push(Arc::clone(&self.0));
        }
    }
}

/// The step a cache storage serves: the address of the executor's launch or plan step (stable
/// while the executor lives) and the sequence's place in a ragged batch. It only chooses which
/// idle storage a step takes (module docs), never what a step computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KvSite {
    pub step: usize,
    pub sequence: usize,
}

/// Storages no cache value holds, in the order they became idle, each with that time (module
/// docs).
#[derive(Default)]
pub(crate) struct IdleStorages(Mutex<VecDeque<(Arc<KvStorage>, Instant)>>);

impl IdleStorages {
    fn push(&self, storage: Arc<KvStorage>) {
        let expired = {
            let mut idle = self.0.lock().expect("idle storages lock");
            idle.push_back((storage, Instant::now()));
            Self::expired(&mut idle)
        };
        drop(expired);
    }

    /// An idle storage for keys `kl` and values `vl` holding at least `least` positions (and
    /// at most four times that, so that a long sequence's storage does not serve short ones):
    /// the one `site` let go last, else the one let go last; taken out of the list and given
    /// to `site`.
    fn take(
        &self,
        kl: HeadsLayout,
        vl: HeadsLayout,
        least: usize,
        site: KvSite,
    ) -> Option<Arc<KvStorage>> {
        let (found, expired) = {
            let mut idle = self.0.lock().expect("idle storages lock");
            let expired = Self::expired(&mut idle);
            let fits = |s: &KvStorage| {
                (s.batch, s.heads, s.key_size, s.value_size)
                    == (kl.batch, kl.heads, kl.size, vl.size)
                    && (least..=4 * least).contains(&s.capacity)
            };
            let last = |same_site: bool| {
                idle.iter().rposition(|(s, _)| {
                    fits(s) && (!same_site || *s.site.lock().expect("kv site lock") == site)
                })
            };
            let found = last(true)
                .or_else(|| last(false))
                .and_then(|i| idle.remove(i))
                .map(|(s, _)| s);
            (found, expired)
        };
        drop(expired);
        if let Some(storage) = &found {
            *storage.site.lock().expect("kv site lock") = site;
        }
        found
    }

    /// Takes out the storages idle for a whole [`TRIM_INTERVAL`] (freed by the caller, outside
    /// the lock; a recorded graph may still hold one until it goes).
    fn expired(idle: &mut VecDeque<(Arc<KvStorage>, Instant)>) -> Vec<Arc<KvStorage>> {
        let now = Instant::now();
        let mut expired = Vec::new();
        while idle
            .front()
            .is_some_and(|(_, since)| now.duration_since(*since) >= TRIM_INTERVAL)
        {
            expired.extend(idle.pop_front().map(|(s, _)| s));
        }
        expired
    }
}

/// One side (keys or values) of Attention's past: none, a dense tensor or a storage prefix.
pub(crate) enum KvPast<'a> {
    None,
    Dense(&'a DeviceBuffer, HeadsLayout),
    Storage {
        storage: &'a Arc<KvStorage>,
        values: bool,
        len: usize,
    },
}

impl KvPast<'_> {
    fn len(&self) -> usize {
        match self {
            KvPast::None => 0,
            KvPast::Dense(_, l) => l.seq,
            KvPast::Storage { len, .. } => *len,
        }
    }
}

/// Largest number of query heads (a divisor of `group`) one attention block can take within
/// its shared memory, for score rows of `stride` keys of `d` features and values of `dv`;
/// `None` if even one does not fit (the step then runs on the CPU).
pub fn attention_rows(group: usize, stride: usize, d: usize, dv: usize) -> Option<usize> {
    (1..=group)
        .rev()
        .filter(|r| group.is_multiple_of(*r))
        .find(|&r| attention_shared_bytes(r, stride, d, dv) <= ATTENTION_SHARED_MAX)
}

fn attention_shared_bytes(rows: usize, stride: usize, d: usize, dv: usize) -> usize {
    let round_tiles = (BLOCK as usize / dv.max(1)).max(1);
    4 * (rows * d + rows * stride + round_tiles * rows * dv + rows * dv)
}

/// The new keys and values of an attention step: buffers and their views.
pub type NewKv<'a> = (
    (&'a DeviceBuffer, HeadsLayout),
    (&'a DeviceBuffer, HeadsLayout),
);

/// How one attention launch runs: causal or not, the scale, the step's new keys, query heads
/// per block, and whether the keys are split over blocks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionShape {
    pub causal: bool,
    pub scale: f32,
    /// Keys and values of this step, after the past ones.
    pub new_len: usize,
    /// Query heads per block, a divisor of the group size ([`attention_rows`]).
    pub rows: usize,
    /// 0: one block computes all keys of its rows; else 64-key tiles per block of the split
    /// launches (a chunk of the keys each; [`attention_split_fits`]).
    pub split: usize,
}

device_struct! {
    /// One sequence of a ragged attention launch (kernels/attention.cu `sb_ragged_attention`):
    /// its cache storage's keys, values and `[filled, ticket]` counter with their strides, and
    /// its rows of the launch's queries, new keys and values, and outputs. Uploaded as bytes:
    /// every field is 8 bytes but the two last, so the struct has no padding.
    pub(crate) struct SbRaggedSequence {
        k: u64 as "float*",
        v: u64 as "float*",
        counter: u64 as "int*",
        ks: SbStrides,
        vs: SbStrides,
        /// Its first row.
        first: i64,
        rows: i32,
        /// Zero (the struct's size stays a multiple of 8 without padding).
        pad: i32,
    }
}

/// One sequence of [`CudaBackend::ragged_attention`]: its cache storage, already extended for
/// its rows by [`CudaBackend::kv_extend`], the positions before them, and its rows.
pub(crate) struct RaggedPart<'a> {
    pub storage: &'a KvStorage,
    pub past: usize,
    pub first: usize,
    pub rows: usize,
}

/// A GGUF product fused after a decode attention (one query head per block, heads of 64
/// values, the output `y` 3-D `[batch, queries, heads * 64]`): `out = y · Wᵀ`, plus `add`
/// (`[batch * queries, rows]`) when given, returned instead of `y` (kernels/attention.cu,
/// `sb_attention_product`: head h's outputs are the 64-term tile h of every dot).
#[derive(Clone, Copy)]
pub struct AttentionProduct<'a> {
    pub ggml_type: GgmlType,
    pub w: &'a DeviceBytes,
    pub rows: usize,
    pub add: Option<&'a DeviceBuffer>,
}

device_struct! {
    /// The output product fused into attention (kernels/attention.cu `sb_attention_product`).
    pub(crate) struct SbAttentionProduct {
        w: u64 as "const unsigned char*",
        add: u64 as "const float*",
        out: u64 as "float*",
        /// [query rows, heads, rows]
        partials: u64 as "float*",
        /// one per query row, zero
        tickets: u64 as "unsigned*",
        row_bytes: i64,
        rows: i32,
        ggml_type: i32,
    }
}

/// Whether the split launches take score rows of `stride` keys for `rows` query heads per
/// block, `split` key tiles per block.
pub fn attention_split_fits(rows: usize, stride: usize, d: usize, split: usize) -> bool {
    let scores = 4 * rows * (d + split * TILE);
    let values = 4 * rows * (stride + stride.div_ceil(TILE) + 2);
    split > 0 && scores <= ATTENTION_SHARED_MAX && values <= ATTENTION_SHARED_MAX
}

impl CudaBackend {
    /// The attention of several sequences in one launch (`sb_ragged_attention`): sequence `p`
    /// of `parts` has rows `first .. first + rows` of the queries `q`, the new keys and values
    /// and the outputs `y` (3-D `[1, R, heads * size]` layouts over dense buffers), attends to
    /// its storage's `past` positions and its own rows (causal or not), stores its new keys
    /// and values there and advances the storage's counter: each sequence computes what
    /// [`CudaBackend::attention`] computes for it alone. `rows` query heads per block (a
    /// divisor of the group size whose score rows of the longest sequence fit).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ragged_attention(
        &self,
        q: (&DeviceBuffer, HeadsLayout),
        k_new: (&DeviceBuffer, HeadsLayout),
        v_new: (&DeviceBuffer, HeadsLayout),
        (out, y): (&mut DeviceBuffer, HeadsLayout),
        parts: &[RaggedPart],
        (causal, scale): (bool, f32),
        rows: usize,
    ) -> Result<()> {
        let (ql, kl, vl) = (q.1, k_new.1, v_new.1);
        let stride = parts.iter().map(|p| p.past + p.rows).max().unwrap_or(0);
        let most_rows = parts.iter().map(|p| p.rows).max().unwrap_or(0);
        let total_rows: usize = parts.iter().map(|p| p.rows).sum();
        let group = ql.heads.checked_div(kl.heads).unwrap_or(0);
        let d = ql.size;
        let valid = kl.heads > 0
            && ql.heads.is_multiple_of(kl.heads)
            && [ql.batch, kl.batch, vl.batch, y.batch] == [1; 4]
            && [ql.seq, kl.seq, vl.seq, y.seq] == [total_rows; 4]
            && vl.heads == kl.heads
            && (y.heads, y.size) == (ql.heads, vl.size)
            && kl.size == d
            && d > 0
            && vl.size > 0
            && rows > 0
            && group.is_multiple_of(rows)
            && attention_shared_bytes(rows, stride, d, vl.size) <= ATTENTION_SHARED_MAX
            && q.0.len() >= ql.len()
            && k_new.0.len() >= kl.len()
            && v_new.0.len() >= vl.len()
            && out.len() >= y.len()
            && parts.len() <= 65_535
            && most_rows <= i32::MAX as usize
            && parts
                .iter()
                .scan(0, |first, p| {
                    let ok = p.first == *first
                        && p.rows > 0
                        && p.past + p.rows <= p.storage.capacity()
                        && (p.storage.batch, p.storage.heads) == (1, kl.heads)
                        && (p.storage.key_size, p.storage.value_size) == (d, vl.size);
                    *first += p.rows;
                    Some(ok)
                })
                .all(|ok| ok);
        if !valid || parts.is_empty() {
            return Err(CudaError::Invalid(format!(
                "ragged attention: q {ql:?}, new keys {kl:?}, values {vl:?}, y {y:?}, {} \
                 sequences, {rows} rows per block",
                parts.len()
            )));
        }
        let stream = self.stream();
        let mut seqs = Vec::with_capacity(parts.len());
        for p in parts {
            seqs.push(
                p.storage
                    .with_buffers(|keys, values, counter| SbRaggedSequence {
                        k: keys.slice().device_ptr(stream).0,
                        v: values.slice().device_ptr(stream).0,
                        counter: counter.slice().device_ptr(stream).0,
                        ks: p.storage.layout(false, 0).into(),
                        vs: p.storage.layout(true, 0).into(),
                        first: p.first as i64,
                        rows: p.rows as i32,
                        pad: 0,
                    }),
            );
        }
        // SAFETY: SbRaggedSequence is #[repr(C)] plain numbers without padding (its doc).
        let bytes = unsafe {
            std::slice::from_raw_parts(
                seqs.as_ptr().cast::<u8>(),
                std::mem::size_of_val(seqs.as_slice()),
            )
        };
        let seqs = self.upload_bytes(bytes)?;
        let ints = [stride, d, vl.size, group, rows].map(|v| v as i32);
        let (causal, kv_heads) = (i32::from(causal), kl.heads as i32);
        let vec4 = i32::from(d.is_multiple_of(4));
        let (qs, kns, vns, ys) = (
            SbStrides::from(ql),
            SbStrides::from(kl),
            SbStrides::from(vl),
            SbStrides::from(y),
        );
        let f = self.function("sb_ragged_attention")?;
        let config = LaunchConfig {
            grid_dim: (
                most_rows as u32,
                (ql.heads / rows) as u32,
                parts.len() as u32,
            ),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: attention_shared_bytes(rows, stride, d, vl.size) as u32,
        };
        let mut launch = stream.launch_builder(&f);
        launch
            .arg(q.0.slice())
            .arg(&qs)
            .arg(k_new.0.slice())
            .arg(&kns)
            .arg(v_new.0.slice())
            .arg(&vns)
            .arg(out.slice_mut())
            .arg(&ys)
            .arg(seqs.slice())
            .arg(&ints[0])
            .arg(&ints[1])
            .arg(&ints[2])
            .arg(&ints[3])
            .arg(&ints[4])
            .arg(&causal)
            .arg(&scale)
            .arg(&kv_heads)
            .arg(&vec4);
        // SAFETY: the views were checked above: the rows of every sequence lie inside the
        // dense buffers, each storage holds its past and new positions, and the shared memory
        // holds score rows of the longest sequence; one block per (row, head group, sequence),
        // those past a sequence's rows returning at once; each storage's counter is read, then
        // advanced by its sequence's last block.
        unsafe { launch.launch(config)? };
        Ok(())
    }

    /// RotaryEmbedding of `x` (dense, viewed as `layout`) with the cos / sin caches
    /// (`[rows, width]`, row `b * seq + s` for batch `b`, position `s`): the pairs of the first
    /// `rot` features rotated, the rest copied. Output in `x`'s layout.
    #[allow(clippy::too_many_arguments)]
    pub fn rotary(
        &self,
        x: &DeviceBuffer,
        layout: HeadsLayout,
        cos: &DeviceBuffer,
        sin: &DeviceBuffer,
        width: usize,
        rot: usize,
        interleaved: bool,
    ) -> Result<DeviceBuffer> {
        let rows = layout.batch * layout.seq;
        if x.len() != layout.len()
            || rot > layout.size
            || !rot.is_multiple_of(2)
            || cos.len() != sin.len()
            || width < rot / 2
            || (rot > 0 && cos.len() < rows * width)
        {
            return Err(CudaError::Invalid(format!(
                "rotary: x of {} values as {layout:?}, rotary width {rot}, caches of {} and {} \
                 values with rows of {width}",
                x.len(),
                cos.len(),
                sin.len()
            )));
        }
        let mut y = self.alloc(x.len())?;
        if y.is_empty() {
            return Ok(y);
        }
        let f = self.function("sb_rotary")?;
        let count = layout.len() as i64;
        let dims = [layout.heads, layout.seq, layout.size, rot, width].map(|v| v as i32);
        let interleaved = i32::from(interleaved);
        let s = SbStrides::from(layout);
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(x.slice())
            .arg(cos.slice())
            .arg(sin.slice())
            .arg(y.slice_mut())
            .arg(&count)
            .arg(&dims[0])
            .arg(&dims[1])
            .arg(&dims[2])
            .arg(&dims[3])
            .arg(&interleaved)
            .arg(&dims[4])
            .arg(&s.b)
            .arg(&s.h)
            .arg(&s.s);
        // SAFETY: grid-stride over the elements of x / y (same layout); cache rows checked above.
        unsafe { launch.launch(launch_1d(blocks_for(layout.len()), 0))? };
        Ok(y)
    }

    /// Copies `src` (viewed as `from`) into `dst` (viewed as `to`, same batch, heads and size)
    /// at positions `first ..`.
    fn heads_copy(
        &self,
        src: &DeviceBuffer,
        from: HeadsLayout,
        dst: &mut DeviceBuffer,
        to: HeadsLayout,
        first: usize,
    ) -> Result<()> {
        if from.is_empty() {
            return Ok(());
        }
        let f = self.function("sb_heads_copy")?;
        let count = from.len() as i64;
        let dims = [from.heads, from.seq, from.size, first].map(|v| v as i32);
        let (s, d) = (SbStrides::from(from), SbStrides::from(to));
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(src.slice())
            .arg(dst.slice_mut())
            .arg(&count)
            .arg(&dims[0])
            .arg(&dims[1])
            .arg(&dims[2])
            .arg(&s)
            .arg(&d)
            .arg(&dims[3]);
        // SAFETY: grid-stride over the source view; the caller checked that positions
        // first .. first + from.seq lie inside the destination view.
        unsafe { launch.launch(launch_1d(blocks_for(from.len()), 0))? };
        Ok(())
    }

    /// A dense `[batch, heads, len, size]` copy of the keys (or values) of a storage prefix.
    pub(crate) fn kv_dense(
        &self,
        storage: &KvStorage,
        values: bool,
        len: usize,
    ) -> Result<DeviceBuffer> {
        let from = storage.layout(values, len);
        let to = HeadsLayout::dense(from.batch, from.heads, len, from.size);
        let mut out = self.alloc(to.len())?;
        storage.with_buffers(|keys, vals, _| {
            self.heads_copy(if values { vals } else { keys }, from, &mut out, to, 0)
        })?;
        Ok(out)
    }

    /// Makes room for a step's new keys and values (`[batch, heads, seq, size]` views, equal
    /// batch, heads and seq) after the past ones: in place when the past is the latest prefix
    /// of one storage with room, else in a new storage (twice the length) holding a copy of
    /// the past (an idle storage of the backend's, preferably one `site` let go, when one
    /// fits). Returns the storage and the past length; the step's attention launch must
    /// follow, with the new keys and values: it stores them and advances the device counter.
    pub(crate) fn kv_extend(
        &self,
        past: (KvPast, KvPast),
        (kl, vl): (HeadsLayout, HeadsLayout),
        site: KvSite,
    ) -> Result<(Arc<KvStorage>, usize)> {
        let past_len = past.0.len();
        let total = past_len + kl.seq;
        let shape_ok = (kl.batch, kl.heads, kl.seq) == (vl.batch, vl.heads, vl.seq)
            && past.1.len() == past_len;
        let side_ok = |side: &KvPast, values: bool, size: usize| match side {
            KvPast::None => past_len == 0,
            KvPast::Dense(_, l) => (l.batch, l.heads, l.size) == (kl.batch, kl.heads, size),
            KvPast::Storage {
                storage, values: v, ..
            } => {
                *v == values
                    && (storage.batch, storage.heads) == (kl.batch, kl.heads)
                    && storage.layout(values, 0).size == size
            }
        };
        if !shape_ok || !side_ok(&past.0, false, kl.size) || !side_ok(&past.1, true, vl.size) {
            return Err(CudaError::Invalid(format!(
                "kv cache step: new keys {kl:?}, values {vl:?} do not extend the past ({past_len} \
                 positions)"
            )));
        }
        if let (KvPast::Storage { storage: a, .. }, KvPast::Storage { storage: b, .. }) =
            (&past.0, &past.1)
            && Arc::ptr_eq(a, b)
            && a.advance(past_len, kl.seq)
        {
            return Ok((Arc::clone(a), past_len));
        }
        crate::backend::not_recording("a new cache storage")?;
        let capacity = (2 * total).max(KV_MIN_CAPACITY);
        let counter = [past_len as i32, 0].map(i32::to_le_bytes).concat();
        let storage = match self.idle_storages().take(kl, vl, capacity, site) {
            Some(storage) => {
                let mut state = storage.state.lock().expect("kv storage lock");
                let mut view = state.counter.slice_mut().slice_mut(..counter.len());
                self.stream().memcpy_htod(&counter, &mut view)?;
                state.filled = total;
                drop(state);
                storage
            }
            None => Arc::new(KvStorage {
                state: Mutex::new(KvState {
                    keys: self.alloc(kl.batch * kl.heads * capacity * kl.size)?,
                    values: self.alloc(vl.batch * vl.heads * capacity * vl.size)?,
                    counter: self.upload_bytes(&counter)?,
                    filled: total,
                }),
                batch: kl.batch,
                heads: kl.heads,
                capacity,
                key_size: kl.size,
                value_size: vl.size,
                leases: AtomicUsize::new(0),
                site: Mutex::new(site),
                idle: Arc::downgrade(self.idle_storages()),
            }),
        };
        {
            let mut state = storage.state.lock().expect("kv storage lock");
            let KvState { keys, values, .. } = &mut *state;
            for (side, dst, is_values) in [(&past.0, keys, false), (&past.1, values, true)] {
                let to = storage.layout(is_values, past_len);
                match side {
                    KvPast::None => {}
                    KvPast::Dense(buffer, l) => self.heads_copy(buffer, *l, dst, to, 0)?,
                    KvPast::Storage {
                        storage: old,
                        values,
                        len,
                    } => old.with_buffers(|k, v, _| {
                        let src = if *values { v } else { k };
                        self.heads_copy(src, old.layout(*values, *len), dst, to, 0)
                    })?,
                }
            }
        }
        Ok((storage, past_len))
    }

    /// Attention of the queries `q` over keys `k` and values `v`, whose view holds `stride`
    /// positions (`k.1.seq`), of which the first `past + shape.new_len` are used: `past` is
    /// read from `counter` (then advanced by `new_len`) when given. With `new` (the step's
    /// keys and values, `shape.new_len` positions each), positions `past ..` are read from
    /// there, and the launch also stores them into `k` and `v` at those positions (the append
    /// to a cache storage); without, every position is read from `k` and `v`. Query `i` sees
    /// key `j` when not causal or `j <= i + past` (contract: attention). Output dense in the
    /// `y` layout.
    #[allow(clippy::too_many_arguments)]
    pub fn attention(
        &self,
        q: (&DeviceBuffer, HeadsLayout),
        k: (&DeviceBuffer, HeadsLayout),
        v: (&DeviceBuffer, HeadsLayout),
        new: Option<NewKv>,
        y: HeadsLayout,
        past: usize,
        counter: Option<&DeviceBytes>,
        shape: AttentionShape,
        product: Option<AttentionProduct>,
    ) -> Result<DeviceBuffer> {
        let (ql, kl, vl) = (q.1, k.1, v.1);
        let AttentionShape {
            causal,
            scale,
            new_len,
            rows,
            split,
        } = shape;
        let stride = kl.seq;
        let group = ql.heads.checked_div(kl.heads).unwrap_or(0);
        let valid = kl.heads > 0
            && ql.heads.is_multiple_of(kl.heads)
            && ql.batch == kl.batch
            && vl.batch == kl.batch
            && vl.heads == kl.heads
            && vl.seq == stride
            && past + new_len <= stride
            && new_len > 0
            && ql.size == kl.size
            && ql.size > 0
            && vl.size > 0
            && rows > 0
            && group.is_multiple_of(rows)
            && (attention_shared_bytes(rows, stride, ql.size, vl.size) <= ATTENTION_SHARED_MAX
                || split > 0)
            && (split == 0 || attention_split_fits(rows, stride, ql.size, split))
            && y.batch == ql.batch
            && y.heads == ql.heads
            && y.seq == ql.seq
            && y.size == vl.size
            && ql.seq <= i32::MAX as usize
            && ql.batch <= 65_535
            && new.is_none_or(|((_, nk), (_, nv))| {
                (nk.batch, nk.heads, nk.seq, nk.size) == (kl.batch, kl.heads, new_len, kl.size)
                    && (nv.batch, nv.heads, nv.seq, nv.size)
                        == (vl.batch, vl.heads, new_len, vl.size)
            });
        let query_rows = ql.batch * ql.seq;
        let product_fits = |p: &AttentionProduct| {
            let cols = ql.heads * TILE;
            rows == 1
                && vl.size == TILE
                && y == HeadsLayout::split(ql.batch, ql.seq, ql.heads, TILE)
                && gguf_supported(p.ggml_type)
                // A head's tile of a weight row is whole blocks (not a k-quant super-block's
                // quarter): the kernel addresses it in bytes.
                && p.ggml_type.row_bytes(TILE).is_some()
                && p.ggml_type
                    .row_bytes(cols)
                    .is_some_and(|rb| p.w.len() == p.rows * rb)
                && p.add.is_none_or(|a| a.len() == query_rows * p.rows)
                && p.rows <= i32::MAX as usize
        };
        if !valid || product.as_ref().is_some_and(|p| !product_fits(p)) {
            return Err(CudaError::Invalid(format!(
                "attention: q {ql:?}, k {kl:?}, v {vl:?}, y {y:?}, {past} + {new_len} keys, \
                 {rows} rows per block{}",
                if product.is_some() {
                    ", a fused product"
                } else {
                    ""
                }
            )));
        }
        let mut out = self.alloc(y.len())?;
        if out.is_empty() {
            return Ok(out);
        }
        // The fused product's output and workspace, and the tickets: the split launch's per
        // (batch, head group, query), then the product's per query row.
        let mut product_out = match &product {
            Some(p) => Some(self.alloc(query_rows * p.rows)?),
            None => None,
        };
        let product_partials = match &product {
            Some(p) => Some(self.alloc(query_rows * ql.heads * p.rows)?),
            None => None,
        };
        let groups_total = ql.batch * (ql.heads / rows) * ql.seq;
        let split_tickets = if split > 0 { groups_total } else { 0 };
        let ticket_count = split_tickets + query_rows;
        let ints = [past, new_len, stride, ql.size, vl.size, group, rows].map(|v| v as i32);
        let causal = i32::from(causal);
        let (qs, ks, vs, ys) = (
            SbStrides::from(ql),
            SbStrides::from(kl),
            SbStrides::from(vl),
            SbStrides::from(y),
        );
        let (kns, vns) = match new {
            Some(((_, nk), (_, nv))) => (SbStrides::from(nk), SbStrides::from(nv)),
            None => (ks, vs),
        };
        // Aligned float4 key reads: every key row starts at a multiple of 4 floats.
        let vec4 = i32::from(
            [ql.size as i64, ks.b, ks.h, ks.s, kns.b, kns.h, kns.s]
                .iter()
                .all(|v| v % 4 == 0),
        );
        let (kv_heads, null) = (kl.heads as i32, 0u64);
        // Arguments common to sb_attention and sb_attention_split_scores, up to `vns`; the
        // counter.
        macro_rules! head_args {
            ($launch:ident) => {
                $launch
                    .arg(q.0.slice())
                    .arg(&qs)
                    .arg(k.0.slice())
                    .arg(&ks)
                    .arg(v.0.slice())
                    .arg(&vs);
                match new {
                    Some(((nk, _), (nv, _))) => {
                        $launch.arg(nk.slice()).arg(&kns).arg(nv.slice()).arg(&vns)
                    }
                    None => $launch.arg(&null).arg(&kns).arg(&null).arg(&vns),
                };
            };
        }
        macro_rules! counter_arg {
            ($launch:ident) => {
                match counter {
                    Some(c) => $launch.arg(c.slice()),
                    None => $launch.arg(&null),
                };
            };
        }
        let groups = (ql.heads / rows) as u32;
        let tile_bytes = product.map_or(0, |p| {
            p.ggml_type.row_bytes(TILE).expect("checked above") as i32
        });
        self.with_tickets(ticket_count, |tickets| {
            let stream = self.stream();
            let mut raw_product = SbAttentionProduct::default();
            if let (Some(p), Some(o), Some(w)) =
                (&product, product_out.as_mut(), product_partials.as_ref())
            {
                let cols = ql.heads * TILE;
                raw_product = SbAttentionProduct {
                    w: p.w.slice().device_ptr(stream).0,
                    add: p.add.map_or(0, |a| a.slice().device_ptr(stream).0),
                    out: o.slice_mut().device_ptr_mut(stream).0,
                    partials: w.slice().device_ptr(stream).0,
                    tickets: tickets
                        .slice(ticket_count - query_rows..)
                        .device_ptr(stream)
                        .0,
                    row_bytes: p.ggml_type.row_bytes(cols).expect("checked above") as i64,
                    rows: p.rows as i32,
                    ggml_type: p.ggml_type.id() as i32,
                };
            }
            if split == 0 {
                let f = self.function("sb_attention")?;
                let config = LaunchConfig {
                    grid_dim: (ql.seq as u32, groups, ql.batch as u32),
                    block_dim: (BLOCK, 1, 1),
                    shared_mem_bytes: attention_shared_bytes(rows, stride, ql.size, vl.size) as u32,
                };
                let mut launch = stream.launch_builder(&f);
                head_args!(launch);
                launch.arg(out.slice_mut()).arg(&ys);
                launch.arg(&ints[0]).arg(&ints[1]).arg(&ints[2]);
                counter_arg!(launch);
                launch
                    .arg(&ints[3])
                    .arg(&ints[4])
                    .arg(&ints[5])
                    .arg(&ints[6])
                    .arg(&causal)
                    .arg(&scale)
                    .arg(&kv_heads)
                    .arg(&vec4)
                    .arg(&raw_product)
                    .arg(&tile_bytes);
                // SAFETY: the views lie inside their buffers (their shapes were checked by the
                // caller); one block per (query, head group, batch) with the shared memory
                // computed above; the counter, when given, is the storage's (read, then
                // advanced by the last block); the new keys and values are stored at positions
                // past .. of k and v, inside their views; the fused product's weights, output,
                // workspace and zeroed tickets were checked and sized above.
                unsafe { launch.launch(config)? };
                return Ok(());
            }
            // Split over key chunks: workspaces per (batch, head, query).
            let head_rows = ql.batch * ql.heads * ql.seq;
            let chunks = stride.div_ceil(split * TILE);
            let tiles_cap = stride.div_ceil(TILE);
            let mut scores = self.alloc(head_rows * stride)?;
            let mut maxima = self.alloc(head_rows * chunks)?;
            let mut partials = self.alloc(head_rows * tiles_cap * vl.size)?;
            let grid = ((ql.seq * chunks) as u32, groups, ql.batch as u32);
            let split_i = split as i32;
            let f = self.function("sb_attention_split_scores")?;
            let mut launch = stream.launch_builder(&f);
            head_args!(launch);
            launch.arg(&ints[0]).arg(&ints[1]).arg(&ints[2]);
            counter_arg!(launch);
            launch
                .arg(&ints[3])
                .arg(&ints[4])
                .arg(&ints[5])
                .arg(&ints[6])
                .arg(&causal)
                .arg(&scale)
                .arg(&kv_heads)
                .arg(&vec4)
                .arg(&split_i)
                .arg(scores.slice_mut())
                .arg(maxima.slice_mut());
            let config = LaunchConfig {
                grid_dim: grid,
                block_dim: (BLOCK, 1, 1),
                shared_mem_bytes: (4 * rows * (ql.size + split * TILE)) as u32,
            };
            // SAFETY: as for sb_attention; the workspaces hold a score row of `stride` keys
            // and a maximum per chunk for every (batch, head, query).
            unsafe { launch.launch(config)? };
            let f = self.function("sb_attention_split_values")?;
            let mut launch = stream.launch_builder(&f);
            launch.arg(v.0.slice()).arg(&vs);
            match new {
                Some((_, (nv, _))) => launch.arg(nv.slice()),
                None => launch.arg(&null),
            };
            launch
                .arg(&vns)
                .arg(out.slice_mut())
                .arg(&ys)
                .arg(&ints[0])
                .arg(&ints[1])
                .arg(&ints[2]);
            counter_arg!(launch);
            launch
                .arg(&ints[4])
                .arg(&ints[5])
                .arg(&ints[6])
                .arg(&split_i)
                .arg(scores.slice())
                .arg(maxima.slice())
                .arg(partials.slice_mut())
                .arg(tickets)
                .arg(&raw_product)
                .arg(&tile_bytes);
            let config = LaunchConfig {
                grid_dim: grid,
                block_dim: (BLOCK, 1, 1),
                shared_mem_bytes: (4 * rows * (stride + tiles_cap + 2)) as u32,
            };
            // SAFETY: the grid of the scores launch over the workspaces it wrote; one zeroed
            // ticket per (batch, head group, query), each left zero by its last block; the
            // fused product as for sb_attention.
            unsafe { launch.launch(config)? };
            Ok(())
        })?;
        Ok(product_out.unwrap_or(out))
    }
}
