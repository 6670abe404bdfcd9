//! [`CudaBackend`]: one GPU context, one stream, the compiled samebits kernels and the buffer
//! pool. The operations themselves live in `elementwise.rs`, `gemm.rs` and `reduce.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cublas::CudaBlas;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig};

use crate::attention::IdleStorages;
use crate::buffer::{BufferPool, DeviceBuffer, DeviceBytes};
use crate::error::{CudaError, Result};
use crate::program;

/// Threads per block of the elementwise and row kernels.
pub(crate) const BLOCK: u32 = 256;

/// Ticket counters allocated at least (so that they rarely move once graphs are recorded).
const MIN_TICKETS: usize = 4096;
/// Bytes of kernel tables a backend keeps on the device at most ([`CudaBackend::table`]).
const TABLE_CACHE_BYTES: usize = 64 << 20;

/// A CUDA device ready to run the reproducible kernels.
pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    pool: Arc<BufferPool>,
    /// Cache storages no cache holds, for the next new sequence (`attention.rs`).
    idle: Arc<IdleStorages>,
    name: String,
    compute_capability: (i32, i32),
    sm_count: usize,
    /// The most dynamic shared memory a block may ask for (bytes, after opting in).
    max_shared_per_block: usize,
    /// Zeroed counters of the split-K GEMV's fold tickets (kernels/gemm.cu); each launch leaves
    /// them zero again.
    tickets: Mutex<Option<CudaSlice<u32>>>,
    /// The default operation set's cuBLAS handle, opened on first use (`None`: no cuBLAS).
    blas: OnceLock<Option<CudaBlas>>,
    /// Held by each executor run from start to finish ([`CudaBackend::lock_stream`]).
    stream_lock: Mutex<()>,
    /// Kernel tables by content ([`CudaBackend::table`]).
    tables: Mutex<TableCache>,
}

/// The kernel tables a backend keeps: by content, and their total bytes.
#[derive(Default)]
struct TableCache {
    by_content: HashMap<Vec<u8>, Arc<DeviceBytes>>,
    bytes: usize,
}

impl CudaBackend {
    /// Opens GPU `ordinal` and compiles the kernels for its architecture. Fails with a clear
    /// [`CudaError`] (never a panic) when the driver, NVRTC or the device is missing.
    pub fn new(ordinal: usize) -> Result<Self> {
        // SAFETY: these only try to load the shared libraries.
        let (driver, nvrtc) = unsafe {
            (
                cudarc::driver::sys::is_culib_present(),
                cudarc::nvrtc::sys::is_culib_present(),
            )
        };
        if !driver {
            return Err(CudaError::NoDriver);
        }
        if !nvrtc {
            return Err(CudaError::NoNvrtc);
        }
        let count = CudaContext::device_count()?;
        if ordinal >= count.max(0) as usize {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal)?;
        // One stream orders every operation, so cudarc's per-buffer events are not needed.
        // SAFETY: all work of this backend runs on `stream`.
        unsafe { ctx.disable_event_tracking() };
        let compute_capability = ctx.compute_capability()?;
        let ptx = program::compile(compute_capability.0, compute_capability.1)?;
        let module = ctx.load_module(ptx)?;
        // A stream of our own (not the legacy default stream, which cannot be captured into
        // a CUDA graph).
        let stream = ctx.new_stream()?;
        let sm_count = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
            .max(1) as usize;
        let max_shared_per_block = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
            .max(0) as usize;
        Ok(CudaBackend {
            name: ctx.name()?,
            ctx,
            stream,
            module,
            functions: Mutex::new(HashMap::new()),
            pool: Arc::new(BufferPool::trimming()),
            idle: Arc::default(),
            compute_capability,
            sm_count,
            max_shared_per_block,
            tickets: Mutex::new(None),
            blas: OnceLock::new(),
            stream_lock: Mutex::new(()),
            tables: Mutex::default(),
        })
    }

    /// Cache storages no cache holds.
    pub(crate) fn idle_storages(&self) -> &Arc<IdleStorages> {
        &self.idle
    }

    /// The device's multiprocessor count (launch shapes only; never changes bits).
    pub fn sm_count(&self) -> usize {
        self.sm_count
    }

    /// The most shared memory (bytes) a block may use once its kernel opts in (launch shapes
    /// only; never changes bits).
    pub fn max_shared_per_block(&self) -> usize {
        self.max_shared_per_block
    }

    /// Runs `f` with at least `count` zeroed ticket counters (grown on demand, never while
    /// recording a CUDA graph: a recorded graph keeps the address it was given).
    pub(crate) fn with_tickets<R>(
        &self,
        count: usize,
        f: impl FnOnce(&CudaSlice<u32>) -> Result<R>,
    ) -> Result<R> {
        let mut tickets = self.tickets.lock().expect("ticket lock");
        if tickets.as_ref().is_none_or(|t| t.len() < count) {
            not_recording("more ticket counters")?;
            let len = count.next_power_of_two().max(MIN_TICKETS);
            *tickets = Some(self.stream.alloc_zeros::<u32>(len)?);
        }
        f(tickets.as_ref().expect("tickets"))
    }

    /// The cuBLAS handle of the default operation set, if cuBLAS loads here.
    pub(crate) fn blas(&self) -> Option<&CudaBlas> {
        self.blas
            .get_or_init(|| crate::fast::open_blas(self))
            .as_ref()
    }

    /// The device's name, e.g. "NVIDIA H100 80GB HBM3".
    pub fn device_name(&self) -> &str {
        &self.name
    }

    /// The device's compute capability (major, minor); kernels are compiled for it.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// The stream every operation is queued on (for timing with events).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Serializes the users of the backend's one stream: an executor run holds this from start
    /// to finish, so that a CUDA graph one thread records never captures another thread's
    /// launches (all work submitted to a capturing stream is captured). Code that launches on
    /// [`CudaBackend::stream`] itself while other threads run executors holds it too.
    pub fn lock_stream(&self) -> std::sync::MutexGuard<'_, ()> {
        self.stream_lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Waits until every queued operation has finished.
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }

    /// A buffer of `len` elements whose contents are unspecified until written (from this
    /// thread's arena while it has one, see `buffer::with_arena`).
    pub fn alloc(&self, len: usize) -> Result<DeviceBuffer> {
        crate::buffer::current_pool(&self.pool).take(&self.stream, len)
    }

    /// Copies `data` to a new device buffer.
    pub fn upload(&self, data: &[f32]) -> Result<DeviceBuffer> {
        not_recording("an upload")?;
        let mut buffer = self.alloc(data.len())?;
        if !data.is_empty() {
            let mut view = buffer.slice_mut().slice_mut(..data.len());
            self.stream.memcpy_htod(data, &mut view)?;
        }
        Ok(buffer)
    }

    /// Copies raw bytes (quantized weights) to a new device allocation.
    pub fn upload_bytes(&self, data: &[u8]) -> Result<DeviceBytes> {
        not_recording("an upload")?;
        // SAFETY: fully written by the copy below before any kernel reads it.
        let mut slice = unsafe { self.stream.alloc::<u8>(data.len().max(1))? };
        if !data.is_empty() {
            let mut view = slice.slice_mut(..data.len());
            self.stream.memcpy_htod(data, &mut view)?;
        }
        Ok(DeviceBytes::new(slice, data.len()))
    }

    /// Copies a device buffer back to the host (waits for the queued work).
    pub fn download(&self, buffer: &DeviceBuffer) -> Result<Vec<f32>> {
        not_recording("a download")?;
        let mut out = vec![0.0f32; buffer.len()];
        if !out.is_empty() {
            self.stream
                .memcpy_dtoh(&buffer.slice().slice(..buffer.len()), &mut out)?;
        }
        self.synchronize()?;
        Ok(out)
    }

    /// A read-only kernel table (a resize's taps, a source kernel's index maps) on the device.
    /// Tables are kept by content for the backend's lifetime, up to [`TABLE_CACHE_BYTES`] in
    /// all: a table a run needs again is not uploaded again, so a run recorded as a CUDA graph
    /// finds every table its rehearsal uploaded, and the graph's pointers stay valid (cached
    /// tables are never freed or moved). Past the bound a table is uploaded for this use only
    /// (which fails while recording, so that run is not recorded).
    pub(crate) fn table(&self, data: &[u8]) -> Result<Arc<DeviceBytes>> {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(table) = tables.by_content.get(data) {
            return Ok(Arc::clone(table));
        }
        let table = Arc::new(self.upload_bytes(data)?);
        if tables.bytes + data.len() <= TABLE_CACHE_BYTES {
            tables.bytes += data.len();
            tables.by_content.insert(data.to_vec(), Arc::clone(&table));
        }
        Ok(table)
    }

    /// Device-to-device copy of `src` into `dst` (equal lengths).
    pub fn copy(&self, src: &DeviceBuffer, dst: &mut DeviceBuffer) -> Result<()> {
        if src.len() != dst.len() {
            return Err(CudaError::Invalid(format!(
                "copy of {} elements into a buffer of {}",
                src.len(),
                dst.len()
            )));
        }
        let len = src.len();
        let mut view = dst.slice_mut().slice_mut(..len);
        self.stream
            .memcpy_dtod(&src.slice().slice(..len), &mut view)?;
        Ok(())
    }

    /// The kernel of that name from the compiled program.
    pub(crate) fn function(&self, name: &str) -> Result<CudaFunction> {
        let mut functions = self.functions.lock().expect("function cache lock");
        if let Some(f) = functions.get(name) {
            return Ok(f.clone());
        }
        let f = self.module.load_function(name)?;
        functions.insert(name.to_owned(), f.clone());
        Ok(f)
    }
}

/// An error if this thread is recording a CUDA graph (`what` may not happen then).
pub(crate) fn not_recording(what: &str) -> Result<()> {
    if crate::buffer::recording() {
        return Err(CudaError::Invalid(format!(
            "{what} while recording a CUDA graph"
        )));
    }
    Ok(())
}

/// A 1-D launch of `blocks` blocks of [`BLOCK`] threads with `shared` dynamic bytes.
pub(crate) fn launch_1d(blocks: u32, shared: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks.max(1), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: shared,
    }
}

/// Blocks for a grid-stride loop over `n` elements.
pub(crate) fn blocks_for(n: usize) -> u32 {
    n.div_ceil(BLOCK as usize).clamp(1, 65_535 * 8) as u32
}
