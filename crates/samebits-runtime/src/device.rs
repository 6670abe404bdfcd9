//! Where a plan runs: [`Device`] (`cpu`, `cuda`, `cuda:N`) and [`Executor`], a plan bound to a
//! device. On `cpu` it is [`Plan::run`]; on `cuda:N` samebits-cuda's [`CudaExecutor`], which
//! runs each step on its device kernel or falls back to the CPU op, with the same bits.
//!
//! Opening a GPU checks for the CUDA driver and NVRTC first and fails with one line (never a
//! panic) on machines without them, and in a build without the `cuda` feature. One
//! [`CudaBackend`] per GPU is shared by the whole process, so its kernels are compiled once.

use crate::cuda::{CudaBackend, CudaExecutor};
pub use crate::cuda::{DeviceTensor, IoValue};
use crate::pool::run_in_pool;
use crate::{Result, RuntimeError};
use samebits_ir::Value;
pub use samebits_ops::RunStats;
use samebits_ops::{Plan, RunOptions};
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};

/// A device to run on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Device {
    /// The CPU interpreter.
    #[default]
    Cpu,
    /// CUDA GPU number N.
    Cuda(usize),
}

impl FromStr for Device {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| format!("unknown device {s:?} (cpu, cuda or cuda:N)")),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// The process's backend for GPU `ordinal`, opened (and its kernels compiled) on first use.
pub fn cuda_backend(ordinal: usize) -> Result<Arc<CudaBackend>> {
    static BACKENDS: OnceLock<Mutex<HashMap<usize, Arc<CudaBackend>>>> = OnceLock::new();
    let mut backends = BACKENDS
        .get_or_init(Default::default)
        .lock()
        .expect("backend registry lock");
    if let Some(backend) = backends.get(&ordinal) {
        return Ok(Arc::clone(backend));
    }
    let backend = Arc::new(CudaBackend::new(ordinal)?);
    backends.insert(ordinal, Arc::clone(&backend));
    Ok(backend)
}

/// A plan bound to the device it runs on.
pub struct Executor {
    plan: Arc<Plan>,
    device: Device,
    cuda: Option<CudaExecutor>,
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("device", &self.description())
            .finish()
    }
}

impl Executor {
    /// Binds `plan` to `device` (opening the GPU for `cuda:N`).
    pub fn new(plan: Arc<Plan>, device: Device) -> Result<Executor> {
        let cuda = match device {
            Device::Cpu => None,
            Device::Cuda(n) => Some(CudaExecutor::new(cuda_backend(n)?, Arc::clone(&plan))),
        };
        Ok(Executor { plan, device, cuda })
    }

    /// An executor of `plan`, a specialisation of this executor's plan (samebits-passes'
    /// `specialization.rs`), on the same device; on a GPU it shares this executor's device
    /// copies of the initializers the plans share.
    pub fn specialised(&self, plan: Arc<Plan>) -> Executor {
        let cuda = self
            .cuda
            .as_ref()
            .map(|cuda| cuda.sharing_constants(Arc::clone(&plan)));
        Executor {
            plan,
            device: self.device,
            cuda,
        }
    }

    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// The device as receipts record it: `cpu`, or `cuda:N (<GPU name>)`.
    pub fn description(&self) -> String {
        match &self.cuda {
            Some(cuda) => format!("{} ({})", self.device, cuda.backend().device_name()),
            None => self.device.to_string(),
        }
    }

    /// Runs the plan on `inputs` (in the order of [`Plan::inputs`]).
    pub fn run(&self, inputs: Vec<Value>, options: RunOptions) -> Result<Vec<Value>> {
        Ok(self.run_counted(inputs, options)?.0)
    }

    /// [`Executor::run`], with the GPU executor's counts of device and fallback steps (`None`
    /// on the CPU).
    pub fn run_counted(
        &self,
        inputs: Vec<Value>,
        options: RunOptions,
    ) -> Result<(Vec<Value>, Option<RunStats>)> {
        match &self.cuda {
            None => {
                // The whole run goes to one thread of the rayon pool, the others kept awake
                // (crate::pool).
                let outputs = run_in_pool(true, || self.plan.run(inputs, options));
                Ok((outputs?, None))
            }
            Some(cuda) => {
                let (outputs, stats) = cuda.run_with(inputs, options)?;
                Ok((outputs, Some(stats)))
            }
        }
    }
}

impl Executor {
    /// Runs the plan on inputs that may already be on the device (values an earlier run left
    /// there); output `i` stays on the device when `keep[i]` and a device step computed it
    /// (on the CPU every value is a host value).
    pub fn run_io(&self, inputs: Vec<IoValue>, keep: &[bool]) -> Result<Vec<IoValue>> {
        match &self.cuda {
            None => {
                let inputs = inputs
                    .into_iter()
                    .map(|v| match v {
                        IoValue::Host(v) => Ok(v),
                        IoValue::Device(_) => Err(RuntimeError::Usage(
                            "a device value was given to a CPU plan".into(),
                        )),
                    })
                    .collect::<Result<_>>()?;
                let outputs = self.plan.run(inputs, RunOptions::default())?;
                Ok(outputs.into_iter().map(IoValue::Host).collect())
            }
            Some(cuda) => Ok(cuda.run_io(inputs, keep, RunOptions::default())?.0),
        }
    }
}

impl Executor {
    /// The last `len` values (row-major) of a float32 output of [`Executor::run_io`], wherever
    /// it is: only that much crosses from the device.
    pub fn download_tail(&self, value: &IoValue, len: usize) -> Result<Vec<f32>> {
        match (value, &self.cuda) {
            (IoValue::Host(v), _) => {
                let usage = |e: samebits_ir::Error| RuntimeError::Usage(e.to_string());
                let data = v
                    .as_tensor()
                    .map_err(usage)?
                    .as_slice::<f32>()
                    .map_err(usage)?;
                let start = data.len().checked_sub(len).ok_or_else(|| {
                    RuntimeError::Usage(format!("a tail of {len} of {} values", data.len()))
                })?;
                Ok(data[start..].to_vec())
            }
            (IoValue::Device(t), Some(cuda)) => Ok(cuda.download_tail(t, len)?),
            (IoValue::Device(_), None) => Err(RuntimeError::Usage(
                "a device value was given to a CPU plan".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_and_print() {
        assert_eq!("cpu".parse(), Ok(Device::Cpu));
        assert_eq!("cuda".parse(), Ok(Device::Cuda(0)));
        assert_eq!("cuda:3".parse(), Ok(Device::Cuda(3)));
        assert!("cuda:x".parse::<Device>().is_err());
        assert!("gpu".parse::<Device>().is_err());
        assert_eq!(Device::Cuda(1).to_string(), "cuda:1");
    }
}
