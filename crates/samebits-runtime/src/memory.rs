//! How the process's allocator treats the buffers a run frees.
//!
//! A plan's step outputs are allocated and freed on every run; the large ones (a convolution's
//! activations, a prefill's hidden states) are megabytes each. glibc's malloc serves blocks
//! above its mmap threshold with fresh `mmap` pages and returns freed heap tops past its trim
//! threshold to the kernel, so every run faults those pages in again, each one zeroed by the
//! kernel (PP-OCRv4 det at 640x640: about 11,000 page faults and 20 ms of system time per run on
//! one core of a virtual machine). [`retain_freed_memory`] raises both thresholds, so freed
//! buffers stay in the process and the next run reuses them: the arena ONNX Runtime and PyTorch
//! keep for the same reason. Freed heap memory then stays with the process (the heap's free top
//! up to 2 GiB; blocks over 512 MiB, such as a large model's weight buffers, keep their own
//! mappings and are returned when freed), so the resident size stays near the peak a run
//! reached. Only allocation changes; no value does.

/// Blocks up to this size come from the heap instead of their own mapping.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 512 << 20;

/// Makes glibc's malloc keep freed memory for reuse (see the module doc). Call once at process
/// start, before worker threads allocate; the CLI does. Elsewhere (other C libraries, other
/// systems) it does nothing.
pub fn retain_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; both are documented settings.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX);
    }
}
