//! The link between GPUs: [`NcclLink`] exchanges messages with NCCL point-to-point send/recv
//! (cudarc's bindings, loaded at run time), and the checks made before any work: enough GPUs
//! ([`check_gpus`]) and an NCCL library ([`check_nccl`]).
//!
//! This file is built with the `cuda` feature; `no_nccl.rs` stands in for it without.
//!
//! One exchange is two NCCL groups on the link's stream: first every rank sends its message's
//! byte count to the next rank and receives the previous rank's; then the bytes themselves
//! (staged through device buffers). A group holds one send and one receive, so the ring cannot
//! deadlock; with one rank both go to itself, which exercises the same code on one GPU.

use crate::link::{Link, Message, decode, encode};
use crate::{PipelineError, Result};
use cudarc::driver::{CudaContext, CudaStream};
use cudarc::nccl::{Comm, Id, group_end, group_start, result::NcclError};
use samebits_runtime::device::cuda_backend;
use std::sync::Arc;

/// GPUs the CUDA driver shows this process (0 without a driver).
pub fn visible_gpus() -> usize {
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| n.max(0) as usize)
}

/// Errors unless GPUs `first .. first + n` exist.
pub fn check_gpus(n: usize, first: usize) -> Result<()> {
    let found = visible_gpus().saturating_sub(first);
    if n > found {
        return Err(PipelineError::Unavailable(format!(
            "pipeline parallelism with {n} partitions needs {n} GPUs; found {found}"
        )));
    }
    Ok(())
}

/// Errors unless an NCCL library can be loaded, saying which files were looked for.
pub fn check_nccl() -> Result<()> {
    if unsafe { cudarc::nccl::sys::is_culib_present() } {
        return Ok(());
    }
    let names = cudarc::get_lib_name_candidates("nccl");
    Err(PipelineError::Unavailable(format!(
        "NCCL is unavailable: none of {} was found on the library path. NCCL packages install \
         libnccl.so.2 (e.g. pip's nvidia-nccl-cu13 in site-packages/nvidia/nccl/lib); link it as \
         libnccl.so in a folder and put that folder on LD_LIBRARY_PATH: \
         `ln -s /path/to/libnccl.so.2 DIR/libnccl.so; export LD_LIBRARY_PATH=DIR:$LD_LIBRARY_PATH`",
        names.join(", ")
    )))
}

/// A new NCCL unique id (rank 0 makes it; the others get it through the rendezvous).
pub fn new_id() -> Result<[u8; 128]> {
    let id = Id::new().map_err(nccl_error)?;
    Ok(id.internal().map(|c| c as u8))
}

fn nccl_error(e: NcclError) -> PipelineError {
    let detail = unsafe {
        let text = cudarc::nccl::sys::ncclGetLastError(std::ptr::null_mut());
        match text.is_null() {
            true => String::new(),
            false => std::ffi::CStr::from_ptr(text)
                .to_string_lossy()
                .into_owned(),
        }
    };
    PipelineError::Nccl(format!("{:?} {detail}", e.0))
}

fn driver_error(e: cudarc::driver::DriverError) -> PipelineError {
    PipelineError::Nccl(format!("CUDA: {e}"))
}

/// This rank's NCCL communicator on its GPU, as a [`Link`] of the ring.
pub struct NcclLink {
    comm: Comm,
    stream: Arc<CudaStream>,
    context: Arc<CudaContext>,
    next: i32,
    prev: i32,
    fingerprint: u64,
}

impl NcclLink {
    /// Joins the communicator `id` as `rank` of `world` on GPU `gpu` (blocks until every rank
    /// has joined).
    pub fn connect(
        gpu: usize,
        rank: usize,
        world: usize,
        id: &[u8; 128],
        fingerprint: u64,
    ) -> Result<NcclLink> {
        check_nccl()?;
        let context = cuda_backend(gpu)?.context().clone();
        context.bind_to_thread().map_err(driver_error)?;
        let stream = context.new_stream().map_err(driver_error)?;
        let id = Id::uninit(id.map(|b| b as std::ffi::c_char));
        let comm = Comm::from_rank(stream.clone(), rank, world, id).map_err(nccl_error)?;
        Ok(NcclLink {
            comm,
            stream,
            context,
            next: ((rank + 1) % world) as i32,
            prev: ((rank + world - 1) % world) as i32,
            fingerprint,
        })
    }

    /// One NCCL group: `send` to the next rank, `recv` from the previous one, then wait.
    fn send_recv<T>(&self, send: &[T], recv_len: usize) -> Result<Vec<T>>
    where
        T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + cudarc::nccl::NcclType,
    {
        let s = &self.stream;
        let out = match send.is_empty() {
            true => None,
            false => Some(s.clone_htod(send).map_err(driver_error)?),
        };
        let mut into = match recv_len {
            0 => None,
            n => Some(s.alloc_zeros::<T>(n).map_err(driver_error)?),
        };
        group_start().map_err(nccl_error)?;
        let posted = (|| {
            if let Some(out) = &out {
                self.comm.send(out, self.next)?;
            }
            if let Some(into) = &mut into {
                self.comm.recv(into, self.prev)?;
            }
            Ok(())
        })();
        group_end().map_err(nccl_error)?;
        posted.map_err(nccl_error)?;
        s.synchronize().map_err(driver_error)?;
        match into {
            Some(into) => s.clone_dtoh(&into).map_err(driver_error),
            None => Ok(Vec::new()),
        }
    }
}

impl Link for NcclLink {
    fn exchange(&mut self, message: &Message) -> Result<Message> {
        self.context.bind_to_thread().map_err(driver_error)?;
        let bytes = encode(message, self.fingerprint)?;
        let len = self.send_recv(&[bytes.len() as u64], 1)?;
        let incoming = self.send_recv(&bytes, len[0] as usize)?;
        decode(&incoming, self.fingerprint)
    }
}
