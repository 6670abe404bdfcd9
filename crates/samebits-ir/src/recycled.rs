//! [`RecycledF32`]: an f32 output buffer whose memory goes back to a process-wide shelf when the
//! last tensor holding it is dropped, so the next step's output reuses it without clearing it.
//!
//! A plan allocates every step's output afresh. `vec![0.0; n]` on a reused heap block is a
//! `calloc` that must clear the block first: a pass over memory the kernel is about to
//! overwrite anyway (PP-OCR cls at 2 threads: 13% of all samples in `memset`, most of it for
//! convolution outputs). ONNX Runtime and PyTorch hand out such buffers from an arena without
//! clearing them. Here a buffer taken from the shelf holds whatever values its last user left:
//! only a kernel that writes **every** element of its output may take one (each call site says
//! so). The values left behind are never read, so no result depends on the shelf's history. In
//! debug builds, and in release builds once a test calls [`poison_taken_buffers`], a taken
//! buffer is filled with NaN, so a kernel that reads an element before writing it, or skips
//! one, fails its tests instead of passing on stale values.
//!
//! The shelf is bounded ([`MAX_BUFFERS`], [`MAX_BYTES`]); a buffer that does not fit is freed.
//! Buffers below [`MIN_LEN`] elements are not shelved (the allocator serves those cheaply).

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Buffers shorter than this (16 KiB) are plain allocations.
const MIN_LEN: usize = 4096;
/// At most this many buffers wait on the shelf.
const MAX_BUFFERS: usize = 128;
/// At most this many bytes wait on the shelf (the activations of a few runs of a large CNN).
const MAX_BYTES: usize = 512 << 20;
/// A shelved buffer serves a request only if its capacity is at most this many times the
/// request, so one large buffer is not used up by a small output.
const MAX_WASTE: usize = 4;

/// Set by [`poison_taken_buffers`].
static POISON: AtomicBool = AtomicBool::new(cfg!(debug_assertions));

/// From now on every [`RecycledF32::take`] in this process fills its buffer with NaN: for test
/// binaries, so that the kernels under test show a read of an unwritten output element.
pub fn poison_taken_buffers() {
    POISON.store(true, Ordering::Relaxed);
}

/// The released buffers and their total capacity in bytes.
struct Shelf {
    buffers: Vec<Vec<f32>>,
    bytes: usize,
}

static SHELF: Mutex<Shelf> = Mutex::new(Shelf {
    buffers: Vec::new(),
    bytes: 0,
});

fn shelf() -> std::sync::MutexGuard<'static, Shelf> {
    // A panic while the lock was held left the shelf consistent (push and remove are whole).
    SHELF
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `len` f32 elements of unspecified value (see the module doc): a shelved buffer when one
/// fits, else a new zeroed one.
pub struct RecycledF32(Vec<f32>);

impl RecycledF32 {
    /// A buffer of exactly `len` elements, for a kernel that writes every one of them.
    pub fn take(len: usize) -> RecycledF32 {
        let reused = (len >= MIN_LEN).then(|| take_shelved(len)).flatten();
        let mut data = match reused {
            Some(mut data) => {
                if data.len() > len {
                    data.truncate(len);
                } else {
                    // Within capacity: writes only the new tail.
                    data.resize(len, 0.0);
                }
                data
            }
            None => vec![0.0; len],
        };
        if POISON.load(Ordering::Relaxed) {
            data.fill(f32::NAN);
        }
        RecycledF32(data)
    }
}

/// The smallest shelved buffer that holds `len` elements without wasting more than
/// [`MAX_WASTE`] times it; among equals the one shelved last (likeliest still in cache).
fn take_shelved(len: usize) -> Option<Vec<f32>> {
    let mut shelf = shelf();
    let limit = len.saturating_mul(MAX_WASTE);
    let (index, _) = shelf
        .buffers
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, b)| (len..=limit).contains(&b.capacity()))
        .min_by_key(|(_, b)| b.capacity())?;
    let data = shelf.buffers.swap_remove(index);
    shelf.bytes -= data.capacity() * size_of::<f32>();
    Some(data)
}

impl Drop for RecycledF32 {
    fn drop(&mut self) {
        let data = std::mem::take(&mut self.0);
        let bytes = data.capacity() * size_of::<f32>();
        if data.capacity() < MIN_LEN {
            return;
        }
        let mut shelf = shelf();
        if shelf.buffers.len() < MAX_BUFFERS && shelf.bytes + bytes <= MAX_BYTES {
            shelf.bytes += bytes;
            shelf.buffers.push(data);
        }
    }
}

impl Deref for RecycledF32 {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        &self.0
    }
}

impl DerefMut for RecycledF32 {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.0
    }
}

impl crate::ByteSource for RecycledF32 {
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_buffer_serves_the_next_request_of_a_fitting_size() {
        // Sizes no other test in this binary uses, so the shared shelf holds only these.
        let len = 5 * MIN_LEN + 17;
        let first = RecycledF32::take(len);
        let address = first.as_ptr();
        drop(first);
        let second = RecycledF32::take(len - 5);
        assert_eq!(second.len(), len - 5);
        assert_eq!(second.as_ptr(), address, "the shelved buffer is reused");
        // Too large a buffer for a small request is left on the shelf for a larger one.
        drop(second);
        let small = RecycledF32::take(MIN_LEN + 1);
        assert_ne!(small.as_ptr(), address);
        let again = RecycledF32::take(len);
        assert_eq!(again.as_ptr(), address);
        assert_eq!(again.len(), len);
    }

    #[test]
    fn poisoned_buffers_hold_nan() {
        poison_taken_buffers();
        drop(RecycledF32::take(7 * MIN_LEN));
        assert!(RecycledF32::take(7 * MIN_LEN).iter().all(|v| v.is_nan()));
    }

    #[test]
    fn small_buffers_are_plain_allocations() {
        let b = RecycledF32::take(10);
        assert_eq!(b.len(), 10);
        drop(b);
        assert!(shelf().buffers.iter().all(|b| b.capacity() >= MIN_LEN));
    }
}
