//! Greedy generation alone and in ragged batches, for the batch-invariance tests of
//! `tests/smollm2.rs` (CPU, every ISA and thread count) and `tests/gpu.rs` (GPU batches against
//! the CPU alone): each returns, per prompt, the logits of the prefill's last row and of
//! `steps` greedy decode steps.

use samebits_llm::sampling::argmax;
use samebits_llm::{KvCache, Llm};

/// `prompt` alone: [`Llm::forward_last`] over the prompt, then one token at a time.
pub fn alone(llm: &Llm, prompt: &[u32], steps: usize) -> Vec<Vec<f32>> {
    let mut cache = llm.new_cache();
    let mut logits = llm.forward_last(prompt, &mut cache).unwrap();
    let mut rows = vec![logits.clone()];
    for _ in 0..steps {
        logits = llm.forward(&[argmax(&logits)], &mut cache).unwrap();
        rows.push(logits.clone());
    }
    rows
}

/// Every prompt in rounds of [`Llm::forward_last_batch`]: prompt `p` joins at round `p` (its
/// prefill beside the others' decode steps) and leaves after its `steps` decode steps, so the
/// batch grows, mixes prefills with decode steps of caches of different lengths, and shrinks
/// back to one sequence.
pub fn joining_rounds(llm: &Llm, prompts: &[Vec<u32>], steps: usize) -> Vec<Vec<Vec<f32>>> {
    let mut caches: Vec<KvCache> = prompts.iter().map(|_| llm.new_cache()).collect();
    let mut rows: Vec<Vec<Vec<f32>>> = vec![Vec::new(); prompts.len()];
    let mut next: Vec<Vec<u32>> = prompts.to_vec();
    for round in 0..prompts.len() + steps {
        let members: Vec<usize> = (0..prompts.len())
            .filter(|&p| p <= round && rows[p].len() <= steps)
            .collect();
        let mut batch: Vec<(&[u32], &mut KvCache)> = caches
            .iter_mut()
            .enumerate()
            .filter(|(p, _)| members.contains(p))
            .map(|(p, cache)| (next[p].as_slice(), cache))
            .collect();
        let logits = llm.forward_last_batch(&mut batch).unwrap();
        for (&p, row) in members.iter().zip(logits) {
            next[p] = vec![argmax(&row)];
            rows[p].push(row);
        }
    }
    rows
}
