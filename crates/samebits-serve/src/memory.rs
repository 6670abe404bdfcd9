//! The server process's host memory: its resident size for `/metrics`
//! (`process_resident_memory_bytes`, the Prometheus process collector's name), and handing the
//! heap's freed pages back to the operating system between rounds.
//!
//! A round frees buffers of many sizes on many threads (each sequence's logits row, sampling
//! keys, a batch's logits block of several megabytes); glibc's allocator keeps freed memory in
//! per-thread arenas, and after freeing a large block it raises its own threshold for using
//! fresh mappings, so a server's resident size wanders by tens of megabytes with the batch's
//! shape. Every [`RELEASE_INTERVAL`] the engine asks the allocator to return its free pages
//! (`malloc_trim`), so the resident size follows what is live.

use std::time::{Duration, Instant};

/// How often the engine hands freed heap pages back.
pub const RELEASE_INTERVAL: Duration = Duration::from_secs(10);

/// The process's resident set in bytes, where the system says (Linux: `/proc/self/statm`).
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().map(|page| pages * page)
}

/// Returns the heap's free pages to the system (glibc's `malloc_trim`; a no-op with another C
/// library, whose allocator keeps its own policy).
fn release_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only inspects and releases the allocator's free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Releases the heap's freed pages at most once per [`RELEASE_INTERVAL`].
pub(crate) struct HeapReleaser {
    last: Instant,
}

impl HeapReleaser {
    pub(crate) fn new() -> HeapReleaser {
        HeapReleaser {
            last: Instant::now(),
        }
    }

    /// Releases if the interval has passed since the last release.
    pub(crate) fn tick(&mut self) {
        if self.last.elapsed() >= RELEASE_INTERVAL {
            release_freed_heap();
            self.last = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resident_size_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let bytes = resident_bytes().expect("/proc/self/statm");
            // A test process holds at least its code and stacks, and less than this machine.
            assert!(bytes > 1 << 20 && bytes < 1 << 40, "{bytes}");
        }
    }
}
