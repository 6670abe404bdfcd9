//! Where a generation runs: the Device and Partitions fields parsed into [`ExecutionOptions`], and
//! the check of whether this build can honour them.
//!
//! This build's generation runs on the CPU in one partition. The GPU executor (`--device
//! cuda[:N]`) and pipeline partitioning (`--n-partitions`) are separate pieces of work; until they
//! are wired into `samebits_llm`, asking for them is an error shown in the UI, never a crash.

use std::fmt;

/// The device a model runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    Cpu,
    /// A CUDA GPU by ordinal (`cuda` is `cuda:0`).
    Cuda(usize),
}

impl Device {
    /// Parses `cpu`, `cuda` or `cuda:N`.
    pub fn parse(text: &str) -> Result<Device, String> {
        let text = text.trim();
        match text {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => text
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| format!("Device: expected cpu, cuda or cuda:N, got {text:?}")),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

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
        let device = Device::parse(device)?;
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

    /// `Ok` when this build can run with these options; else why not, in one line.
    pub fn check_available(&self) -> Result<(), String> {
        if let Device::Cuda(_) = self.device {
            return Err(format!(
                "Device {}: no CUDA device found (this build generates on the CPU only)",
                self.device
            ));
        }
        if self.partitions != 1 {
            return Err(format!(
                "Partitions {}: this build runs the model in 1 partition only",
                self.partitions
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_and_print() {
        assert_eq!(Device::parse("cpu"), Ok(Device::Cpu));
        assert_eq!(Device::parse(" cuda "), Ok(Device::Cuda(0)));
        assert_eq!(Device::parse("cuda:3"), Ok(Device::Cuda(3)));
        assert_eq!(Device::Cuda(3).to_string(), "cuda:3");
        for bad in ["gpu", "cuda:", "cuda:x", ""] {
            let error = Device::parse(bad).unwrap_err();
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
    fn only_cpu_in_one_partition_is_available_in_this_build() {
        assert_eq!(ExecutionOptions::default().check_available(), Ok(()));
        let cuda = ExecutionOptions {
            device: Device::Cuda(1),
            partitions: 1,
        };
        assert!(
            cuda.check_available()
                .unwrap_err()
                .contains("no CUDA device found")
        );
        let split = ExecutionOptions {
            device: Device::Cpu,
            partitions: 2,
        };
        assert!(
            split
                .check_available()
                .unwrap_err()
                .starts_with("Partitions 2")
        );
    }
}
