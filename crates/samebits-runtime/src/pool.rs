//! Where a CPU run executes: [`run_in_pool`] hands a whole plan run to one thread of the rayon
//! pool and keeps the pool's other threads awake until it returns.
//!
//! A decode step or a small ONNX model is hundreds of short parallel loops with serial ops in
//! between. Run from outside the pool, every loop would wake the pool and sleep until it is
//! done; run inside it, the loops are work-stolen, but a worker that finds nothing to steal
//! during a serial op goes to sleep after a few rounds, and the next loop waits for the kernel
//! to wake it (a futex wake and a context switch, for every loop). So for the length of the run
//! the other workers take the pool's jobs as they appear and spin in between ([`steal_until`]),
//! as llama.cpp's and ONNX Runtime's workers do. Which thread computes a value changes; the
//! value never does (every op's bits are independent of the thread that computes them).

use samebits_kernels::{Isa, with_isa};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a run keeps the pool awake now: one at a time (see [`run_in_pool`]).
static AWAKE: AtomicBool = AtomicBool::new(false);

/// Lets [`AWAKE`] go when the awake run is over, panicking or not.
struct AwakeRun;

impl Drop for AwakeRun {
    fn drop(&mut self) {
        AWAKE.store(false, Ordering::Release);
    }
}

/// Runs `run` on one thread of the rayon pool with the caller's ISA scope. With `keep_awake`
/// the pool's other threads (one per core at most: a thread spinning on a core that another
/// worker needs would slow the run down) take its parallel jobs as they appear and spin in
/// between until it returns; without, they sleep when idle (a GPU run, whose host thread
/// mostly waits on the device).
///
/// Only a run started from outside the pool, and only one at a time, keeps the pool awake. A
/// spinning worker runs whatever job it finds, another run's included: were runs from inside
/// the pool (runs in a parallel loop, as the conformance suite makes) to spin as well, each
/// would nest in another's spinner on the same stack without bound (seen: a stack overflow).
/// The others run as plain pool runs.
pub fn run_in_pool<R: Send>(keep_awake: bool, run: impl FnOnce() -> R + Send) -> R {
    let isa = Isa::active();
    let awake = (keep_awake
        && rayon::current_thread_index().is_none()
        && AWAKE
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok())
    .then_some(AwakeRun);
    let done = AtomicBool::new(false);
    let result = rayon::scope(|scope| {
        if awake.is_some() && rayon::current_num_threads() > 1 {
            let runner = rayon::current_thread_index();
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let done = &done;
            scope.spawn_broadcast(move |_, thread| {
                if Some(thread.index()) != runner && thread.index() < cores {
                    steal_until(done);
                }
            });
        }
        let result = with_isa(isa, run);
        done.store(true, Ordering::Release);
        result
    });
    drop(awake);
    result
}

/// Runs the pool's pending jobs on this worker until `done`; between jobs it spins, and every
/// 256 idle turns it gives its core to the OS for a moment (for a machine running other work).
fn steal_until(done: &AtomicBool) {
    let mut idle = 0u32;
    while !done.load(Ordering::Acquire) {
        if let Some(rayon::Yield::Executed) = rayon::yield_now() {
            idle = 0;
            continue;
        }
        idle = idle.wrapping_add(1);
        if idle.is_multiple_of(256) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::run_in_pool;
    use rayon::prelude::*;

    /// The run's parallel loops give their values with the other workers awake or asleep, the
    /// spinning workers stop when the run returns (the test would hang otherwise), and a run
    /// from inside the pool or from outside it both come back.
    #[test]
    fn runs_return_their_values_and_release_the_workers() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let want: u64 = (0..100_000u64).map(|i| i * i % 7).sum();
        for keep_awake in [true, false] {
            for _ in 0..50 {
                let got = pool.install(|| {
                    run_in_pool(keep_awake, || {
                        (0..100_000u64)
                            .into_par_iter()
                            .map(|i| i * i % 7)
                            .sum::<u64>()
                    })
                });
                assert_eq!(got, want, "keep_awake {keep_awake}");
            }
        }
        let outside = run_in_pool(true, || (0..1000u64).into_par_iter().sum::<u64>());
        assert_eq!(outside, 499_500);
        // Runs inside a parallel loop of runs (the conformance suite's shape) neither nest
        // spinners nor deadlock.
        let nested: Vec<u64> = pool.install(|| {
            (0..64u64)
                .into_par_iter()
                .map(|i| run_in_pool(true, || (0..1000u64).into_par_iter().map(|v| v + i).sum()))
                .collect()
        });
        assert_eq!(
            nested,
            (0..64u64).map(|i| 499_500 + 1000 * i).collect::<Vec<_>>()
        );
    }
}
