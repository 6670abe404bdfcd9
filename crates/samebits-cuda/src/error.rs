//! Errors of the CUDA backend: a missing driver, NVRTC or GPU is an error value, never a panic.

use cudarc::driver::DriverError;

/// Why a CUDA backend could not be created or an operation could not run.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver found (libcuda.so); run with --device cpu")]
    NoDriver,
    #[error(
        "no NVRTC library found (libnvrtc.so.13); add the CUDA toolkit's lib64 to LD_LIBRARY_PATH or run with --device cpu"
    )]
    NoNvrtc,
    #[error("no CUDA device {ordinal} ({count} found); run with --device cpu")]
    NoDevice { ordinal: usize, count: i32 },
    #[error("CUDA driver error: {0}")]
    Driver(#[from] DriverError),
    #[error("NVRTC compilation of the samebits kernels failed: {0}")]
    Compile(String),
    #[error("invalid arguments: {0}")]
    Invalid(String),
    /// An op failed (its CPU evaluation, or its inputs).
    #[error(transparent)]
    Op(#[from] samebits_ops::OpError),
    /// A device operation failed while running a step.
    #[error("{node}: {source}")]
    AtStep {
        node: String,
        source: Box<CudaError>,
    },
}

/// Result of the CUDA backend.
pub type Result<T> = std::result::Result<T, CudaError>;
