//! CUDA graphs for repeated runs: an LLM decode step launches some 500 small kernels, a
//! vision transformer as many, and launching them one by one from the host costs more than
//! running them. A run is recordable when its inputs are host tensors (of small fixed shapes
//! when it also takes KV cache values, Attention's past as `DeviceValue::Kv`) and every output
//! is a device value. Such a run, after a rehearsal:
//!
//! 1. rehearsal: the run executes eagerly with its buffers from a fresh private pool (arena);
//! 2. recording: the next run with the same signature (input dtypes and shapes, the same cache
//!    storages, the same outputs kept on the device) copies its host inputs into arena buffers
//!    and is captured into a graph while the arena refuses to allocate from the driver (the
//!    rehearsal stocked it, and the same steps ask for the same buffers in the same order),
//!    then the graph is launched once;
//! 3. replays: later runs with that signature refill the host inputs' buffers, advance the
//!    caches' host-side lengths, launch the graph and return the outputs.
//!
//! The graph runs the very kernels the eager run would, with the same arguments: cache lengths
//! live on the device (the append reads them, the attention kernel advances them), so a
//! replay at a longer cache computes what an eager step would, bit for bit. A replay needs each
//! storage to be at its filled length with room for the step (within the score rows the
//! recorded attention launch reserved); otherwise the run goes eager, which reallocates, and
//! the new storages give a new signature. Anything unexpected while recording (a CPU step, an
//! allocation, an upload or download, a new storage) aborts the recording; that run goes
//! eager, and after a few failures the executor stops trying. `SAMEBITS_CUDA_GRAPHS=0` turns
//! recording off.
//!
//! A graph only holds what the signature fixes: shapes, cache storages, constants. A run
//! without caches is recorded with its inputs on the device only (their host values taken
//! away), so no step can read an input's values on the host and bake them into a launch (a
//! Pad whose pads are a model input, a Reshape of an input shape tensor): such a step would
//! need a download, which aborts the recording, and the model keeps running eagerly. Kernel
//! tables come from the backend's table cache (`CudaBackend::table`), which keeps them at
//! one address for the backend's lifetime.

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::CudaGraph;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use samebits_ir::{DType, Tensor, Value};
use samebits_ops::RunOptions;

use super::{CudaExecutor, DeviceTensor, DeviceValue, IoValue, RunStats, Slot};
use crate::attention::{KvLease, KvStorage};
use crate::buffer::{BufferPool, with_arena};
use crate::error::{CudaError, Result};

/// Recorded graphs an executor keeps (the oldest goes first).
const MAX_RECORDED: usize = 2;
/// Failed recordings after which an executor stops trying.
const MAX_FAILURES: usize = 3;
/// Host input bytes a replay of a run with caches copies at most (a decode step; a long
/// prompt's prefill runs eagerly).
const MAX_HOST_INPUT_BYTES: usize = 1 << 20;
/// Host input bytes a replay of a run without caches copies at most.
const MAX_PLAIN_INPUT_BYTES: usize = 64 << 20;

/// Whether runs may be recorded (`SAMEBITS_CUDA_GRAPHS` is not `0`).
pub(super) fn enabled() -> bool {
    std::env::var_os("SAMEBITS_CUDA_GRAPHS").is_none_or(|v| v != "0")
}

/// What a run's inputs look like to a recorded graph.
#[derive(Clone, Debug, PartialEq, Eq)]
enum InputSig {
    Host(DType, Vec<usize>),
    /// The keys or values of this storage (by address; a recorded graph holds the storage,
    /// so the address is not reused while it lives).
    Kv {
        storage: usize,
        values: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Signature {
    inputs: Vec<InputSig>,
    keep: Vec<bool>,
}

/// How a recorded run returns an output.
enum OutputRecipe {
    /// A float32 buffer the graph writes, downloaded.
    Download(Arc<DeviceValue>),
    /// Keys or values of a cache storage at its new length, kept on the device or downloaded.
    Kv {
        storage: Arc<KvStorage>,
        values: bool,
        shape: Vec<usize>,
        keep: bool,
    },
}

/// A CUDA graph that may move between threads: CUDA asks that calls on one graph be
/// serialized, and an executor touches its graphs only under its `graphs` lock.
struct Graph(CudaGraph);

// SAFETY: see above; the graph's handles are used only while the executor's lock is held.
unsafe impl Send for Graph {}

/// One recorded run.
struct Recorded {
    signature: Signature,
    graph: Graph,
    /// Owns the buffers the graph's steps use (never handed to anyone else).
    _arena: Arc<BufferPool>,
    /// Device copies of the host inputs, refilled before each replay, by input index.
    inputs: Vec<Option<Arc<DeviceValue>>>,
    /// Storages the run appends to: positions per run and the longest length the recorded
    /// attention launch's score rows hold.
    appends: Vec<(Arc<KvStorage>, usize, usize)>,
    /// Inputs holding gather indices, with the rows they index.
    gathers: Vec<(usize, usize)>,
    outputs: Vec<OutputRecipe>,
    device_steps: usize,
    device_launches: usize,
}

/// An executor's recorded runs and its pending rehearsal.
#[derive(Default)]
pub(super) struct Graphs {
    recorded: Vec<Recorded>,
    rehearsal: Option<(Signature, Arc<BufferPool>)>,
    failures: usize,
}

/// What [`CudaExecutor::graph_run`] did.
pub(super) enum GraphRun {
    /// Replayed (or recorded and launched): the run's outputs.
    Done(Vec<IoValue>, RunStats),
    /// Run eagerly with buffers from this arena (the rehearsal of a recording).
    Rehearse(Arc<BufferPool>),
    /// Run eagerly.
    Eager,
}

/// What the steps of a run being recorded report: in-place cache appends and gathers.
#[derive(Default)]
struct Notes {
    appends: Vec<(Arc<KvStorage>, usize, usize)>,
    gathers: Vec<(Option<usize>, usize)>,
}

thread_local! {
    static NOTES: RefCell<Option<Notes>> = const { RefCell::new(None) };
}

/// Notes an in-place append of `new_len` positions to `storage`, whose attention launch holds
/// score rows of `stride` keys (while recording; a no-op otherwise).
pub(super) fn note_attention(storage: &Arc<KvStorage>, new_len: usize, stride: usize) {
    NOTES.with(|n| {
        if let Some(notes) = n.borrow_mut().as_mut() {
            notes.appends.push((Arc::clone(storage), new_len, stride));
        }
    });
}

/// Notes a gather whose indices are in `slot`, over `rows` rows (while recording).
pub(super) fn note_gather(slot: Option<usize>, rows: usize) {
    NOTES.with(|n| {
        if let Some(notes) = n.borrow_mut().as_mut() {
            notes.gathers.push((slot, rows));
        }
    });
}

/// The signature of a recordable run, or `None`.
fn signature(inputs: &[IoValue], keep: &[bool]) -> Option<Signature> {
    let (mut caches, mut host_bytes) = (false, 0usize);
    let inputs = inputs
        .iter()
        .map(|v| match v {
            IoValue::Host(Value::Tensor(t)) => {
                host_bytes = host_bytes.saturating_add(t.bytes().map_or(usize::MAX, <[u8]>::len));
                Some(InputSig::Host(t.dtype(), t.shape().to_vec()))
            }
            IoValue::Device(DeviceTensor(d)) => match d.as_ref() {
                DeviceValue::Kv {
                    storage, values, ..
                } => {
                    caches = true;
                    Some(InputSig::Kv {
                        storage: Arc::as_ptr(storage) as usize,
                        values: *values,
                    })
                }
                _ => None,
            },
            IoValue::Host(_) => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let limit = match caches {
        true => MAX_HOST_INPUT_BYTES,
        false => MAX_PLAIN_INPUT_BYTES,
    };
    (host_bytes <= limit).then(|| Signature {
        inputs,
        keep: keep.to_vec(),
    })
}

/// The cache length each storage among `inputs` is given at (`None` if one storage comes at
/// two lengths).
fn cache_lengths(inputs: &[IoValue]) -> Option<Vec<(usize, usize)>> {
    let mut lens: Vec<(usize, usize)> = Vec::new();
    for v in inputs {
        if let IoValue::Device(DeviceTensor(d)) = v
            && let DeviceValue::Kv { storage, len, .. } = d.as_ref()
        {
            let at = Arc::as_ptr(storage) as usize;
            match lens.iter().find(|(s, _)| *s == at) {
                Some((_, l)) if l != len => return None,
                Some(_) => {}
                None => lens.push((at, *len)),
            }
        }
    }
    Some(lens)
}

impl CudaExecutor {
    /// Replays, records or prepares the recording of a run (module docs).
    pub(super) fn graph_run(&self, inputs: &[IoValue], keep: &[bool]) -> Result<GraphRun> {
        let Some(signature) = signature(inputs, keep) else {
            return Ok(GraphRun::Eager);
        };
        let mut graphs = self.graphs.lock().expect("graphs lock");
        if graphs.failures >= MAX_FAILURES {
            return Ok(GraphRun::Eager);
        }
        if let Some(i) = graphs
            .recorded
            .iter()
            .position(|r| r.signature == signature)
        {
            return Ok(match self.replay(&mut graphs.recorded[i], inputs)? {
                Some((outputs, stats)) => GraphRun::Done(outputs, stats),
                None => {
                    // Its storages moved on or are full: this graph will not replay again.
                    graphs.recorded.remove(i);
                    GraphRun::Eager
                }
            });
        }
        match graphs.rehearsal.take() {
            Some((rehearsed, arena)) if rehearsed == signature => {
                match self.record(signature, arena, inputs, keep) {
                    Ok((recorded, outputs, stats)) => {
                        if graphs.recorded.len() >= MAX_RECORDED {
                            graphs.recorded.remove(0);
                        }
                        graphs.recorded.push(recorded);
                        Ok(GraphRun::Done(outputs, stats))
                    }
                    Err(e) => {
                        if std::env::var_os("SAMEBITS_DEBUG").is_some() {
                            eprintln!("samebits: this run is not recorded as a CUDA graph: {e}");
                        }
                        graphs.failures += 1;
                        Ok(GraphRun::Eager)
                    }
                }
            }
            _ => {
                let arena = Arc::new(BufferPool::default());
                graphs.rehearsal = Some((signature, Arc::clone(&arena)));
                Ok(GraphRun::Rehearse(arena))
            }
        }
    }

    /// Records the run (its rehearsal stocked `arena`), launches it once and returns it with
    /// the run's outputs. On an error nothing is kept; the caller runs eagerly.
    fn record(
        &self,
        signature: Signature,
        arena: Arc<BufferPool>,
        inputs: &[IoValue],
        keep: &[bool],
    ) -> Result<(Recorded, Vec<IoValue>, RunStats)> {
        let stream = self.backend.stream();
        let mut stats = RunStats::default();
        let mut slots = self.slots(inputs.to_vec());
        let input_slots: Vec<usize> = self.plan.input_slots().collect();
        // Device copies of the host inputs, made before recording (a graph copies nothing
        // from the host), outside the arena: the graph keeps them for its replays, while the
        // rehearsal's copies went back to the arena for later steps.
        let mut copies = vec![None; inputs.len()];
        let caches = signature
            .inputs
            .iter()
            .any(|s| matches!(s, InputSig::Kv { .. }));
        for (i, &slot) in input_slots.iter().enumerate() {
            if let (None, Some(Value::Tensor(t))) = (&slots[slot].device, &slots[slot].host) {
                let value = Arc::new(self.upload_value(t)?);
                slots[slot].device = Some(Arc::clone(&value));
                copies[i] = Some(value);
                if !caches {
                    slots[slot].host = None;
                }
            }
        }
        stream.synchronize()?;
        arena.set_strict(true);
        NOTES.with(|n| *n.borrow_mut() = Some(Notes::default()));
        let captured = stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(CudaError::from)
            .and_then(|()| {
                with_arena(&arena, || {
                    self.run_steps(&mut slots, &mut stats, &mut RunOptions::default())
                })
            })
            .and_then(|()| self.recipes(&slots, keep, &copies));
        let graph = stream.end_capture(CUgraphInstantiate_flags(0));
        arena.set_strict(false);
        let notes = NOTES.with(|n| n.borrow_mut().take()).unwrap_or_default();
        let outputs = captured?;
        let graph = graph?.ok_or_else(|| CudaError::Invalid("an empty CUDA graph".into()))?;
        let gathers = notes
            .gathers
            .iter()
            .map(|&(slot, rows)| {
                let input = input_slots.iter().position(|&s| Some(s) == slot);
                input.map(|i| (i, rows)).ok_or_else(|| {
                    CudaError::Invalid("gather indices computed on the device".into())
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // The steps' buffers are back in the arena, which the graph owns from now on.
        drop(slots);
        graph.launch()?;
        let recorded = Recorded {
            signature,
            graph: Graph(graph),
            _arena: arena,
            inputs: copies,
            appends: notes.appends,
            gathers,
            outputs,
            device_steps: stats.device_steps,
            device_launches: stats.device_launches,
        };
        let outputs = self.recorded_outputs(&recorded, &mut stats)?;
        Ok((recorded, outputs, stats))
    }

    /// How each output of the recorded run is returned.
    fn recipes(
        &self,
        slots: &[Slot],
        keep: &[bool],
        copies: &[Option<Arc<DeviceValue>>],
    ) -> Result<Vec<OutputRecipe>> {
        let input_buffers: Vec<_> = copies
            .iter()
            .filter_map(|c| match c.as_deref() {
                Some(DeviceValue::F32 { buffer, .. }) => Some(Arc::as_ptr(buffer)),
                _ => None,
            })
            .collect();
        self.plan
            .output_slots()
            .enumerate()
            .map(|(i, slot)| {
                let keep = keep.get(i) == Some(&true);
                match slots[slot].device.as_ref() {
                    Some(value) => match value.as_ref() {
                        DeviceValue::Kv {
                            storage,
                            values,
                            shape,
                            ..
                        } => Ok(OutputRecipe::Kv {
                            storage: Arc::clone(storage),
                            values: *values,
                            shape: shape.clone(),
                            keep,
                        }),
                        // An input's buffer is refilled by each replay: not an output.
                        DeviceValue::F32 { buffer, .. }
                            if !keep && !input_buffers.contains(&Arc::as_ptr(buffer)) =>
                        {
                            Ok(OutputRecipe::Download(Arc::clone(value)))
                        }
                        _ => Err(CudaError::Invalid("an output a graph cannot return".into())),
                    },
                    None => Err(CudaError::Invalid("an output computed on the host".into())),
                }
            })
            .collect()
    }

    /// Replays `recorded` on `inputs`, or `None` when it cannot (module docs).
    fn replay(
        &self,
        recorded: &mut Recorded,
        inputs: &[IoValue],
    ) -> Result<Option<(Vec<IoValue>, RunStats)>> {
        let Some(lens) = cache_lengths(inputs) else {
            return Ok(None);
        };
        let len_of = |storage: &Arc<KvStorage>| {
            let at = Arc::as_ptr(storage) as usize;
            lens.iter().find(|(s, _)| *s == at).map(|&(_, l)| l)
        };
        for (storage, new_len, stride) in &recorded.appends {
            let fits = len_of(storage).is_some_and(|len| {
                storage.filled() == len && len + new_len <= (*stride).min(storage.capacity())
            });
            if !fits {
                return Ok(None);
            }
        }
        for &(i, rows) in &recorded.gathers {
            let in_range = match &inputs[i] {
                IoValue::Host(Value::Tensor(t)) => t.as_slice::<i64>().is_ok_and(|ids| {
                    ids.iter()
                        .all(|&id| id >= -(rows as i64) && id < rows as i64)
                }),
                _ => false,
            };
            if !in_range {
                return Ok(None);
            }
        }
        for (storage, new_len, _) in &recorded.appends {
            let len = len_of(storage).expect("checked above");
            if !storage.advance(len, *new_len) {
                return Err(CudaError::Invalid(
                    "a cache storage changed under a replay".into(),
                ));
            }
        }
        let stream = self.backend.stream();
        let mut stats = RunStats {
            device_steps: recorded.device_steps,
            device_launches: recorded.device_launches,
            graph_replays: 1,
            ..RunStats::default()
        };
        for (copy, input) in recorded.inputs.iter_mut().zip(inputs) {
            let (Some(copy), IoValue::Host(Value::Tensor(t))) = (copy.as_mut(), input) else {
                continue;
            };
            let copy = Arc::get_mut(copy)
                .ok_or_else(|| CudaError::Invalid("a graph input buffer is shared".into()))?;
            let bytes = t.bytes().map_err(|e| CudaError::Invalid(e.to_string()))?;
            stats.uploads += 1;
            stats.upload_bytes += bytes.len();
            match copy {
                DeviceValue::F32 { buffer, .. } => {
                    let data = t
                        .as_slice::<f32>()
                        .map_err(|e| CudaError::Invalid(e.to_string()))?;
                    let buffer = Arc::get_mut(buffer).ok_or_else(|| {
                        CudaError::Invalid("a graph input buffer is shared".into())
                    })?;
                    let mut view = buffer.slice_mut().slice_mut(..data.len());
                    stream.memcpy_htod(data, &mut view)?;
                }
                DeviceValue::Bytes { bytes: b, .. } => {
                    let mut view = b.slice_mut().slice_mut(..bytes.len());
                    stream.memcpy_htod(bytes, &mut view)?;
                }
                DeviceValue::Kv { .. } | DeviceValue::Sequence(_) => {}
            }
        }
        recorded.graph.0.launch()?;
        let outputs = self.recorded_outputs(recorded, &mut stats)?;
        Ok(Some((outputs, stats)))
    }

    /// The outputs of a launched recorded run.
    fn recorded_outputs(&self, recorded: &Recorded, stats: &mut RunStats) -> Result<Vec<IoValue>> {
        recorded
            .outputs
            .iter()
            .map(|recipe| {
                let value = match recipe {
                    OutputRecipe::Download(value) => Arc::clone(value),
                    OutputRecipe::Kv {
                        storage,
                        values,
                        shape,
                        keep,
                    } => {
                        let len = storage.filled();
                        let mut shape = shape.clone();
                        shape[2] = len;
                        let value = Arc::new(DeviceValue::Kv {
                            storage: KvLease::new(storage),
                            values: *values,
                            len,
                            shape,
                        });
                        if *keep {
                            return Ok(IoValue::Device(DeviceTensor(value)));
                        }
                        value
                    }
                };
                let mut slot = Slot {
                    host: None,
                    device: Some(value),
                };
                self.on_host(&mut slot, stats)?;
                Ok(IoValue::Host(slot.host.expect("downloaded")))
            })
            .collect()
    }

    /// A host tensor on the device: float32 as a buffer, other dtypes as raw bytes.
    pub(super) fn upload_value(&self, t: &Tensor) -> Result<DeviceValue> {
        let invalid = |e: samebits_ir::Error| CudaError::Invalid(e.to_string());
        Ok(if t.dtype() == DType::F32 {
            DeviceValue::F32 {
                buffer: Arc::new(self.backend.upload(t.as_slice::<f32>().map_err(invalid)?)?),
                shape: t.shape().to_vec(),
            }
        } else {
            DeviceValue::Bytes {
                bytes: self.backend.upload_bytes(t.bytes().map_err(invalid)?)?,
                shape: t.shape().to_vec(),
                dtype: t.dtype(),
                dequantized: Default::default(),
            }
        })
    }
}
