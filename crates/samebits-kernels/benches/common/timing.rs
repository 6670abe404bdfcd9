//! Timing shared by the benches: median wall-clock and median CPU time per call.
//!
//! The machines these run on are shared, so wall time includes time spent descheduled. CPU time
//! (summed over the process's threads, from `/proc/self/task/*/schedstat`, Linux only) does not,
//! which makes single-thread comparisons robust to load; with several threads it measures total
//! work (idle spinning included), not latency.

use std::time::{Duration, Instant};

/// CPU time used so far by all live threads of this process, when the platform reports it.
pub fn process_cpu() -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

/// Median wall time and median CPU time per call of `f`. Each sample repeats `f` for at least
/// 20 ms (so reading the CPU clock costs little); samples continue until `budget` has passed and
/// there are at least 5.
pub fn measure(budget: Duration, mut f: impl FnMut()) -> (Duration, Option<Duration>) {
    let t = Instant::now();
    f();
    let reps = (Duration::from_millis(20).as_secs_f64() / t.elapsed().as_secs_f64().max(1e-7))
        .ceil()
        .clamp(1.0, 10_000.0) as u32;
    let start = Instant::now();
    let (mut walls, mut cpus) = (Vec::new(), Vec::new());
    while walls.len() < 5 || start.elapsed() < budget {
        let cpu0 = process_cpu();
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        walls.push(t.elapsed() / reps);
        if let (Some(c0), Some(c1)) = (cpu0, process_cpu()) {
            cpus.push(c1.saturating_sub(c0) / reps);
        }
    }
    walls.sort();
    cpus.sort();
    let cpu = (cpus.len() == walls.len()).then(|| cpus[cpus.len() / 2]);
    (walls[walls.len() / 2], cpu)
}

/// Load average over the last minute, as the kernel reports it.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "n/a".to_string())
}
