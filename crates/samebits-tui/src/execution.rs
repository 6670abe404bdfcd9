//! Where a generation runs: the Device and Partitions fields parsed into [`ExecutionOptions`], and
//! the check of whether this machine can honour them.
//!
//! The device is the runtime's [`Device`] (`cpu`, `cuda`, `cuda:N`); a GPU that is asked for is
//! opened before the model loads, so a machine without one gets the runtime's one-line reason in
//! the UI. Partitions above 1 run the model through that many pipeline stages, as the CLI's
//! `--n-partitions` does (the worker starts them).

pub use samebits_runtime::Device;

/// Device and partition count of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecutionOptions {
    pub device: Device,
    /// Pipeline stages the model's layers are split into (1: the whole model in one).
    pub partitions: usize,
}

impl Default for ExecutionOptions {
    fn default() -> Self {
        ExecutionOptions {
            device: Device::Cpu,
            partitions: 1,
        }
    }
}

impl ExecutionOptions {
    /// Parses the Device and Partitions fields; errors name the field.
    pub fn parse(device: &str, partitions: &str) -> Result<ExecutionOptions, String> {
        let device = device
            .trim()
            .parse::<Device>()
            .map_err(|_| format!("Device: expected cpu, cuda or cuda:N, got {device:?}"))?;
        let partitions = match partitions.trim().parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(format!(
                    "Partitions: expected a whole number >= 1, got {partitions:?}"
                ));
            }
        };
        Ok(ExecutionOptions { device, partitions })
    }

    /// `Ok` when this machine can run with these options; else why not, in one line naming the
    /// field.
    pub fn check_available(&self) -> Result<(), String> {
        if let Device::Cuda(ordinal) = self.device {
            samebits_runtime::device::cuda_backend(ordinal)
                .map_err(|e| format!("Device {}: {e}", self.device))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_and_print() {
        let device = |text: &str| ExecutionOptions::parse(text, "1").map(|o| o.device);
        assert_eq!(device("cpu"), Ok(Device::Cpu));
        assert_eq!(device(" cuda "), Ok(Device::Cuda(0)));
        assert_eq!(device("cuda:3"), Ok(Device::Cuda(3)));
        assert_eq!(Device::Cuda(3).to_string(), "cuda:3");
        for bad in ["gpu", "cuda:", "cuda:x", ""] {
            let error = device(bad).unwrap_err();
            assert!(error.starts_with("Device: expected"), "{error}");
        }
    }

    #[test]
    fn partitions_must_be_a_positive_whole_number() {
        assert_eq!(ExecutionOptions::parse("cpu", "4").unwrap().partitions, 4);
        for bad in ["0", "-1", "two", ""] {
            let error = ExecutionOptions::parse("cpu", bad).unwrap_err();
            assert!(error.starts_with("Partitions: expected"), "{error}");
        }
    }

    #[test]
    fn a_missing_gpu_is_refused_in_one_line() {
        assert_eq!(ExecutionOptions::default().check_available(), Ok(()));
        // A GPU number no machine has: refused whether or not this machine has CUDA.
        let cuda = ExecutionOptions {
            device: Device::Cuda(999),
            partitions: 1,
        };
        let error = cuda.check_available().unwrap_err();
        assert!(error.starts_with("Device cuda:999: "), "{error}");
        assert!(error.contains("--device cpu"), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }
}
