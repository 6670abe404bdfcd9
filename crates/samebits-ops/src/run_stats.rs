//! [`RunStats`]: what one run of a plan on a device did (steps on device kernels, steps that
//! fell back to the CPU op, copies between host and device). Device executors count it; it
//! lives here, beside [`crate::Plan`], so that a build without any device backend still has it.

use std::collections::BTreeMap;

/// What one run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Steps that ran a device kernel.
    pub device_steps: usize,
    /// Device operations those steps made (a fused group of steps is one; view steps none).
    pub device_launches: usize,
    /// Steps that fell back to the CPU, by op type.
    pub host_steps: BTreeMap<String, usize>,
    /// Steps that only read shapes or give a host tensor a new shape: Shape and Size (from the
    /// shapes the device knows, nothing downloaded) and view steps (Reshape, Unsqueeze,
    /// Identity, a Cast to the same dtype, ...) of values held on the host. No data is
    /// computed or copied, so they are not fallbacks.
    pub shape_only_steps: usize,
    /// Host-to-device copies and their bytes (constants count once per executor).
    pub uploads: usize,
    pub upload_bytes: usize,
    /// Device-to-host copies and their bytes.
    pub downloads: usize,
    pub download_bytes: usize,
    /// Runs that replayed a recorded CUDA graph instead of launching their steps one by one.
    pub graph_replays: usize,
}

impl RunStats {
    /// Steps that fell back to the CPU.
    pub fn host_step_count(&self) -> usize {
        self.host_steps.values().sum()
    }

    /// Adds another run's counts.
    pub fn add(&mut self, other: &RunStats) {
        self.device_steps += other.device_steps;
        self.device_launches += other.device_launches;
        self.shape_only_steps += other.shape_only_steps;
        for (op, n) in &other.host_steps {
            *self.host_steps.entry(op.clone()).or_default() += n;
        }
        self.uploads += other.uploads;
        self.upload_bytes += other.upload_bytes;
        self.downloads += other.downloads;
        self.download_bytes += other.download_bytes;
        self.graph_replays += other.graph_replays;
    }
}
