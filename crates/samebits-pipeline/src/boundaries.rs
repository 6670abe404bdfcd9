//! Stage boundaries: where a model is cut into N pipeline stages (docs/pipeline.md, normative).
//!
//! A model is a sequence of *units* with a parameter byte count each: the nodes of an ONNX graph
//! in topological order, or the layers of a decoder. [`balanced_cuts`] splits the sequence into
//! N runs of consecutive units that minimise the largest run's bytes, then the sum of the runs'
//! squared bytes (the most even split), the earliest cuts winning the remaining ties. [`split_graph`] applies it to an ONNX graph: each stage becomes a graph of its own whose
//! inputs are the values live across the cut before it and whose outputs are those live across
//! the cut after it. [`layer_stages`] applies it to decoder layers.

use crate::{PipelineError, Result};
use samebits_ir::{Graph, ValueInfo};
use samebits_ops::{node_captures, topological_order};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Range;

/// The boundaries `0 = b_0 < b_1 < ... < b_n = weights.len()` of `n` non-empty stages of
/// consecutive units: among the splits whose largest stage (sum of its units' weights) is
/// smallest, those with the smallest sum of squared stage weights (the most even), and among
/// those the one with the earliest cuts (lexicographically smallest `b_1, b_2, ...`).
pub fn balanced_cuts(weights: &[u64], n: usize) -> Result<Vec<usize>> {
    let len = weights.len();
    if n == 0 {
        return Err(PipelineError::Usage(
            "pipeline parallelism needs at least 1 partition; got 0".into(),
        ));
    }
    if n > len {
        return Err(PipelineError::Usage(format!(
            "{n} partitions need at least {n} units to place; there are {len}"
        )));
    }
    let prefix: Vec<u128> = std::iter::once(0)
        .chain(weights.iter().scan(0u128, |s, &w| {
            *s += u128::from(w);
            Some(*s)
        }))
        .collect();
    let sum = |a: usize, b: usize| prefix[b] - prefix[a];
    // The smallest limit that n stages can keep: binary search over the greedy part count.
    let (mut lo, mut hi) = (
        u128::from(weights.iter().copied().max().unwrap_or(0)),
        prefix[len],
    );
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if min_parts(weights, mid) <= n {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let limit = lo;
    // best[j][c]: the least sum of squared stage weights of units c.. in j stages of at most
    // `limit` each (None: impossible). Squares of real parameter byte counts (below 2^60) fit
    // u128 easily; saturation only guards against overflow on absurd inputs.
    let mut best = vec![vec![None::<u128>; len + 1]; n + 1];
    best[0][len] = Some(0);
    for j in 1..=n {
        for c in (0..len).rev() {
            best[j][c] = (c + 1..=len)
                .take_while(|&e| sum(c, e) <= limit)
                .filter_map(|e| Some(best[j - 1][e]?.saturating_add(sum(c, e).pow(2))))
                .min();
        }
    }
    let mut bounds = vec![0];
    for j in (1..=n).rev() {
        let c = *bounds.last().expect("starts at 0");
        let target = best[j][c].expect("the optimal limit admits a split");
        let end = (c + 1..=len)
            .find(|&e| {
                sum(c, e) <= limit
                    && best[j - 1][e].map(|b| b.saturating_add(sum(c, e).pow(2))) == Some(target)
            })
            .expect("the optimum is reached by some first cut");
        bounds.push(end);
    }
    Ok(bounds)
}

/// The fewest stages of consecutive units, each weighing at most `limit` (every unit must fit).
fn min_parts(weights: &[u64], limit: u128) -> usize {
    let (mut parts, mut current) = (0usize, 0u128);
    for &w in weights {
        let w = u128::from(w);
        if parts == 0 || current + w > limit {
            parts += 1;
            current = w;
        } else {
            current += w;
        }
    }
    parts
}

/// Decoder layer ranges of `n` stages balanced by `layer_bytes` (each layer's parameter bytes,
/// the embedding counted with the first layer and the output head with the last).
pub fn layer_stages(layer_bytes: &[u64], n: usize) -> Result<Vec<Range<usize>>> {
    if n > layer_bytes.len() {
        return Err(PipelineError::Usage(format!(
            "pipeline parallelism with {n} partitions needs at least {n} decoder layers; the \
             model has {}",
            layer_bytes.len()
        )));
    }
    let bounds = balanced_cuts(layer_bytes, n)?;
    Ok(bounds.windows(2).map(|w| w[0]..w[1]).collect())
}

/// One stage of an ONNX graph.
#[derive(Clone, Debug)]
pub struct StageGraph {
    /// Positions of its nodes in the topological order.
    pub nodes: Range<usize>,
    /// Parameter bytes counted for it (each initializer at its first reader).
    pub param_bytes: u64,
    /// The values it receives (the graph's inputs for the first stage), in order.
    pub inputs: Vec<String>,
    /// The values it sends on (the graph's outputs for the last stage), in order.
    pub outputs: Vec<String>,
    /// The stage as a graph of its own: its nodes, the initializers they read, `inputs` and
    /// `outputs`.
    pub graph: Graph,
}

/// The nodes of `graph` in the topological order samebits executes them
/// ([`samebits_ops::topological_order`]).
pub fn node_order(graph: &Graph) -> Result<Vec<usize>> {
    let mut available: BTreeSet<String> = graph.inputs.iter().map(|v| v.name.clone()).collect();
    available.extend(graph.initializers.keys().cloned());
    Ok(topological_order(graph, &available)?)
}

/// The names node `i` reads: its inputs and the outer values its subgraphs capture.
fn reads(graph: &Graph, i: usize) -> BTreeSet<String> {
    let node = &graph.nodes[i];
    let mut names: BTreeSet<String> = node
        .inputs
        .iter()
        .filter(|n| !n.is_empty())
        .cloned()
        .collect();
    names.extend(node_captures(node));
    names
}

/// Each node's parameter bytes, in `order`: the bytes of the initializers it reads that no
/// earlier node read.
pub fn node_bytes(graph: &Graph, order: &[usize]) -> Result<Vec<u64>> {
    let mut seen = HashSet::new();
    let mut bytes = Vec::with_capacity(order.len());
    for &i in order {
        let mut b = 0u64;
        for name in reads(graph, i) {
            if let Some(t) = graph.initializers.get(&name)
                && seen.insert(name)
            {
                b += (t.numel() * t.dtype().size()) as u64;
            }
        }
        bytes.push(b);
    }
    Ok(bytes)
}

/// Cuts `graph` into `n` stages balanced by parameter bytes (module doc).
pub fn split_graph(graph: &Graph, n: usize) -> Result<Vec<StageGraph>> {
    let order = node_order(graph)?;
    if n > order.len() {
        return Err(PipelineError::Usage(format!(
            "pipeline parallelism with {n} partitions needs at least {n} nodes to cut between; \
             the graph has {} after optimisation",
            order.len()
        )));
    }
    let bytes = node_bytes(graph, &order)?;
    let bounds = balanced_cuts(&bytes, n)?;
    let node_reads: Vec<BTreeSet<String>> = order.iter().map(|&i| reads(graph, i)).collect();
    // Every value a stage boundary may carry, in definition order: runtime inputs, then node
    // outputs in topological order; `defined_at` is the position of the producing node + 1.
    let mut defined_at: HashMap<&str, usize> = HashMap::new();
    let mut definition_order: Vec<&str> = Vec::new();
    for input in graph.runtime_inputs() {
        defined_at.insert(&input.name, 0);
        definition_order.push(&input.name);
    }
    for (position, &i) in order.iter().enumerate() {
        for output in graph.nodes[i].outputs.iter().filter(|o| !o.is_empty()) {
            defined_at.insert(output, position + 1);
            definition_order.push(output);
        }
    }
    // The last position reading each value (graph outputs count as read at the end).
    let mut last_read: HashMap<&str, usize> = HashMap::new();
    for (position, names) in node_reads.iter().enumerate() {
        for name in names {
            last_read.insert(name, position);
        }
    }
    for output in &graph.outputs {
        last_read.insert(&output.name, order.len());
    }
    // Live across cut c: defined before c and read at or after c.
    let live = |c: usize| -> Vec<String> {
        definition_order
            .iter()
            .filter(|name| defined_at[*name] <= c && last_read.get(*name).is_some_and(|&r| r >= c))
            .map(|name| name.to_string())
            .collect()
    };
    let info = |name: &str| ValueInfo {
        name: name.to_string(),
        ty: graph.value_type(name),
    };
    let mut stages = Vec::with_capacity(n);
    for (k, w) in bounds.windows(2).enumerate() {
        let (a, b) = (w[0], w[1]);
        let first = k == 0;
        let last = b == order.len();
        let inputs: Vec<ValueInfo> = match first {
            true => graph.runtime_inputs().cloned().collect(),
            false => live(a).iter().map(|name| info(name)).collect(),
        };
        let outputs: Vec<ValueInfo> = match last {
            true => graph.outputs.clone(),
            false => live(b).iter().map(|name| info(name)).collect(),
        };
        let mut needed: BTreeSet<&str> = node_reads[a..b]
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        needed.extend(outputs.iter().map(|o| o.name.as_str()));
        let initializers = graph
            .initializers
            .iter()
            .filter(|(name, _)| needed.contains(name.as_str()))
            .map(|(name, t)| (name.clone(), t.clone()))
            .collect();
        stages.push(StageGraph {
            nodes: a..b,
            param_bytes: bytes[a..b].iter().sum(),
            inputs: inputs.iter().map(|v| v.name.clone()).collect(),
            outputs: outputs.iter().map(|v| v.name.clone()).collect(),
            graph: Graph {
                name: format!("{}.stage{k}", graph.name),
                inputs,
                outputs,
                nodes: order[a..b]
                    .iter()
                    .map(|&i| graph.nodes[i].clone())
                    .collect(),
                initializers,
                value_types: graph.value_types.clone(),
            },
        });
    }
    Ok(stages)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every split into n non-empty runs, cut vectors in lexicographic order.
    fn all_cuts(len: usize, n: usize) -> Vec<Vec<usize>> {
        fn rec(
            start: usize,
            len: usize,
            left: usize,
            acc: &mut Vec<usize>,
            out: &mut Vec<Vec<usize>>,
        ) {
            if left == 1 {
                let mut b = acc.clone();
                b.push(len);
                out.push(b);
                return;
            }
            for e in start + 1..=len - (left - 1) {
                acc.push(e);
                rec(e, len, left - 1, acc, out);
                acc.pop();
            }
        }
        let mut out = Vec::new();
        rec(0, len, n, &mut vec![0], &mut out);
        out
    }

    fn largest(weights: &[u64], bounds: &[usize]) -> u64 {
        bounds
            .windows(2)
            .map(|w| weights[w[0]..w[1]].iter().sum::<u64>())
            .max()
            .unwrap()
    }

    fn squares(weights: &[u64], bounds: &[usize]) -> u128 {
        bounds
            .windows(2)
            .map(|w| u128::from(weights[w[0]..w[1]].iter().sum::<u64>()).pow(2))
            .sum()
    }

    #[test]
    fn balanced_cuts_equal_brute_force_on_every_small_case() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut cases = 0;
        for round in 0..400 {
            let len = 1 + (next() % 9) as usize;
            // Few distinct values and many zeros: ties everywhere.
            let weights: Vec<u64> = (0..len)
                .map(|_| match round % 3 {
                    0 => next() % 4,
                    1 => [0, 0, 5, 100][(next() % 4) as usize],
                    _ => next() % 1000,
                })
                .collect();
            for n in 1..=len {
                let got = balanced_cuts(&weights, n).unwrap();
                let best = all_cuts(len, n)
                    .into_iter()
                    .min_by_key(|b| (largest(&weights, b), squares(&weights, b)))
                    .unwrap();
                assert_eq!(got, best, "weights {weights:?}, n {n}");
                cases += 1;
            }
        }
        assert!(cases > 1000);
    }

    #[test]
    fn balanced_cuts_reject_zero_and_too_many_partitions() {
        let e = balanced_cuts(&[1, 2, 3], 0).unwrap_err().to_string();
        assert!(e.contains("at least 1 partition"), "{e}");
        let e = balanced_cuts(&[1, 2, 3], 4).unwrap_err().to_string();
        assert!(e.contains("4 partitions need at least 4 units"), "{e}");
        let e = layer_stages(&[1; 30], 31).unwrap_err().to_string();
        assert_eq!(
            e,
            "pipeline parallelism with 31 partitions needs at least 31 decoder layers; the model \
             has 30"
        );
    }

    #[test]
    fn layer_stages_balance_a_heavy_embedding_and_head() {
        // 30 equal layers with the embedding on the first and the tied head on the last.
        let mut bytes = vec![10u64; 30];
        bytes[0] += 100;
        bytes[29] += 100;
        let stages = layer_stages(&bytes, 2).unwrap();
        assert_eq!(stages, vec![0..15, 15..30]);
        // 520 bytes: the heaviest of 4 stages weighs at least 130; of the splits that keep 130,
        // 120/120/130/130 is the most even (the earliest of it and its mirror image).
        let stages = layer_stages(&bytes, 4).unwrap();
        assert_eq!(stages, vec![0..2, 2..14, 14..27, 27..30]);
    }
}
