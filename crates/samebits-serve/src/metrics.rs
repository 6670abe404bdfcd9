//! The server's counters and their Prometheus text exposition (`GET /metrics`, format 0.0.4):
//! queue depth, running sequences, requests by outcome, prompt and generated tokens, generated
//! tokens per second over the last ten seconds, histograms of time to first token and
//! inter-token latency, and where the engine's rounds spend their time (forward passes against
//! sampling, hashing and streaming).

use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Generated to the end (end-of-sequence token, stop string or token budget).
    Finished,
    /// The client went away first.
    Cancelled,
    /// Refused before it ran: a full queue or a shutdown.
    Rejected,
    /// The request was accepted but could not run (e.g. a prompt longer than the context).
    Failed,
}

const OUTCOMES: [(Outcome, &str); 4] = [
    (Outcome::Finished, "finished"),
    (Outcome::Cancelled, "cancelled"),
    (Outcome::Rejected, "rejected"),
    (Outcome::Failed, "failed"),
];

/// Upper bounds (seconds) of the latency histograms' buckets.
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// The window of the tokens-per-second gauge.
const RATE_WINDOW: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (bound, count) in BUCKETS.iter().zip(&mut self.counts) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", self.sum, self.count);
    }
}

#[derive(Default)]
struct State {
    queued: u64,
    running: u64,
    outcomes: [u64; OUTCOMES.len()],
    prompt_tokens: u64,
    generated_tokens: u64,
    /// When tokens were generated, for the rate gauge (at most one entry per engine step).
    recent: VecDeque<(Instant, u64)>,
    time_to_first_token: Histogram,
    inter_token_latency: Histogram,
    rounds: u64,
    round_sequences: u64,
    forward_seconds: f64,
    sampling_seconds: f64,
}

/// The counters, shared by the HTTP handlers and the engine thread.
#[derive(Default)]
pub struct Metrics {
    state: Mutex<State>,
}

impl Metrics {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A request entered the queue.
    pub fn enqueued(&self) {
        self.with(|s| s.queued += 1);
    }

    /// A request left the queue for the engine.
    pub fn dequeued(&self) {
        self.with(|s| s.queued = s.queued.saturating_sub(1));
    }

    /// Sequences the engine is generating now.
    pub fn set_running(&self, running: usize) {
        self.with(|s| s.running = running as u64);
    }

    pub fn ended(&self, outcome: Outcome) {
        let at = OUTCOMES.iter().position(|(o, _)| *o == outcome);
        self.with(|s| s.outcomes[at.expect("every outcome is listed")] += 1);
    }

    pub fn prompt_tokens(&self, n: usize) {
        self.with(|s| s.prompt_tokens += n as u64);
    }

    /// `n` tokens were generated now.
    pub fn generated(&self, n: usize) {
        let now = Instant::now();
        self.with(|s| {
            s.generated_tokens += n as u64;
            s.recent.push_back((now, n as u64));
            while s
                .recent
                .front()
                .is_some_and(|(t, _)| now.duration_since(*t) > RATE_WINDOW)
            {
                s.recent.pop_front();
            }
        });
    }

    pub fn time_to_first_token(&self, time: Duration) {
        self.with(|s| s.time_to_first_token.observe(time.as_secs_f64()));
    }

    pub fn inter_token_latency(&self, time: Duration) {
        self.with(|s| s.inter_token_latency.observe(time.as_secs_f64()));
    }

    /// One engine round ran `sequences` sequences: `forward` in the forward passes (the receipt
    /// hashes of the round before run beside them), `sampling` taking their tokens (sampling,
    /// text, events).
    pub fn round(&self, sequences: usize, forward: Duration, sampling: Duration) {
        self.with(|s| {
            s.rounds += 1;
            s.round_sequences += sequences as u64;
            s.forward_seconds += forward.as_secs_f64();
            s.sampling_seconds += sampling.as_secs_f64();
        });
    }

    /// Requests waiting for the engine.
    pub fn queue_depth(&self) -> u64 {
        self.with(|s| s.queued)
    }

    /// Requests that ended with `outcome` so far.
    pub fn count(&self, outcome: Outcome) -> u64 {
        let at = OUTCOMES.iter().position(|(o, _)| *o == outcome);
        self.with(|s| s.outcomes[at.expect("every outcome is listed")])
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let now = Instant::now();
        self.with(|s| {
            let mut out = String::new();
            let gauge = |out: &mut String, name: &str, help: &str, value: f64| {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
                );
            };
            gauge(
                &mut out,
                "samebits_queue_depth",
                "Requests waiting for the engine.",
                s.queued as f64,
            );
            gauge(
                &mut out,
                "samebits_running_sequences",
                "Sequences being generated.",
                s.running as f64,
            );
            if let Some(bytes) = crate::memory::resident_bytes() {
                gauge(
                    &mut out,
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes.",
                    bytes as f64,
                );
            }
            let recent: u64 = s
                .recent
                .iter()
                .filter(|(t, _)| now.duration_since(*t) <= RATE_WINDOW)
                .map(|(_, n)| n)
                .sum();
            gauge(
                &mut out,
                "samebits_generated_tokens_per_second",
                "Tokens generated per second over the last 10 seconds.",
                recent as f64 / RATE_WINDOW.as_secs_f64(),
            );
            let name = "samebits_requests_total";
            let _ = writeln!(
                out,
                "# HELP {name} Requests by how they ended.\n# TYPE {name} counter"
            );
            for ((_, label), count) in OUTCOMES.iter().zip(&s.outcomes) {
                let _ = writeln!(out, "{name}{{outcome=\"{label}\"}} {count}");
            }
            for (name, help, value) in [
                (
                    "samebits_prompt_tokens_total",
                    "Prompt tokens processed.",
                    s.prompt_tokens,
                ),
                (
                    "samebits_generated_tokens_total",
                    "Tokens generated.",
                    s.generated_tokens,
                ),
                (
                    "samebits_engine_rounds_total",
                    "Engine rounds (one forward pass per running sequence's next tokens).",
                    s.rounds,
                ),
                (
                    "samebits_engine_round_sequences_total",
                    "Sequences run, summed over the rounds (over rounds: the mean batch).",
                    s.round_sequences,
                ),
            ] {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
                );
            }
            for (name, help, value) in [
                (
                    "samebits_engine_forward_seconds_total",
                    "Time the engine's rounds spent in forward passes.",
                    s.forward_seconds,
                ),
                (
                    "samebits_engine_sampling_seconds_total",
                    "Time the engine's rounds spent taking tokens (sampling, text, events).",
                    s.sampling_seconds,
                ),
            ] {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
                );
            }
            s.time_to_first_token.render(
                &mut out,
                "samebits_time_to_first_token_seconds",
                "From a request's arrival to its first generated token.",
            );
            s.inter_token_latency.render(
                &mut out,
                "samebits_inter_token_latency_seconds",
                "Between consecutive tokens of one sequence.",
            );
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_carries_every_counter() {
        let m = Metrics::default();
        m.enqueued();
        m.enqueued();
        m.dequeued();
        m.set_running(3);
        m.ended(Outcome::Finished);
        m.ended(Outcome::Cancelled);
        m.ended(Outcome::Cancelled);
        m.prompt_tokens(7);
        m.generated(20);
        m.time_to_first_token(Duration::from_millis(30));
        m.inter_token_latency(Duration::from_millis(8));
        m.round(4, Duration::from_millis(250), Duration::from_millis(500));
        m.round(2, Duration::from_millis(250), Duration::ZERO);
        let text = m.render();
        for line in [
            "samebits_queue_depth 1",
            "samebits_running_sequences 3",
            "samebits_generated_tokens_per_second 2",
            "samebits_requests_total{outcome=\"finished\"} 1",
            "samebits_requests_total{outcome=\"cancelled\"} 2",
            "samebits_requests_total{outcome=\"rejected\"} 0",
            "samebits_prompt_tokens_total 7",
            "samebits_generated_tokens_total 20",
            "samebits_time_to_first_token_seconds_bucket{le=\"0.025\"} 0",
            "samebits_time_to_first_token_seconds_bucket{le=\"0.05\"} 1",
            "samebits_time_to_first_token_seconds_count 1",
            "samebits_inter_token_latency_seconds_bucket{le=\"0.01\"} 1",
            "samebits_inter_token_latency_seconds_bucket{le=\"+Inf\"} 1",
            "samebits_engine_rounds_total 2",
            "samebits_engine_round_sequences_total 6",
            "samebits_engine_forward_seconds_total 0.5",
            "samebits_engine_sampling_seconds_total 0.5",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert_eq!(m.queue_depth(), 1);
        assert_eq!(m.count(Outcome::Cancelled), 2);
    }
}
