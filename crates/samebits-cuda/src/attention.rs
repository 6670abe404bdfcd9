//! RotaryEmbedding and Attention on the device (contract section `attention`, the bits of
//! `crates/samebits-ops/src/families/attention.rs`), and the device-resident KV cache they
//! append to (kernels/attention.cu).
//!
//! - [`HeadsLayout`]: a `[batch, heads, seq, size]` view of a dense buffer, 4-D as is or 3-D
//!   `[batch, seq, heads * size]` split into heads.
//! - [`CudaBackend::rotary`]: RotaryEmbedding without `position_ids`.
//! - [`KvStorage`]: a cache's `[batch, heads, capacity, size]` storage. A present key or value
//!   is a prefix of one; [`CudaBackend::kv_extend`] appends new positions in place when the
//!   past is the storage's latest prefix and fits, and otherwise copies the past into new
//!   storage (twice the length, so decode reallocates rarely). An older prefix stays valid:
//!   appending never writes below the filled length.
//! - [`CudaBackend::attention`]: causal or not, grouped-query, over keys and values read
//!   through strides (a cache storage or a dense tensor).

use std::sync::{Arc, Mutex};

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use crate::backend::{BLOCK, CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::error::{CudaError, Result};

/// Keys per reduction tile (contract: canonical-sum).
const TILE: usize = samebits_kernels::REDUCTION_TILE;
/// Shared memory an attention block may take without opting in to more (bytes).
const ATTENTION_SHARED_MAX: usize = 48 * 1024;
/// Positions a new cache storage holds at least.
const KV_MIN_CAPACITY: usize = 256;

/// A `[batch, heads, seq, size]` view of a buffer; the feature index has unit stride.
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

    fn device(&self) -> SbStrides {
        SbStrides {
            b: self.strides[0] as i64,
            h: self.strides[1] as i64,
            s: self.strides[2] as i64,
        }
    }
}

/// `SbStrides` of kernels/attention.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SbStrides {
    b: i64,
    h: i64,
    s: i64,
}

// SAFETY: a #[repr(C)] struct of three i64, the layout of `SbStrides` in attention.cu.
unsafe impl DeviceRepr for SbStrides {}

/// The storage of one cache tensor: `[batch, heads, capacity, size]`, its first `filled`
/// positions written.
pub struct KvStorage {
    state: Mutex<KvState>,
    batch: usize,
    heads: usize,
    capacity: usize,
    size: usize,
}

struct KvState {
    buffer: DeviceBuffer,
    filled: usize,
}

impl KvStorage {
    /// The view of its first `len` positions.
    pub fn layout(&self, len: usize) -> HeadsLayout {
        HeadsLayout {
            batch: self.batch,
            heads: self.heads,
            seq: len,
            size: self.size,
            strides: [
                self.heads * self.capacity * self.size,
                self.capacity * self.size,
                self.size,
            ],
        }
    }

    /// Runs `f` on the storage buffer.
    pub(crate) fn with_buffer<T>(&self, f: impl FnOnce(&DeviceBuffer) -> T) -> T {
        f(&self.state.lock().expect("kv storage lock").buffer)
    }
}

/// The keys or values before a step: none, a dense tensor or a cache storage prefix.
pub(crate) enum KvPast<'a> {
    None,
    Dense(&'a DeviceBuffer, HeadsLayout),
    Storage(&'a Arc<KvStorage>, usize),
}

/// Largest number of query heads (a divisor of `group`) one attention block can take within
/// its shared memory, for `total` keys of `d` features and values of `dv`; `None` if even one
/// does not fit (the step then runs on the CPU).
pub fn attention_rows(group: usize, total: usize, d: usize, dv: usize) -> Option<usize> {
    (1..=group)
        .rev()
        .filter(|r| group.is_multiple_of(*r))
        .find(|&r| attention_shared_bytes(r, total, d, dv) <= ATTENTION_SHARED_MAX)
}

fn attention_shared_bytes(rows: usize, total: usize, d: usize, dv: usize) -> usize {
    let round_tiles = (BLOCK as usize / dv.max(1)).max(1);
    4 * (rows * d + rows * total + total.div_ceil(TILE) + round_tiles * rows * dv + rows * dv)
}

impl CudaBackend {
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
        let s = layout.device();
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
        // SAFETY: thread per element of x / y (same layout); cache rows checked above.
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
        let f = self.function("sb_kv_append")?;
        let count = from.len() as i64;
        let dims = [from.heads, from.seq, from.size, first].map(|v| v as i32);
        let (s, d) = (from.device(), to.device());
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(src.slice())
            .arg(dst.slice_mut())
            .arg(&count)
            .arg(&dims[0])
            .arg(&dims[1])
            .arg(&dims[2])
            .arg(&s.b)
            .arg(&s.h)
            .arg(&s.s)
            .arg(&d.b)
            .arg(&d.h)
            .arg(&d.s)
            .arg(&dims[3]);
        // SAFETY: thread per element of the source view; the caller checked that positions
        // first .. first + from.seq lie inside the destination view.
        unsafe { launch.launch(launch_1d(blocks_for(from.len()), 0))? };
        Ok(())
    }

    /// A dense `[batch, heads, len, size]` copy of a storage prefix.
    pub(crate) fn kv_dense(&self, storage: &KvStorage, len: usize) -> Result<DeviceBuffer> {
        let from = storage.layout(len);
        let to = HeadsLayout::dense(from.batch, from.heads, len, from.size);
        let mut out = self.alloc(to.len())?;
        storage.with_buffer(|buffer| self.heads_copy(buffer, from, &mut out, to, 0))?;
        Ok(out)
    }

    /// The keys (or values) after a step: `past` followed by `new` along the positions, as a
    /// storage and its filled length (module docs).
    pub(crate) fn kv_extend(
        &self,
        past: KvPast,
        new: &DeviceBuffer,
        new_layout: HeadsLayout,
    ) -> Result<(Arc<KvStorage>, usize)> {
        let HeadsLayout {
            batch, heads, size, ..
        } = new_layout;
        let past_len = match &past {
            KvPast::None => 0,
            KvPast::Dense(_, l) => l.seq,
            KvPast::Storage(_, len) => *len,
        };
        let fits = |b: usize, h: usize, d: usize| b == batch && h == heads && d == size;
        let total = past_len + new_layout.seq;
        if let KvPast::Storage(storage, len) = &past {
            if !fits(storage.batch, storage.heads, storage.size) {
                return Err(CudaError::Invalid("kv cache of another shape".into()));
            }
            let mut state = storage.state.lock().expect("kv storage lock");
            if state.filled == *len && total <= storage.capacity {
                self.heads_copy(
                    new,
                    new_layout,
                    &mut state.buffer,
                    storage.layout(total),
                    *len,
                )?;
                state.filled = total;
                return Ok((Arc::clone(storage), total));
            }
        }
        if let KvPast::Dense(_, l) = &past
            && !fits(l.batch, l.heads, l.size)
        {
            return Err(CudaError::Invalid("kv past of another shape".into()));
        }
        let capacity = (2 * total).max(KV_MIN_CAPACITY);
        let storage = KvStorage {
            state: Mutex::new(KvState {
                buffer: self.alloc(batch * heads * capacity * size)?,
                filled: total,
            }),
            batch,
            heads,
            capacity,
            size,
        };
        {
            let mut state = storage.state.lock().expect("kv storage lock");
            let to = storage.layout(total);
            match &past {
                KvPast::None => {}
                KvPast::Dense(buffer, l) => {
                    self.heads_copy(buffer, *l, &mut state.buffer, to, 0)?
                }
                KvPast::Storage(old, len) => old.with_buffer(|buffer| {
                    self.heads_copy(buffer, old.layout(*len), &mut state.buffer, to, 0)
                })?,
            }
            self.heads_copy(new, new_layout, &mut state.buffer, to, past_len)?;
        }
        Ok((Arc::new(storage), total))
    }

    /// Attention of the queries `q` over `total = k.seq` keys and values (contract:
    /// attention), query `i` seeing key `j` when `!causal` or `j <= i + past`; `rows` query
    /// heads per block (a divisor of the group size, see [`attention_rows`]). Output dense in
    /// `y` layout (`[batch, q_heads, q_seq, v_size]` heads).
    #[allow(clippy::too_many_arguments)]
    pub fn attention(
        &self,
        q: (&DeviceBuffer, HeadsLayout),
        k: (&DeviceBuffer, HeadsLayout),
        v: (&DeviceBuffer, HeadsLayout),
        y: HeadsLayout,
        causal: bool,
        past: usize,
        scale: f32,
        rows: usize,
    ) -> Result<DeviceBuffer> {
        let (ql, kl, vl) = (q.1, k.1, v.1);
        let total = kl.seq;
        let group = if kl.heads > 0 { ql.heads / kl.heads } else { 0 };
        let valid = kl.heads > 0
            && ql.heads.is_multiple_of(kl.heads)
            && ql.batch == kl.batch
            && vl.batch == kl.batch
            && vl.heads == kl.heads
            && vl.seq == total
            && ql.size == kl.size
            && ql.size > 0
            && vl.size > 0
            && total > 0
            && rows > 0
            && group.is_multiple_of(rows)
            && attention_shared_bytes(rows, total, ql.size, vl.size) <= ATTENTION_SHARED_MAX
            && y.batch == ql.batch
            && y.heads == ql.heads
            && y.seq == ql.seq
            && y.size == vl.size
            && ql.seq <= 65_535 * 1024
            && ql.batch <= 65_535;
        if !valid {
            return Err(CudaError::Invalid(format!(
                "attention: q {ql:?}, k {kl:?}, v {vl:?}, y {y:?}, {rows} rows per block"
            )));
        }
        let mut out = self.alloc(y.len())?;
        if out.is_empty() {
            return Ok(out);
        }
        let f = self.function("sb_attention")?;
        let shared = attention_shared_bytes(rows, total, ql.size, vl.size) as u32;
        let config = LaunchConfig {
            grid_dim: (ql.seq as u32, (ql.heads / rows) as u32, ql.batch as u32),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: shared,
        };
        let ints = [total, past, ql.size, vl.size, group, rows].map(|v| v as i32);
        let causal = i32::from(causal);
        let (qs, ks, vs, ys) = (ql.device(), kl.device(), vl.device(), y.device());
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(q.0.slice())
            .arg(&qs)
            .arg(k.0.slice())
            .arg(&ks)
            .arg(v.0.slice())
            .arg(&vs)
            .arg(out.slice_mut())
            .arg(&ys)
            .arg(&ints[0])
            .arg(&ints[1])
            .arg(&ints[2])
            .arg(&ints[3])
            .arg(&ints[4])
            .arg(&ints[5])
            .arg(&causal)
            .arg(&scale);
        // SAFETY: the views lie inside their buffers (checked by the callers' shapes); one
        // block per (query, head group, batch) with the shared memory computed above.
        unsafe { launch.launch(config)? };
        Ok(out)
    }
}
