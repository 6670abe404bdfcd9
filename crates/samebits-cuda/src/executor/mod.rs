//! [`CudaExecutor`]: runs a compiled [`Plan`] on one CUDA device.
//!
//! Each step runs a device kernel when its op names one ([`samebits_ops::Op::device_kernel`]:
//! the op's own parsed attributes, so CPU and GPU share one definition of what the op means)
//! and its inputs fit that kernel (float32, supported layouts); otherwise the step falls back
//! to the op's CPU [`samebits_ops::Op::eval`], its inputs downloaded first. Values stay on the
//! device between device steps: transfers happen only at fallbacks, at the graph inputs (on
//! first use by a device step) and at the graph outputs. Constants (initializers) are uploaded
//! once per executor and stay resident; quantized GGUF weights travel as raw bytes.
//!
//! A fused op (decoder fusion's `samebits::` ops) whose fused launch does not take its inputs
//! runs its body ([`samebits_ops::Op::body`]) step by step on the device, through an executor
//! of the body's plan; the executor fuses nothing itself (fusion is a graph rewrite,
//! samebits-passes' `decoder_fusion.rs`).
//!
//! Every device kernel gives the CPU's bits (docs/contract.md), so a plan's outputs are the same
//! whichever steps run where.
//!
//! Public API:
//! - [`CudaExecutor::new`]`(backend, plan)`: an executor for one plan on one device.
//! - [`CudaExecutor::run`]`(inputs)` / [`CudaExecutor::run_with`]`(inputs, options)`: like
//!   [`Plan::run`] (inputs in the order of [`Plan::inputs`], outputs in the order of
//!   [`Plan::output_names`]); `run_with` also calls the options' observer after each step
//!   (downloading device outputs for it) and returns [`RunStats`].
//! - [`CudaExecutor::run_io`]`(inputs, keep, options)`: inputs that may already be on the
//!   device ([`IoValue::Device`], a [`DeviceTensor`] an earlier run left there), and outputs
//!   left on the device where `keep` says so. An LLM's KV cache goes from step to step this
//!   way, and Attention extends it in place (`DeviceValue::Kv`, a prefix of a cache storage).
//! - [`CudaExecutor::download_tail`]: the last values of an output left on the device.
//! - [`CudaExecutor::device_steps`]: which steps have a device kernel at all (their launch is
//!   still decided per run from the inputs' dtypes and shapes).

mod dispatch;
mod fused;
mod graph;
mod ragged;
mod shaped;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use samebits_ir::{DType, Tensor, Value};
pub use samebits_ops::RunStats;
use samebits_ops::{DeviceKernel, OpError, OperationSet, Plan, PlanStep, RunOptions};

use crate::attention::KvLease;
use crate::backend::CudaBackend;
use crate::buffer::{DeviceBuffer, DeviceBytes, with_arena};
use crate::error::{CudaError, Result};
use crate::fast::Kernels;
use dispatch::{ArgInfo, Launch, plan_launch, run_launch};

/// A value held on the device.
pub(crate) enum DeviceValue {
    /// A float32 tensor, dense row-major; view ops share the buffer of their input.
    F32 {
        buffer: Arc<DeviceBuffer>,
        shape: Vec<usize>,
    },
    /// Raw bytes of a tensor (uint8 quantized weights, int64 indices), with its shape; for
    /// quantized weights, their dequantized f32 transpose once a prefill made it (kept while
    /// the process-wide budget of such copies lasts).
    Bytes {
        bytes: DeviceBytes,
        shape: Vec<usize>,
        dtype: DType,
        dequantized: OnceLock<DeviceBuffer>,
    },
    /// A float32 `[batch, heads, len, size]` tensor held as the keys (or values) at the first
    /// `len` positions of a KV cache storage.
    Kv {
        storage: KvLease,
        values: bool,
        len: usize,
        shape: Vec<usize>,
    },
    /// A sequence of tensors, each on the device or on the host: the KV caches of a ragged
    /// batch, one per sequence (`executor/ragged.rs`).
    Sequence(Vec<IoValue>),
}

impl DeviceValue {
    /// The dtype and shape of a tensor (`None` for a sequence).
    fn info(&self) -> Option<ArgInfo<'_>> {
        let (dtype, shape) = match self {
            DeviceValue::F32 { shape, .. } | DeviceValue::Kv { shape, .. } => (DType::F32, shape),
            DeviceValue::Bytes { shape, dtype, .. } => (*dtype, shape),
            DeviceValue::Sequence(_) => return None,
        };
        Some(ArgInfo {
            dtype,
            shape,
            host: None,
        })
    }
}

/// A value an executor left on the device (see [`CudaExecutor::run_io`]).
#[derive(Clone)]
pub struct DeviceTensor(Arc<DeviceValue>);

impl DeviceTensor {
    /// The tensor's shape (empty for a sequence).
    pub fn shape(&self) -> &[usize] {
        self.0.info().map_or(&[], |info| info.shape)
    }
}

impl std::fmt::Debug for DeviceTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceTensor({:?})", self.shape())
    }
}

/// An input or output of [`CudaExecutor::run_io`]: a host value, or a tensor on the device.
#[derive(Clone, Debug)]
pub enum IoValue {
    Host(Value),
    Device(DeviceTensor),
}

impl IoValue {
    /// A sequence of these tensors: a host sequence when every item is on the host, else a
    /// device value holding the items where they are (a ragged batch's KV caches); `None` if
    /// an item is not a tensor.
    pub fn sequence(items: Vec<IoValue>) -> Option<IoValue> {
        let tensor = |i: &IoValue| match i {
            IoValue::Host(v) => v.as_tensor().is_ok(),
            IoValue::Device(d) => d.0.info().is_some(),
        };
        if !items.iter().all(tensor) {
            return None;
        }
        if items.iter().all(|i| matches!(i, IoValue::Host(_))) {
            let tensors = items
                .into_iter()
                .filter_map(|i| match i {
                    IoValue::Host(Value::Tensor(t)) => Some(t),
                    _ => None,
                })
                .collect();
            return Some(IoValue::Host(Value::Sequence(tensors)));
        }
        Some(IoValue::Device(DeviceTensor(Arc::new(
            DeviceValue::Sequence(items),
        ))))
    }

    /// The items of a sequence (host or device), `None` for a tensor.
    pub fn into_items(self) -> Option<Vec<IoValue>> {
        match self {
            IoValue::Host(Value::Sequence(ts)) => {
                Some(ts.into_iter().map(|t| IoValue::Host(t.into())).collect())
            }
            IoValue::Device(DeviceTensor(d)) => match d.as_ref() {
                DeviceValue::Sequence(items) => Some(items.clone()),
                _ => None,
            },
            IoValue::Host(_) => None,
        }
    }
}

/// Where one value slot's value is during a run: on the host, on the device, or both.
#[derive(Default)]
struct Slot {
    host: Option<Value>,
    device: Option<Arc<DeviceValue>>,
}

/// Runs one [`Plan`] on one CUDA device (module docs).
pub struct CudaExecutor {
    backend: Arc<CudaBackend>,
    plan: Arc<Plan>,
    /// The device kernel of each step's op, if any.
    kernels: Vec<Option<DeviceKernel>>,
    /// For each step whose op is fused (has a body): an executor of the body, which runs it
    /// step by step where the fused launch does not take the inputs.
    bodies: Vec<Option<CudaExecutor>>,
    /// Constant slots: their host values.
    constants: HashMap<usize, Value>,
    /// Device copies of constants, made on first use by a device step.
    resident: Mutex<HashMap<usize, Arc<DeviceValue>>>,
    /// Recorded runs (CUDA graphs) and the rehearsal of the next one.
    graphs: Mutex<graph::Graphs>,
    /// The plan's operation set's kernels: cuBLAS products for the default set.
    kernel_set: Kernels,
}

impl CudaExecutor {
    /// An executor of `plan` on `backend`'s device.
    pub fn new(backend: Arc<CudaBackend>, plan: Arc<Plan>) -> Self {
        let kernels = plan.steps().map(|s| s.op.device_kernel()).collect();
        let bodies = plan
            .steps()
            .map(|s| {
                s.op.body()
                    .map(|body| CudaExecutor::new(Arc::clone(&backend), Arc::clone(body)))
            })
            .collect();
        let constants = plan.constants().map(|(s, v)| (s, v.clone())).collect();
        let kernel_set = match plan.operation_set() {
            OperationSet::Default => Kernels::Fast,
            OperationSet::ReproducibleInt8 => Kernels::ReproducibleInt8,
            _ => Kernels::Reproducible,
        };
        CudaExecutor {
            backend,
            plan,
            kernels,
            bodies,
            constants,
            resident: Mutex::new(HashMap::new()),
            graphs: Mutex::new(graph::Graphs::default()),
            kernel_set,
        }
    }

    /// An executor of `plan` (a specialisation of this executor's plan, sharing its
    /// initializers by name) on the same device, starting with this executor's device copies
    /// of the initializers the two plans share, so the weights are not uploaded twice.
    pub fn sharing_constants(&self, plan: Arc<Plan>) -> Self {
        let executor = CudaExecutor::new(Arc::clone(&self.backend), plan);
        {
            let ours = self.resident.lock().expect("resident lock");
            let mut theirs = executor.resident.lock().expect("resident lock");
            let slots: HashMap<&str, usize> = self.plan.constant_slots().collect();
            for (name, slot) in executor.plan.constant_slots() {
                if let Some(device) = slots.get(name).and_then(|s| ours.get(s)) {
                    theirs.insert(slot, Arc::clone(device));
                }
            }
        }
        executor
    }

    /// The plan this executor runs.
    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// The device backend.
    pub fn backend(&self) -> &Arc<CudaBackend> {
        &self.backend
    }

    /// Per step, whether its op has a device kernel (it still falls back for inputs the kernel
    /// does not take).
    pub fn device_steps(&self) -> impl Iterator<Item = bool> + '_ {
        self.kernels.iter().map(Option::is_some)
    }

    /// Runs the plan on `inputs` (in the order of [`Plan::inputs`]).
    pub fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
        Ok(self.run_with(inputs, RunOptions::default())?.0)
    }

    /// [`CudaExecutor::run`] with an observer called after each step, and the run's counts.
    pub fn run_with(
        &self,
        inputs: Vec<Value>,
        options: RunOptions,
    ) -> Result<(Vec<Value>, RunStats)> {
        self.plan.check_inputs(&inputs)?;
        let inputs = inputs.into_iter().map(IoValue::Host).collect();
        let (outputs, stats) = self.run_io(inputs, &[], options)?;
        let outputs = outputs
            .into_iter()
            .map(|o| match o {
                IoValue::Host(v) => Ok(v),
                IoValue::Device(_) => {
                    Err(CudaError::Invalid("an output stayed on the device".into()))
                }
            })
            .collect::<Result<_>>()?;
        Ok((outputs, stats))
    }

    /// Runs the plan on inputs that may be on the device; output `i` stays on the device
    /// (when a device step computed it) if `keep[i]`, else it is downloaded. The run holds
    /// the backend's stream throughout, its CPU steps (which use the rayon pool) included: do
    /// not start runs on one backend from tasks of the rayon pool, where a thread waiting in
    /// such a step may take up another run and block on the stream it holds.
    pub fn run_io(
        &self,
        inputs: Vec<IoValue>,
        keep: &[bool],
        mut options: RunOptions,
    ) -> Result<(Vec<IoValue>, RunStats)> {
        if inputs.len() != self.plan.input_slots().count() {
            return Err(CudaError::Invalid(format!(
                "the plan takes {} inputs, got {}",
                self.plan.input_slots().count(),
                inputs.len()
            )));
        }
        let _stream = self.backend.lock_stream();
        self.backend.context().bind_to_thread()?;
        let mut arena = None;
        if options.observer.is_none() && graph::enabled() {
            match self.graph_run(&inputs, keep)? {
                graph::GraphRun::Done(outputs, stats) => return Ok((outputs, stats)),
                graph::GraphRun::Rehearse(a) => arena = Some(a),
                graph::GraphRun::Eager => {}
            }
        }
        let mut stats = RunStats::default();
        let mut slots = self.slots(inputs);
        match &arena {
            Some(arena) => with_arena(arena, || {
                self.run_steps(&mut slots, &mut stats, &mut options)
            })?,
            None => self.run_steps(&mut slots, &mut stats, &mut options)?,
        }
        let mut outputs = Vec::new();
        for (i, (name, slot)) in self
            .plan
            .output_names()
            .zip(self.plan.output_slots())
            .enumerate()
        {
            if keep.get(i) == Some(&true)
                && let Some(device) = &slots[slot].device
            {
                outputs.push(IoValue::Device(DeviceTensor(Arc::clone(device))));
                continue;
            }
            self.on_host(&mut slots[slot], &mut stats)?;
            outputs.push(IoValue::Host(slots[slot].host.clone().ok_or_else(
                || OpError::Invalid(format!("graph output \"{name}\" was not computed")),
            )?));
        }
        Ok((outputs, stats))
    }

    /// The last `len` values (row-major) of a float32 tensor a run left on the device,
    /// downloaded; the rest is not copied (an LLM prefill's last logits row).
    pub fn download_tail(&self, tensor: &DeviceTensor, len: usize) -> Result<Vec<f32>> {
        let DeviceValue::F32 { buffer, .. } = tensor.0.as_ref() else {
            return Err(CudaError::Invalid(
                "only dense float32 device tensors download a tail".into(),
            ));
        };
        let start = buffer.len().checked_sub(len).ok_or_else(|| {
            CudaError::Invalid(format!("a tail of {len} of {} values", buffer.len()))
        })?;
        let _stream = self.backend.lock_stream();
        self.backend.context().bind_to_thread()?;
        let mut out = vec![0.0f32; len];
        if len > 0 {
            let stream = self.backend.stream();
            stream.memcpy_dtoh(&buffer.slice().slice(start..start + len), &mut out)?;
            stream.synchronize()?;
        }
        Ok(out)
    }

    /// The value slots of a run: constants and inputs placed.
    fn slots(&self, inputs: Vec<IoValue>) -> Vec<Slot> {
        let mut slots: Vec<Slot> = (0..self.plan.slot_count())
            .map(|_| Slot::default())
            .collect();
        for (&slot, value) in &self.constants {
            slots[slot].host = Some(value.clone());
        }
        for (slot, value) in self.plan.input_slots().zip(inputs) {
            match value {
                IoValue::Host(v) => slots[slot].host = Some(v),
                IoValue::Device(t) => slots[slot].device = Some(t.0),
            }
        }
        slots
    }

    /// Runs every step of the plan on `slots`: its device launch, else its body on the device
    /// (fused ops), else the CPU op.
    fn run_steps(
        &self,
        slots: &mut [Slot],
        stats: &mut RunStats,
        options: &mut RunOptions,
    ) -> Result<()> {
        let steps: Vec<PlanStep> = self.plan.steps().collect();
        for (i, &step) in steps.iter().enumerate() {
            let view = match self.kernels[i] {
                Some(DeviceKernel::View) => device_view(&step, slots),
                _ => None,
            };
            let shaped = match self.kernels[i] {
                Some(DeviceKernel::Shaped) => shaped::resolve(&step, slots),
                _ => None,
            };
            let at = at_step(&step);
            let ragged = match self.kernels[i] {
                Some(DeviceKernel::RaggedAttention {
                    is_causal,
                    q_num_heads,
                    kv_num_heads,
                    scale,
                }) => {
                    let heads = (q_num_heads, kv_num_heads);
                    self.run_ragged(&step, is_causal, heads, scale, slots, stats)
                        .map_err(&at)?
                }
                _ => false,
            };
            let launch = match (&view, &shaped) {
                (None, None) if !ragged => self.launch_for(&step, self.kernels[i], slots),
                _ => None,
            };
            match launch {
                _ if ragged => stats.device_steps += 1,
                _ if view.is_some() => {
                    slots[step.outputs[0]] = Slot {
                        host: None,
                        device: view.map(Arc::new),
                    };
                    stats.device_steps += 1;
                }
                _ if shaped.is_some() => {
                    let kernel = shaped.as_ref().expect("resolved");
                    self.run_shaped(&step, kernel, slots, stats).map_err(&at)?;
                    stats.device_steps += 1;
                }
                Some(launch) => {
                    if let Launch::Gather { rows, .. } = &launch {
                        graph::note_gather(step.inputs[1], *rows);
                    }
                    let inputs = match self.kernels[i] {
                        Some(DeviceKernel::AttentionProduct { .. }) => {
                            fused::attention_product_slots(step.inputs).into()
                        }
                        _ => std::borrow::Cow::Borrowed(step.inputs),
                    };
                    self.run_device(&launch, &inputs, step.outputs, slots, stats)
                        .map_err(&at)?;
                    stats.device_steps += 1;
                }
                None if self.bodies[i].is_some() => {
                    let body = self.bodies[i].as_ref().expect("checked");
                    self.run_body(body, &step, slots, stats).map_err(&at)?;
                }
                None => {
                    // Shape and Size read the shapes wherever the values are, and a view of a
                    // value held on the host is made there: nothing computed or moved, so
                    // neither is a fallback.
                    let (outputs, shape_only) = match outputs_from_shapes(&step, slots) {
                        Some(outputs) => (outputs, true),
                        None => {
                            let host_view = matches!(self.kernels[i], Some(DeviceKernel::View))
                                && step
                                    .inputs
                                    .first()
                                    .copied()
                                    .flatten()
                                    .is_some_and(|s| slots[s].host.is_some());
                            for s in step.inputs.iter().flatten() {
                                self.on_host(&mut slots[*s], stats).map_err(&at)?;
                            }
                            let args: Vec<Option<&Value>> = step
                                .inputs
                                .iter()
                                .map(|s| s.and_then(|s| slots[s].host.as_ref()))
                                .collect();
                            (step.eval(&args)?, host_view)
                        }
                    };
                    for (slot, value) in step.outputs.iter().zip(outputs) {
                        slots[*slot] = Slot {
                            host: Some(value),
                            device: None,
                        };
                    }
                    if shape_only {
                        stats.shape_only_steps += 1;
                    } else {
                        *stats
                            .host_steps
                            .entry(step.op_type.to_string())
                            .or_default() += 1;
                    }
                }
            }
            step.check_guards(|i| Some(arg_info(&slots[step.outputs[i]])?.shape.to_vec()))?;
            if let Some(observer) = options.observer.as_mut() {
                let mut values = Vec::with_capacity(step.outputs.len());
                for slot in step.outputs {
                    self.on_host(&mut slots[*slot], stats).map_err(&at)?;
                    values.extend(slots[*slot].host.clone());
                }
                observer(&step, &values);
            }
            for slot in step.release {
                slots[*slot] = Slot::default();
            }
        }
        Ok(())
    }

    /// Runs `body`, the executor of the fused `step`'s body, on the step's input slots (values
    /// stay where they are; constants, the weights, go to the device once, kept resident by
    /// this executor) into its output slots.
    fn run_body(
        &self,
        body: &CudaExecutor,
        step: &PlanStep,
        outer: &mut [Slot],
        stats: &mut RunStats,
    ) -> Result<()> {
        for &s in step.inputs.iter().flatten() {
            let dtype = match &self.constants.get(&s) {
                Some(Value::Tensor(t)) => t.dtype(),
                _ => continue,
            };
            match dtype {
                DType::F32 => self.on_device(outer, s, false, stats)?,
                DType::U8 => self.on_device(outer, s, true, stats)?,
                _ => continue,
            };
        }
        let inputs = step
            .inputs
            .iter()
            .map(|s| {
                let slot = &outer[s.ok_or_else(|| {
                    CudaError::Invalid("a fused op's body takes every input".into())
                })?];
                match (&slot.device, &slot.host) {
                    (Some(device), _) => Ok(IoValue::Device(DeviceTensor(Arc::clone(device)))),
                    (None, Some(host)) => Ok(IoValue::Host(host.clone())),
                    (None, None) => Err(CudaError::Invalid("an input was not computed".into())),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let mut slots = body.slots(inputs);
        body.run_steps(&mut slots, stats, &mut RunOptions::default())?;
        for (outer_slot, slot) in step.outputs.iter().zip(body.plan.output_slots()) {
            outer[*outer_slot] = std::mem::take(&mut slots[slot]);
        }
        Ok(())
    }

    /// The device launch of `step` on the current slot values, or `None` (CPU).
    fn launch_for(
        &self,
        step: &PlanStep,
        kernel: Option<DeviceKernel>,
        slots: &[Slot],
    ) -> Option<Launch> {
        // Sequences (a ragged batch's caches) go only to RaggedAttention's own path.
        if step.inputs.iter().flatten().any(|&s| {
            matches!(slots[s].host, Some(Value::Sequence(_)))
                || matches!(slots[s].device.as_deref(), Some(DeviceValue::Sequence(_)))
        }) {
            return None;
        }
        let args: Vec<Option<ArgInfo>> = step
            .inputs
            .iter()
            .map(|s| s.and_then(|s| arg_info(&slots[s])))
            .collect();
        let launch = plan_launch(kernel?, &args, step.outputs.len())?;
        match launch {
            Launch::GgufProducts {
                cols, ggml_type, ..
            } if !self
                .backend
                .gguf_products_fit(cols, self.kernel_set.int8_products(ggml_type)) =>
            {
                None
            }
            // The attention launch's fused product is the f32 one: an exact-integer product
            // runs as the op's own steps.
            Launch::Attention {
                product: Some((ggml_type, ..)),
                ..
            } if self.kernel_set.int8_products(ggml_type) => None,
            launch => Some(launch),
        }
    }

    /// Runs `launch` on the values of slots `inputs` (moved to the device) into slots
    /// `outputs`.
    fn run_device(
        &self,
        launch: &Launch,
        inputs: &[Option<usize>],
        outputs: &[usize],
        slots: &mut [Slot],
        stats: &mut RunStats,
    ) -> Result<()> {
        let mut values = Vec::with_capacity(inputs.len());
        for (i, s) in inputs.iter().enumerate() {
            values.push(match s {
                Some(s) => {
                    let value = self.on_device(slots, *s, launch.takes_bytes(i), stats)?;
                    Some(match value.as_ref() {
                        DeviceValue::Kv { .. } if !launch.takes_kv(i) => {
                            Arc::new(self.dense(&value)?)
                        }
                        _ => value,
                    })
                }
                None => None,
            });
        }
        let refs: Vec<Option<&DeviceValue>> = values.iter().map(|v| v.as_deref()).collect();
        let results = run_launch(&self.backend, launch, &refs, self.kernel_set)?;
        stats.device_launches += 1;
        drop(values);
        for (slot, output) in outputs.iter().zip(results) {
            slots[*slot] = Slot {
                host: None,
                device: Some(Arc::new(output)),
            };
        }
        Ok(())
    }

    /// A dense float32 copy of a cache prefix (other values are returned as they are).
    fn dense(&self, value: &DeviceValue) -> Result<DeviceValue> {
        match value {
            DeviceValue::Kv {
                storage,
                values,
                len,
                shape,
            } => Ok(DeviceValue::F32 {
                buffer: Arc::new(self.backend.kv_dense(storage, *values, *len)?),
                shape: shape.clone(),
            }),
            DeviceValue::F32 { .. } | DeviceValue::Bytes { .. } | DeviceValue::Sequence(_) => Err(
                CudaError::Invalid("only cache values have a dense copy".into()),
            ),
        }
    }

    /// The slot's value on the device (uploaded, and kept there, if it was only on the host).
    fn on_device(
        &self,
        slots: &mut [Slot],
        slot: usize,
        as_bytes: bool,
        stats: &mut RunStats,
    ) -> Result<Arc<DeviceValue>> {
        if let Some(device) = &slots[slot].device {
            return Ok(Arc::clone(device));
        }
        let constant = self.constants.contains_key(&slot);
        if constant && let Some(device) = self.resident.lock().expect("resident lock").get(&slot) {
            slots[slot].device = Some(Arc::clone(device));
            return Ok(Arc::clone(device));
        }
        let tensor = slots[slot]
            .host
            .as_ref()
            .ok_or_else(|| CudaError::Invalid("an input value is missing".into()))?
            .as_tensor()
            .map_err(|e| CudaError::Invalid(e.to_string()))?;
        let value = if as_bytes {
            let bytes = tensor
                .bytes()
                .map_err(|e| CudaError::Invalid(e.to_string()))?;
            stats.upload_bytes += bytes.len();
            DeviceValue::Bytes {
                bytes: self.backend.upload_bytes(bytes)?,
                shape: tensor.shape().to_vec(),
                dtype: tensor.dtype(),
                dequantized: OnceLock::new(),
            }
        } else {
            let data = tensor
                .as_slice::<f32>()
                .map_err(|e| CudaError::Invalid(e.to_string()))?;
            stats.upload_bytes += 4 * data.len();
            DeviceValue::F32 {
                buffer: Arc::new(self.backend.upload(data)?),
                shape: tensor.shape().to_vec(),
            }
        };
        stats.uploads += 1;
        let device = Arc::new(value);
        if constant {
            self.resident
                .lock()
                .expect("resident lock")
                .insert(slot, Arc::clone(&device));
        }
        slots[slot].device = Some(Arc::clone(&device));
        Ok(device)
    }

    /// Makes the slot's value available on the host (downloading a device-only value).
    fn on_host(&self, slot: &mut Slot, stats: &mut RunStats) -> Result<()> {
        if slot.host.is_some() {
            return Ok(());
        }
        if let Some(device) = &slot.device {
            let dense;
            let (buffer, shape) = match device.as_ref() {
                DeviceValue::F32 { buffer, shape } => (buffer, shape),
                kv @ DeviceValue::Kv { shape, .. } => {
                    dense = self.dense(kv)?;
                    let DeviceValue::F32 { buffer, .. } = &dense else {
                        unreachable!("dense returns a float32 value")
                    };
                    (buffer, shape)
                }
                DeviceValue::Bytes { .. } => {
                    return Err(CudaError::Invalid(
                        "raw device bytes have no host copy".into(),
                    ));
                }
                DeviceValue::Sequence(items) => {
                    let mut tensors = Vec::with_capacity(items.len());
                    for item in items {
                        let mut item_slot = match item {
                            IoValue::Host(v) => Slot {
                                host: Some(v.clone()),
                                device: None,
                            },
                            IoValue::Device(t) => Slot {
                                host: None,
                                device: Some(Arc::clone(&t.0)),
                            },
                        };
                        self.on_host(&mut item_slot, stats)?;
                        let value = item_slot.host.expect("on_host fills the host value");
                        tensors.push(
                            value
                                .into_tensor()
                                .map_err(|e| CudaError::Invalid(e.to_string()))?,
                        );
                    }
                    slot.host = Some(Value::Sequence(tensors));
                    return Ok(());
                }
            };
            let data = self.backend.download(buffer)?;
            stats.downloads += 1;
            stats.download_bytes += 4 * data.len();
            let tensor = Tensor::from_vec(shape.clone(), data)
                .map_err(|e| CudaError::Invalid(e.to_string()))?;
            slot.host = Some(Value::Tensor(tensor));
        }
        Ok(())
    }
}

/// The outputs of a step whose op computes them from its inputs' shapes alone (Shape, Size:
/// [`samebits_ops::Op::outputs_from_shapes`]), from the shapes of the values wherever they
/// are (nothing downloaded); `None` for other ops, a missing input or an error (which the
/// op's own evaluation then reports).
fn outputs_from_shapes(step: &PlanStep<'_>, slots: &[Slot]) -> Option<Vec<Value>> {
    let shapes = step
        .inputs
        .iter()
        .map(|s| Some(arg_info(&slots[(*s)?])?.shape))
        .collect::<Option<Vec<_>>>()?;
    step.op.outputs_from_shapes(&shapes)?.ok()
}

/// A view step ([`DeviceKernel::View`]) on a float32 input that lives on the device: the same
/// buffer under the op's output shape (no copy). `None` (run the op on the host) when input 0
/// is not on the device, another input is not on the host, or the op has no such output.
fn device_view(step: &PlanStep<'_>, slots: &[Slot]) -> Option<DeviceValue> {
    if step.outputs.len() != 1 {
        return None;
    }
    let DeviceValue::F32 { buffer, shape } = slots[(*step.inputs.first()?)?].device.as_deref()?
    else {
        return None;
    };
    let mut args: Vec<Option<&Value>> = vec![None];
    for s in &step.inputs[1..] {
        args.push(match s {
            Some(s) => Some(slots[*s].host.as_ref()?),
            None => None,
        });
    }
    let out = step.op.view_shape(shape, &args).ok()?;
    (out.iter().product::<usize>() == buffer.len()).then(|| DeviceValue::F32 {
        buffer: Arc::clone(buffer),
        shape: out,
    })
}

/// The dtype and shape of a slot's value, wherever it is, and its host tensor if any (`None`
/// for non-tensors).
fn arg_info(slot: &Slot) -> Option<ArgInfo<'_>> {
    let host = match slot.host.as_ref() {
        Some(Value::Tensor(t)) => Some(t),
        _ => None,
    };
    if let Some(device) = &slot.device {
        return Some(ArgInfo {
            host,
            ..device.info()?
        });
    }
    host.map(|t| ArgInfo {
        dtype: t.dtype(),
        shape: t.shape(),
        host: Some(t),
    })
}

/// Errors of a step name the step.
fn at_step<'a>(step: &'a PlanStep<'a>) -> impl Fn(CudaError) -> CudaError + 'a {
    move |e| match e {
        CudaError::Op(o) => CudaError::Op(o.at(step.node)),
        e => CudaError::AtStep {
            node: step.node.to_string(),
            source: Box::new(e),
        },
    }
}
