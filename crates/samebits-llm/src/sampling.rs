//! Choosing the next token from logits (docs/contract.md, section `sampling`): greedy argmax
//! when the temperature is 0, else temperature, softmax, top-k, top-p and one uniform draw from a
//! counter-based generator keyed by `(seed, step)`, every step in a fixed order of f32 operations
//! so that the same logits, options and step give the same token on every machine.

use crate::{LlmError, Result};
use samebits_kernels::{ArgKind, argreduce_f32, canonical_sum};
use serde::{Deserialize, Serialize};

/// How to pick tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingOptions {
    /// 0 picks the most likely token (greedy); above 0 divides the logits before the softmax.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; 0 keeps all.
    pub top_k: usize,
    /// Keep the most likely tokens until their probabilities sum to at least `top_p`; 1 keeps
    /// all.
    pub top_p: f32,
    /// Key of the random draws.
    pub seed: u64,
}

impl Default for SamplingOptions {
    fn default() -> Self {
        SamplingOptions {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

impl SamplingOptions {
    /// Errors name the option that is out of range.
    pub fn check(&self) -> Result<()> {
        let temperature_ok = self.temperature.is_finite() && self.temperature >= 0.0;
        if !temperature_ok {
            return Err(LlmError::Usage(format!(
                "--temperature must be a finite number >= 0, got {}",
                self.temperature
            )));
        }
        let top_p_ok = self.top_p > 0.0 && self.top_p <= 1.0;
        if !top_p_ok {
            return Err(LlmError::Usage(format!(
                "--top-p must lie in (0, 1], got {}",
                self.top_p
            )));
        }
        Ok(())
    }
}

/// SplitMix64 (Steele, Lea and Flood, "Fast Splittable Pseudorandom Number Generators",
/// OOPSLA 2014; the finaliser constants of its `mix64` variant as published by Vigna in
/// `splitmix64.c`) used as a counter-based generator: the word for `step` is the `(step + 1)`-th
/// output of SplitMix64 seeded with `seed`, `mix(seed + (step + 1) * 0x9e3779b97f4a7c15)`
/// (wrapping), so any step can be drawn without the ones before it.
pub fn random_word(seed: u64, step: u64) -> u64 {
    let mut z = seed.wrapping_add(step.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The uniform draw in `[0, 1)` for `step`: the top 24 bits of [`random_word`] times `2^-24`
/// (exact in f32).
pub fn uniform(seed: u64, step: u64) -> f32 {
    (random_word(seed, step) >> 40) as f32 * (1.0 / 16_777_216.0)
}

/// The token chosen from one row of logits at generation step `step`.
pub fn sample(logits: &[f32], options: &SamplingOptions, step: u64) -> u32 {
    if options.temperature == 0.0 {
        return argmax(logits);
    }
    // contract: sampling
    let mut probs: Vec<f32> = logits.iter().map(|&l| l / options.temperature).collect();
    samebits_ops::softmax_f32(&mut probs, true);
    let order = kept_order(&probs, options.top_k, options.top_p);
    let kept: Vec<f32> = order.iter().map(|&t| probs[t as usize]).collect();
    let threshold = uniform(options.seed, step) * canonical_sum(&kept);
    let mut cumulative = 0.0f32;
    for (&token, &p) in order.iter().zip(&kept) {
        cumulative += p;
        if threshold < cumulative {
            return token;
        }
    }
    *order.last().expect("at least one token is kept")
}

/// The kept tokens of steps 3 to 5 of the contract's `sampling`, in order: token ids sorted by
/// probability descending, ties by id ascending, cut to `top_k` (0: no cut) and then to the
/// shortest prefix whose running f32 sum reaches `top_p` (1: no cut).
///
/// Each token is one u64 key, [`rank_key`] of its probability above its id, so the order is
/// the keys' ascending order: a total order, whichever algorithm sorts. Only as many tokens are
/// ordered as the cuts can keep: the first `top_k` by selection, or, for `top_p` alone, the
/// first 256, 2048, .. until the running sum reaches `top_p` inside them (the sum over the
/// same first tokens in the same order, so the same cut). Everything else is sorted whole.
fn kept_order(probs: &[f32], top_k: usize, top_p: f32) -> Vec<u32> {
    let mut keys: Vec<u64> = probs
        .iter()
        .enumerate()
        .map(|(id, &p)| (u64::from(rank_key(p)) << 32) | id as u64)
        .collect();
    let mut limit = match top_k {
        0 => keys.len(),
        k => k.min(keys.len()),
    };
    if top_p < 1.0 && top_k == 0 {
        limit = limit.min(256);
    }
    loop {
        let sorted = first_sorted(&mut keys, limit);
        let order: Vec<u32> = sorted.iter().map(|&key| key as u32).collect();
        if top_p >= 1.0 {
            return order;
        }
        let mut cumulative = 0.0f32;
        let reached = order.iter().position(|&t| {
            cumulative += probs[t as usize];
            cumulative >= top_p
        });
        match reached {
            Some(last) => return order[..=last].to_vec(),
            // Every token that may be kept is here and the sum never reached top_p: keep all.
            None if limit == keys.len() || top_k > 0 => return order,
            None => limit = (limit * 8).min(keys.len()),
        }
    }
}

/// A u32 whose ascending order is `p`'s descending [`f32::total_cmp`] order.
fn rank_key(p: f32) -> u32 {
    let bits = p.to_bits();
    // total_cmp's order as unsigned integers: negatives reversed below the positives.
    let ascending = match bits >> 31 {
        1 => !bits,
        _ => bits | 0x8000_0000,
    };
    !ascending
}

/// The `limit` smallest keys, sorted ascending (the rest of `keys` left in any order).
fn first_sorted(keys: &mut [u64], limit: usize) -> &[u64] {
    if limit < keys.len() {
        keys.select_nth_unstable(limit);
    }
    let first = &mut keys[..limit];
    first.sort_unstable();
    first
}

/// The index of the largest logit, the lowest index on ties (contract: reduce-extrema).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut index = [0i64];
    argreduce_f32(
        ArgKind::ArgMax,
        false,
        logits,
        1,
        logits.len(),
        1,
        &mut index,
    );
    index[0] as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_its_published_first_outputs() {
        // SplitMix64 seeded with 1234567, its first two outputs (recomputed from the published
        // algorithm with an independent Python implementation).
        assert_eq!(random_word(1234567, 0), 6457827717110365317);
        assert_eq!(random_word(1234567, 1), 3203168211198807973);
    }

    #[test]
    fn greedy_takes_the_first_maximum() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -2.0]), 1);
        let options = SamplingOptions::default();
        assert_eq!(sample(&[0.5, 0.1, 0.5], &options, 7), 0);
    }

    #[test]
    fn top_k_one_is_greedy_and_draws_depend_only_on_seed_and_step() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 23) as f32 / 5.0).collect();
        let top1 = SamplingOptions {
            temperature: 0.8,
            top_k: 1,
            ..SamplingOptions::default()
        };
        for step in 0..10 {
            assert_eq!(sample(&logits, &top1, step), argmax(&logits));
        }
        let options = SamplingOptions {
            temperature: 1.0,
            top_k: 40,
            top_p: 0.9,
            seed: 42,
        };
        let draws: Vec<u32> = (0..50).map(|s| sample(&logits, &options, s)).collect();
        let again: Vec<u32> = (0..50).map(|s| sample(&logits, &options, s)).collect();
        assert_eq!(draws, again);
        assert!(
            draws.iter().any(|&t| t != draws[0]),
            "sampling should vary: {draws:?}"
        );
    }

    /// Steps 3 to 5 of the contract's `sampling` as written there: the whole order by one
    /// comparison sort, then the cuts.
    fn contract_order(probs: &[f32], top_k: usize, top_p: f32) -> Vec<u32> {
        let mut order: Vec<u32> = (0..probs.len() as u32).collect();
        order.sort_by(|&a, &b| {
            probs[b as usize]
                .total_cmp(&probs[a as usize])
                .then(a.cmp(&b))
        });
        if top_k > 0 {
            order.truncate(top_k);
        }
        if top_p < 1.0 {
            let mut c = 0.0f32;
            let keep = order
                .iter()
                .position(|&t| {
                    c += probs[t as usize];
                    c >= top_p
                })
                .map_or(order.len(), |last| last + 1);
            order.truncate(keep);
        }
        order
    }

    #[test]
    fn kept_order_is_the_contracts_sort_and_cuts() {
        // Rows with many ties (few distinct values), special values, and a peaked softmax of
        // 5000 logits, under every kind of cut (including top_p never reached, and reached
        // only past the first 256 and 2048 tokens).
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            state = random_word(state, 0);
            state
        };
        let specials = [
            0.0f32,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::MIN_POSITIVE / 2.0,
            1.0,
            0.5,
        ];
        let mut rows: Vec<Vec<f32>> = Vec::new();
        rows.push((0..3000).map(|_| (next() % 7) as f32 / 8.0).collect());
        rows.push((0..300).map(|_| specials[(next() % 8) as usize]).collect());
        let mut peaked: Vec<f32> = (0..5000).map(|_| (next() % 1000) as f32 / 40.0).collect();
        samebits_ops::softmax_f32(&mut peaked, true);
        rows.push(peaked);
        let flat = vec![1.0f32 / 5000.0; 5000];
        rows.push(flat);
        for probs in &rows {
            for top_k in [0, 1, 5, 300, 4999, 5000, 9000] {
                for top_p in [1.0f32, 0.999, 0.9, 0.5, 0.3, 1e-9] {
                    assert_eq!(
                        kept_order(probs, top_k, top_p),
                        contract_order(probs, top_k, top_p),
                        "top_k {top_k} top_p {top_p} over {} tokens",
                        probs.len()
                    );
                }
            }
        }
    }

    #[test]
    fn top_p_keeps_the_smallest_prefix_reaching_p() {
        // Probabilities ~[0.6, 0.3, 0.1]: top_p 0.5 keeps only token 2.
        let logits = [0.1f32.ln(), 0.6f32.ln(), 0.3f32.ln()];
        let options = SamplingOptions {
            temperature: 1.0,
            top_p: 0.5,
            ..SamplingOptions::default()
        };
        for step in 0..20 {
            assert_eq!(sample(&logits, &options, step), 1);
        }
    }
}
