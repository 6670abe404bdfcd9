//! Device buffers and the caching allocator behind them.
//!
//! A [`DeviceBuffer`] is a run of `f32` on the GPU. Its memory comes from a [`BufferPool`] of
//! freed allocations bucketed by capacity (powers of two elements), so steady-state inference
//! allocates nothing from the driver; dropping a buffer returns its allocation to the pool it
//! came from. A thread may route its allocations to a private pool for a while
//! ([`with_arena`]): a recorded CUDA graph owns the arena its run allocated from, so no one
//! else reuses the buffers it replays on; a strict pool refuses to allocate from the driver
//! (a graph being recorded must not).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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

/// Freed device allocations, keyed by capacity in elements.
#[derive(Default)]
pub(crate) struct BufferPool {
    free: Mutex<HashMap<usize, Vec<CudaSlice<f32>>>>,
    /// Refuse to allocate from the driver.
    strict: AtomicBool,
}

impl BufferPool {
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
        let reused = self
            .free
            .lock()
            .expect("buffer pool lock")
            .get_mut(&capacity)
            .and_then(Vec::pop);
        let slice = match reused {
            Some(slice) => slice,
            None if self.strict.load(Ordering::Relaxed) => {
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
        self.free
            .lock()
            .expect("buffer pool lock")
            .entry(slice.len())
            .or_default()
            .push(slice);
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
