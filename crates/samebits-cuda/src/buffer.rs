//! Device buffers and the caching allocator behind them.
//!
//! A [`DeviceBuffer`] is a run of `f32` on the GPU. Its memory comes from a [`BufferPool`] of
//! freed allocations bucketed by capacity (powers of two elements), so steady-state inference
//! allocates nothing from the driver; dropping a buffer returns its allocation to the pool.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream};

use crate::error::Result;

/// Freed device allocations, keyed by capacity in elements.
#[derive(Default)]
pub(crate) struct BufferPool {
    free: Mutex<HashMap<usize, Vec<CudaSlice<f32>>>>,
}

impl BufferPool {
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
}
