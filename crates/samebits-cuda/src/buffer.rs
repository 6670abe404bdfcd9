//! Device buffers and the caching allocator behind them.
//!
//! A [`DeviceBuffer`] is a run of `f32` on the GPU. Its memory comes from a [`BufferPool`] of
//! freed allocations bucketed by capacity (powers of two elements), so steady-state inference
//! allocates nothing from the driver; dropping a buffer returns its allocation to the pool it
//! came from. The backend's shared pool gives back to the driver what it did not need for a
//! while: every [`TRIM_INTERVAL`], the allocations of each capacity that stayed free through the
//! whole interval (the fewest the bucket held) are freed, so a long-running server whose shapes
//! change every round holds the working set of its recent rounds, not the sum of every
//! capacity's high-water mark since it started. A thread may route its allocations to a
//! private pool for a while
//! ([`with_arena`]): a recorded CUDA graph owns the arena its run allocated from, so no one
//! else reuses the buffers it replays on; a strict pool refuses to allocate from the driver
//! (a graph being recorded must not).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaSlice, CudaStream};

use crate::error::{CudaError, Result};

thread_local! {
    static ARENA: RefCell<Option<Arc<BufferPool>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's buffer allocations taken from `arena`.
pub(crate) fn with_arena<T>(arena: &Arc<BufferPool>, f: impl FnOnce() -> T) -> T {
    let previous = ARENA.with(|a| a.replace(Some(Arc::clone(arena))));
    let out = f();
    ARENA.with(|a| *a.borrow_mut() = previous);
    out
}

/// Whether this thread is recording a CUDA graph (its arena is strict): no allocation from
/// the driver and no host copy may happen then.
pub(crate) fn recording() -> bool {
    ARENA.with(|a| {
        a.borrow()
            .as_ref()
            .is_some_and(|p| p.strict.load(Ordering::Relaxed))
    })
}

/// The pool this thread allocates from: its arena, if any, else `default`.
pub(crate) fn current_pool(default: &Arc<BufferPool>) -> Arc<BufferPool> {
    ARENA
        .with(|a| a.borrow().clone())
        .unwrap_or_else(|| Arc::clone(default))
}

/// How often a trimming pool frees the allocations that stayed free since the last trim.
pub(crate) const TRIM_INTERVAL: Duration = Duration::from_secs(10);

/// The freed allocations of one capacity (`S`: a device slice; a plain value in the tests).
struct Bucket<S> {
    slices: Vec<S>,
    /// The fewest `slices` held since the last trim: that many were never taken in between.
    idle: usize,
}

impl<S> Default for Bucket<S> {
    fn default() -> Self {
        Bucket {
            slices: Vec::new(),
            idle: 0,
        }
    }
}

/// A pool's freed allocations by capacity, and its trim clock.
struct Free<S = CudaSlice<f32>> {
    buckets: HashMap<usize, Bucket<S>>,
    /// When the current trim interval began: the pool's creation, then its last trim.
    trimmed: Instant,
}

impl<S> Default for Free<S> {
    fn default() -> Self {
        Free {
            buckets: HashMap::new(),
            trimmed: Instant::now(),
        }
    }
}

/// Freed device allocations, keyed by capacity in elements.
#[derive(Default)]
pub(crate) struct BufferPool {
    free: Mutex<Free>,
    /// Refuse to allocate from the driver.
    strict: AtomicBool,
    /// Free, every [`TRIM_INTERVAL`], what stayed unused (the backend's shared pool; a recorded
    /// graph's arena keeps its buffers).
    trims: bool,
}

impl BufferPool {
    /// A pool that gives allocations unused for a [`TRIM_INTERVAL`] back to the driver.
    pub(crate) fn trimming() -> BufferPool {
        BufferPool {
            trims: true,
            ..BufferPool::default()
        }
    }

    /// Makes the pool refuse (or again allow) allocations that it cannot serve from freed ones.
    pub(crate) fn set_strict(&self, strict: bool) {
        self.strict.store(strict, Ordering::Relaxed);
    }

    /// A buffer of `len` elements (contents unspecified), reusing a freed allocation if any.
    pub(crate) fn take(
        self: &Arc<Self>,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<DeviceBuffer> {
        let capacity = len.max(1).next_power_of_two();
        let strict = self.strict.load(Ordering::Relaxed);
        let (reused, unused) = {
            let mut free = self.free.lock().expect("buffer pool lock");
            let reused = free.pop(capacity);
            let unused = if self.trims && !strict {
                free.trim(Instant::now())
            } else {
                Vec::new()
            };
            (reused, unused)
        };
        // Freed outside the lock (each drop is one stream-ordered free).
        drop(unused);
        let slice = match reused {
            Some(slice) => slice,
            None if strict => {
                return Err(CudaError::Invalid(
                    "a device allocation while recording a CUDA graph".into(),
                ));
            }
            // SAFETY: the contents are unspecified until a kernel or a copy writes them; every
            // operation of this crate writes its whole output before it is read.
            None => unsafe { stream.alloc::<f32>(capacity)? },
        };
        Ok(DeviceBuffer {
            slice: Some(slice),
            len,
            pool: Arc::clone(self),
        })
    }

    fn give_back(&self, slice: CudaSlice<f32>) {
        let capacity = slice.len();
        self.free
            .lock()
            .expect("buffer pool lock")
            .push(capacity, slice);
    }
}

impl<S> Free<S> {
    /// A freed allocation of `capacity`, if any.
    fn pop(&mut self, capacity: usize) -> Option<S> {
        let bucket = self.buckets.get_mut(&capacity)?;
        let slice = bucket.slices.pop();
        bucket.idle = bucket.idle.min(bucket.slices.len());
        slice
    }

    fn push(&mut self, capacity: usize, slice: S) {
        self.buckets.entry(capacity).or_default().slices.push(slice);
    }

    /// At least [`TRIM_INTERVAL`] into the current interval: takes out, to be freed, the
    /// allocations of each bucket that were not taken since it began (the oldest first), and
    /// starts a new interval.
    fn trim(&mut self, now: Instant) -> Vec<S> {
        if now.duration_since(self.trimmed) < TRIM_INTERVAL {
            return Vec::new();
        }
        self.trimmed = now;
        let mut unused = Vec::new();
        for bucket in self.buckets.values_mut() {
            unused.extend(bucket.slices.drain(..bucket.idle));
            bucket.idle = bucket.slices.len();
        }
        self.buckets.retain(|_, b| !b.slices.is_empty());
        unused
    }
}

/// `len` f32 values on the device; its allocation returns to the backend's pool on drop.
pub struct DeviceBuffer {
    slice: Option<CudaSlice<f32>>,
    len: usize,
    pool: Arc<BufferPool>,
}

impl DeviceBuffer {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole allocation (its capacity may exceed [`DeviceBuffer::len`]).
    pub(crate) fn slice(&self) -> &CudaSlice<f32> {
        self.slice.as_ref().expect("live buffer")
    }

    /// The whole allocation, writable.
    pub(crate) fn slice_mut(&mut self) -> &mut CudaSlice<f32> {
        self.slice.as_mut().expect("live buffer")
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Some(slice) = self.slice.take() {
            self.pool.give_back(slice);
        }
    }
}

/// Raw bytes on the device (quantized weights), allocated for the buffer's whole life.
pub struct DeviceBytes {
    slice: CudaSlice<u8>,
    len: usize,
}

impl DeviceBytes {
    pub(crate) fn new(slice: CudaSlice<u8>, len: usize) -> Self {
        DeviceBytes { slice, len }
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn slice(&self) -> &CudaSlice<u8> {
        &self.slice
    }

    pub(crate) fn slice_mut(&mut self) -> &mut CudaSlice<u8> {
        &mut self.slice
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(free: &Free<u32>) -> Vec<(usize, Vec<u32>)> {
        let mut held: Vec<(usize, Vec<u32>)> = free
            .buckets
            .iter()
            .map(|(&c, b)| (c, b.slices.clone()))
            .collect();
        held.sort_unstable();
        held
    }

    /// Only what stayed free through a whole interval is freed, the oldest first; the clock
    /// starts with the pool, and a trim before the interval is up frees nothing.
    #[test]
    fn a_trim_frees_what_no_take_needed_for_a_whole_interval() {
        let mut free = Free::<u32>::default();
        let start = free.trimmed;
        for (capacity, slice) in [(64, 1), (64, 2), (64, 3), (128, 4)] {
            free.push(capacity, slice);
        }
        assert!(free.trim(start).is_empty(), "the interval has only begun");
        // Given back during the first interval: none of them was free through all of it.
        assert!(free.trim(start + TRIM_INTERVAL).is_empty());
        // In the second interval, the 64 bucket goes down to one free allocation and back up
        // to three; the 128 one is not touched.
        let a = free.pop(64).unwrap();
        let b = free.pop(64).unwrap();
        assert!(
            free.trim(start + TRIM_INTERVAL + TRIM_INTERVAL / 2)
                .is_empty()
        );
        free.push(64, b);
        free.push(64, a);
        let mut unused = free.trim(start + 2 * TRIM_INTERVAL);
        unused.sort_unstable();
        assert_eq!(unused, vec![1, 4]);
        assert_eq!(held(&free), vec![(64, vec![2, 3])]);
        // A third interval with no take frees the rest, and the empty bucket goes.
        assert_eq!(free.trim(start + 3 * TRIM_INTERVAL), vec![2, 3]);
        assert!(held(&free).is_empty());
    }
}
