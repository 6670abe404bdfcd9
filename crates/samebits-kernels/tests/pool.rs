//! Pooling against a direct-definition oracle, bit for bit, and its output-size rules.

mod common;

use common::{Rng, assert_bits_eq, on_threads};
use samebits_kernels::{
    Isa, PoolGeometry, PoolKind, canonical_max, canonical_sum, global_pool_f32, pool_f32,
};

fn geometry(
    in_spatial: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: (&[usize], &[usize]),
    ceil_mode: bool,
) -> PoolGeometry {
    PoolGeometry {
        batch: 2,
        channels: 3,
        in_spatial: in_spatial.to_vec(),
        kernel: kernel.to_vec(),
        strides: strides.to_vec(),
        dilations: dilations.to_vec(),
        pads_begin: pads.0.to_vec(),
        pads_end: pads.1.to_vec(),
        ceil_mode,
    }
}

fn unflatten(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    idx
}

/// Oracle: gather the in-input taps in row-major order, `canonical_sum` / fold `canonical_max`.
fn oracle(g: &PoolGeometry, kind: PoolKind, x: &[f32]) -> Vec<f32> {
    let out_sp = g.out_spatial();
    let in_len: usize = g.in_spatial.iter().product();
    let out_len: usize = out_sp.iter().product();
    let klen: usize = g.kernel.iter().product();
    let mut out = Vec::new();
    for plane in 0..g.batch * g.channels {
        for o in 0..out_len {
            let o_idx = unflatten(o, &out_sp);
            let (mut taps, mut padded_count) = (Vec::new(), 0);
            for t in 0..klen {
                let t_idx = unflatten(t, &g.kernel);
                let padded: Vec<usize> = (0..o_idx.len())
                    .map(|d| o_idx[d] * g.strides[d] + t_idx[d] * g.dilations[d])
                    .collect();
                if (0..padded.len())
                    .any(|d| padded[d] >= g.pads_begin[d] + g.in_spatial[d] + g.pads_end[d])
                {
                    continue;
                }
                padded_count += 1;
                let pos: Option<Vec<usize>> = (0..padded.len())
                    .map(|d| {
                        padded[d]
                            .checked_sub(g.pads_begin[d])
                            .filter(|&p| p < g.in_spatial[d])
                    })
                    .collect();
                if let Some(pos) = pos {
                    let flat = pos
                        .iter()
                        .zip(&g.in_spatial)
                        .fold(0, |acc, (&p, &s)| acc * s + p);
                    taps.push(x[plane * in_len + flat]);
                }
            }
            out.push(match kind {
                PoolKind::Max => taps.iter().copied().fold(f32::NEG_INFINITY, canonical_max),
                PoolKind::Average { count_include_pad } => {
                    let count = if count_include_pad {
                        padded_count
                    } else {
                        taps.len()
                    };
                    canonical_sum(&taps) / count as f32
                }
            });
        }
    }
    out
}

#[test]
fn pooling_matches_oracle() {
    let mut rng = Rng::new(31);
    let cases = [
        geometry(&[11], &[3], &[2], &[1], (&[1], &[1]), false),
        geometry(
            &[9, 10],
            &[3, 3],
            &[2, 2],
            &[1, 1],
            (&[1, 1], &[1, 1]),
            true,
        ),
        geometry(
            &[7, 8],
            &[2, 3],
            &[2, 1],
            &[2, 1],
            (&[0, 1], &[1, 0]),
            false,
        ),
        geometry(&[6, 6], &[3, 3], &[2, 2], &[1, 1], (&[1, 1], &[0, 0]), true),
        geometry(
            &[4, 5, 6],
            &[2, 2, 3],
            &[2, 2, 2],
            &[1, 1, 1],
            (&[0, 1, 1], &[1, 0, 1]),
            true,
        ),
        // A 9x9 window: 81 taps, two reduction tiles.
        geometry(
            &[12, 12],
            &[9, 9],
            &[3, 3],
            &[1, 1],
            (&[2, 2], &[2, 2]),
            false,
        ),
        // ONNX's maxpool_3d_default (stride 1, no padding), and a dilated 3-d window whose
        // last-axis taps leave the input on both sides.
        geometry(
            &[9, 8, 10],
            &[2, 2, 2],
            &[1, 1, 1],
            &[1, 1, 1],
            (&[0, 0, 0], &[0, 0, 0]),
            false,
        ),
        geometry(
            &[5, 6, 9],
            &[2, 3, 3],
            &[1, 2, 2],
            &[2, 1, 3],
            (&[1, 0, 2], &[0, 2, 3]),
            true,
        ),
    ];
    let kinds = [
        PoolKind::Max,
        PoolKind::Average {
            count_include_pad: false,
        },
        PoolKind::Average {
            count_include_pad: true,
        },
    ];
    for g in cases {
        let in_len: usize = g.in_spatial.iter().product();
        let plain = rng.vec(g.batch * g.channels * in_len);
        // For max, values where its order rules matter: NaNs with a payload (max gives the
        // canonical NaN; a sum's NaN payload is the hardware's, outside the contract), signed
        // zeros, infinities.
        let mut special = plain.clone();
        let specials = [
            f32::from_bits(0xffc0_0123),
            -0.0,
            0.0,
            f32::NEG_INFINITY,
            f32::INFINITY,
        ];
        for (i, v) in special.iter_mut().enumerate().filter(|(i, _)| i % 37 == 5) {
            *v = specials[i / 37 % specials.len()];
        }
        let out_len: usize = g.out_spatial().iter().product();
        for kind in kinds {
            let x = if kind == PoolKind::Max {
                &special
            } else {
                &plain
            };
            let want = oracle(&g, kind, x);
            for (threads, isa) in [(1, Isa::Scalar), (1, Isa::detect()), (2, Isa::detect())] {
                let got = on_threads(threads, isa, || {
                    let mut out = vec![f32::NAN; g.batch * g.channels * out_len];
                    pool_f32(&g, kind, x, &mut out);
                    out
                });
                let case = format!("{kind:?} {g:?}, {threads} threads, {isa:?}");
                assert_bits_eq(&got, &want, &case);
            }
        }
    }
}

#[test]
fn output_sizes_follow_floor_and_ceil_rules() {
    let g = |in_w, k, s, pad, ceil| {
        geometry(&[in_w], &[k], &[s], &[1], (&[pad], &[pad]), ceil).out_spatial()[0]
    };
    assert_eq!(g(5, 2, 2, 0, false), 2);
    assert_eq!(g(5, 2, 2, 0, true), 3);
    assert_eq!(g(6, 3, 2, 1, true), 4);
    // The last ceil-mode window would start in the trailing padding: dropped.
    assert_eq!(g(4, 2, 2, 1, true), 3);
}

#[test]
fn global_pooling_is_a_canonical_reduction() {
    let mut rng = Rng::new(32);
    let (planes, len) = (5, 300);
    let x = rng.vec(planes * len);
    let mut avg = vec![0.0; planes];
    let mut max = vec![0.0; planes];
    global_pool_f32(
        PoolKind::Average {
            count_include_pad: false,
        },
        &x,
        planes,
        len,
        &mut avg,
    );
    global_pool_f32(PoolKind::Max, &x, planes, len, &mut max);
    for p in 0..planes {
        let plane = &x[p * len..(p + 1) * len];
        assert_eq!(
            avg[p].to_bits(),
            (canonical_sum(plane) / len as f32).to_bits()
        );
        assert_eq!(
            max[p].to_bits(),
            plane
                .iter()
                .copied()
                .fold(f32::NEG_INFINITY, canonical_max)
                .to_bits()
        );
    }
}
