//! Convolution and transposed convolution against a direct-definition oracle, bit for bit.

mod common;

use common::{Rng, assert_bits_eq, on_every_isa, on_threads};
use samebits_kernels::{
    ConvGeometry, ConvTransposeGeometry, Isa, OutputMap, PackedConvWeights, canonical_dot,
    conv_f32, conv_f32_mapped, conv_transpose_f32, conv_transpose_f32_mapped,
};
use std::sync::atomic::{AtomicBool, Ordering};

/// Row-major multi-index of `flat` in `shape`.
fn unflatten(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    idx
}

fn flatten(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &s)| acc * s + i)
}

/// Conv oracle: each output is `canonical_dot` over (c in group, taps row-major), 0.0 in padding.
fn conv_oracle(g: &ConvGeometry, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
    let out_sp = g.out_spatial();
    let (cg, mg) = (g.in_channels / g.groups, g.out_channels / g.groups);
    let (in_len, out_len) = (
        g.in_spatial.iter().product::<usize>(),
        out_sp.iter().product(),
    );
    let klen: usize = g.kernel.iter().product();
    let mut out = Vec::new();
    for n in 0..g.batch {
        for m in 0..g.out_channels {
            let group = m / mg;
            for o in 0..out_len {
                let o_idx = unflatten(o, &out_sp);
                let (mut xs, mut ws) = (Vec::new(), Vec::new());
                for c in 0..cg {
                    for t in 0..klen {
                        let t_idx = unflatten(t, &g.kernel);
                        let pos: Option<Vec<usize>> = (0..o_idx.len())
                            .map(|d| {
                                let p = (o_idx[d] * g.strides[d] + t_idx[d] * g.dilations[d])
                                    .checked_sub(g.pads_begin[d])?;
                                (p < g.in_spatial[d]).then_some(p)
                            })
                            .collect();
                        let plane = (n * g.in_channels + group * cg + c) * in_len;
                        xs.push(pos.map_or(0.0, |p| x[plane + flatten(&p, &g.in_spatial)]));
                        ws.push(w[(m * cg + c) * klen + t]);
                    }
                }
                let acc = canonical_dot(&xs, &ws);
                out.push(bias.map_or(acc, |b| acc + b[m]));
            }
        }
    }
    out
}

fn run_conv(g: &ConvGeometry, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
    let mut out = vec![f32::NAN; g.sizes().2];
    conv_f32(g, x, w, bias, &mut out);
    out
}

fn geometry(
    batch: usize,
    (c, m, groups): (usize, usize, usize),
    in_spatial: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    (pads_begin, pads_end): (&[usize], &[usize]),
) -> ConvGeometry {
    ConvGeometry {
        groups,
        strides: strides.to_vec(),
        dilations: dilations.to_vec(),
        pads_begin: pads_begin.to_vec(),
        pads_end: pads_end.to_vec(),
        ..ConvGeometry::new(batch, c, m, in_spatial, kernel)
    }
}

fn conv_cases() -> Vec<ConvGeometry> {
    vec![
        // 1D, stride 2, asymmetric pads.
        geometry(2, (3, 5, 1), &[17], &[3], &[2], &[1], (&[1], &[2])),
        // 2D, 3x3, pad 1, bias, reduction 8 * 9 = 72 (> one tile).
        geometry(
            2,
            (8, 6, 1),
            &[9, 11],
            &[3, 3],
            &[1, 1],
            &[1, 1],
            (&[1, 1], &[1, 1]),
        ),
        // 2D grouped with dilation 2 and stride 2.
        geometry(
            1,
            (6, 4, 2),
            &[12, 10],
            &[3, 2],
            &[2, 1],
            &[2, 2],
            (&[2, 0], &[1, 1]),
        ),
        // Depthwise 3x3 (groups = channels).
        geometry(
            2,
            (5, 5, 5),
            &[8, 7],
            &[3, 3],
            &[1, 1],
            &[1, 1],
            (&[1, 1], &[1, 1]),
        ),
        // Pointwise 1x1 (in-place path), two groups.
        geometry(
            2,
            (8, 6, 2),
            &[5, 6],
            &[1, 1],
            &[1, 1],
            &[1, 1],
            (&[0, 0], &[0, 0]),
        ),
        // 3D with padding.
        geometry(
            1,
            (2, 3, 1),
            &[4, 5, 6],
            &[2, 3, 3],
            &[1, 2, 1],
            &[1, 1, 2],
            (&[1, 1, 2], &[0, 1, 2]),
        ),
        // Reduction of 130 terms (3 tiles): 26 channels x 5 taps.
        geometry(1, (26, 3, 1), &[40], &[5], &[3], &[1], (&[2], &[2])),
    ]
}

/// Geometries of the direct path (at most 4 input channels per group).
fn direct_cases() -> Vec<ConvGeometry> {
    let pad = |p: usize| (vec![p, p], vec![p, p]);
    let d2 = |batch, cmg, sp: [usize; 2], k: [usize; 2], s: [usize; 2], d: [usize; 2], p: usize| {
        let (pb, pe) = pad(p);
        geometry(batch, cmg, &sp, &k, &s, &d, (&pb, &pe))
    };
    vec![
        // Depthwise 3x3 stride 2 pad 1, odd sizes.
        d2(2, (16, 16, 16), [17, 19], [3, 3], [2, 2], [1, 1], 1),
        // Depthwise 5x5 pad 2, width 70 (a 64-lane block then 16-lane blocks).
        d2(1, (3, 3, 3), [9, 70], [5, 5], [1, 1], [1, 1], 2),
        // Channel multiplier 2, dilation 2.
        d2(1, (4, 8, 4), [11, 13], [3, 3], [1, 1], [2, 2], 2),
        // 9x9 depthwise: 81 terms, two reduction tiles.
        d2(1, (2, 2, 2), [12, 12], [9, 9], [1, 1], [1, 1], 4),
        // Two input channels per group, 8x3 taps: 48 x 2 = 96 terms; stride 3 columns.
        d2(1, (4, 6, 2), [14, 20], [8, 3], [1, 3], [1, 1], 3),
        // Several bands per plane (few planes, many lines), no padding.
        d2(1, (3, 3, 3), [40, 37], [3, 3], [1, 1], [1, 1], 0),
        // 1D depthwise with asymmetric pads.
        geometry(2, (6, 6, 6), &[33], &[5], &[2], &[1], (&[3], &[1])),
        // 3D depthwise with strides and padding (bands over depth).
        geometry(
            1,
            (2, 4, 2),
            &[7, 6, 9],
            &[3, 2, 3],
            &[2, 1, 2],
            &[1, 2, 1],
            (&[1, 0, 1], &[1, 1, 2]),
        ),
    ]
}

/// Geometries of the blocked im2col path (more than 4 input channels per group).
fn im2col_cases() -> Vec<ConvGeometry> {
    vec![
        // Grouped, 5 channels per group, dilation 2 and stride 2.
        geometry(
            1,
            (10, 4, 2),
            &[12, 10],
            &[3, 2],
            &[2, 1],
            &[2, 2],
            (&[2, 0], &[1, 1]),
        ),
        // 600 outputs: several column blocks, the last one partial.
        geometry(
            2,
            (6, 10, 1),
            &[24, 25],
            &[3, 3],
            &[1, 1],
            &[1, 1],
            (&[1, 1], &[1, 1]),
        ),
        // 3D with padding.
        geometry(
            1,
            (5, 3, 1),
            &[4, 5, 6],
            &[2, 3, 3],
            &[1, 2, 1],
            &[1, 1, 2],
            (&[1, 1, 2], &[0, 1, 2]),
        ),
        // 1D stride 2, taps reaching past both ends.
        geometry(1, (5, 3, 1), &[50], &[4], &[2], &[3], (&[5], &[4])),
        // 100 output channels (more than one row block of the GEMM).
        geometry(
            1,
            (7, 100, 1),
            &[9, 9],
            &[3, 3],
            &[2, 2],
            &[1, 1],
            (&[1, 1], &[1, 1]),
        ),
    ]
}

#[test]
fn conv_matches_oracle_on_every_isa() {
    let mut rng = Rng::new(21);
    for g in conv_cases()
        .into_iter()
        .chain(direct_cases())
        .chain(im2col_cases())
    {
        let (xl, wl, _) = g.sizes();
        let (x, w, bias) = (rng.vec(xl), rng.vec(wl), rng.vec(g.out_channels));
        for bias in [None, Some(&bias[..])] {
            let want = conv_oracle(&g, &x, &w, bias);
            for (isa, got) in on_every_isa(|| run_conv(&g, &x, &w, bias)) {
                assert_bits_eq(
                    &got,
                    &want,
                    &format!("{g:?} bias {} on {isa}", bias.is_some()),
                );
            }
        }
    }
}

#[test]
fn conv_image_bits_do_not_depend_on_batch_or_threads() {
    let mut rng = Rng::new(22);
    let cases = [
        // im2col + GEMM.
        geometry(
            8,
            (6, 8, 1),
            &[13, 13],
            &[3, 3],
            &[2, 2],
            &[1, 1],
            (&[1, 1], &[1, 1]),
        ),
        // im2col + GEMM of a 1-D map shorter than a column block (Silero VAD's encoder):
        // the batch's images become columns of one GEMM.
        geometry(8, (129, 64, 1), &[4], &[3], &[1], &[1], (&[1], &[1])),
        // Direct depthwise, planes cut into bands by thread count.
        geometry(
            8,
            (3, 3, 3),
            &[29, 21],
            &[3, 3],
            &[1, 1],
            &[1, 1],
            (&[1, 1], &[1, 1]),
        ),
    ];
    for g8 in cases {
        let g1 = ConvGeometry {
            batch: 1,
            ..g8.clone()
        };
        let (xl, wl, ol) = g8.sizes();
        let (x, w) = (rng.vec(xl), rng.vec(wl));
        let per_image = ol / 8;
        let want = conv_oracle(&g1, &x[..xl / 8], &w, None);
        for isa in Isa::available() {
            let batched = on_threads(2, isa, || run_conv(&g8, &x, &w, None));
            let single = on_threads(1, isa, || run_conv(&g1, &x[..xl / 8], &w, None));
            assert_bits_eq(&single, &want, &format!("{isa}: image 0 vs oracle"));
            assert_bits_eq(
                &single,
                &batched[..per_image],
                &format!("{isa}: image 0, batch 1 vs 8"),
            );
            let four = on_threads(4, isa, || run_conv(&g8, &x, &w, None));
            assert_bits_eq(&four, &batched, &format!("{isa}: 4 vs 2 threads"));
        }
    }
}

#[test]
fn padding_taps_are_terms_of_the_chain() {
    // Depthwise 3x3, pad 1. Every product underflows to -0.0; a padded tap
    // `fma(w, 0.0, -0.0)` gives +0.0, so an output whose last tap lies in the padding (bottom
    // right corner) is +0.0 and one whose last tap is inside (top left, centre) is -0.0.
    // An infinite weight on tap 0 turns a padded first tap into NaN (0 * inf).
    let cases = [
        (1e-30f32, -0.0f32, 0.0f32),
        (f32::INFINITY, f32::NAN, f32::NEG_INFINITY),
    ];
    for (w0, top_left, bottom_right) in cases {
        let g = geometry(
            1,
            (1, 1, 1),
            &[5, 6],
            &[3, 3],
            &[1, 1],
            &[1, 1],
            (&[1, 1], &[1, 1]),
        );
        let x = vec![-1e-30f32; 30];
        let mut w = vec![1e-30f32; 9];
        w[0] = w0;
        let want = conv_oracle(&g, &x, &w, None);
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        assert!(same(want[0], top_left), "top left");
        assert_eq!(want[29].to_bits(), bottom_right.to_bits(), "bottom right");
        for (isa, got) in on_every_isa(|| run_conv(&g, &x, &w, None)) {
            assert_bits_eq(&got, &want, &format!("w0 = {w0} on {isa}"));
        }
    }
}

/// Transposed-conv oracle (gather form): each output is `canonical_dot` over (c in group,
/// taps row-major) of `x[c, i]` where `o = i * s + t * d - pad`, else 0.0.
fn conv_transpose_oracle(
    g: &ConvTransposeGeometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
) -> Vec<f32> {
    let out_sp = g.out_spatial();
    let (cg, mg) = (g.in_channels / g.groups, g.out_channels / g.groups);
    let (in_len, out_len) = (
        g.in_spatial.iter().product::<usize>(),
        out_sp.iter().product(),
    );
    let klen: usize = g.kernel.iter().product();
    let mut out = Vec::new();
    for n in 0..g.batch {
        for m in 0..g.out_channels {
            let (group, mm) = (m / mg, m % mg);
            for o in 0..out_len {
                let o_idx = unflatten(o, &out_sp);
                let (mut xs, mut ws) = (Vec::new(), Vec::new());
                for c in 0..cg {
                    for t in 0..klen {
                        let t_idx = unflatten(t, &g.kernel);
                        let pos: Option<Vec<usize>> = (0..o_idx.len())
                            .map(|d| {
                                let q = (o_idx[d] + g.pads_begin[d])
                                    .checked_sub(t_idx[d] * g.dilations[d])?;
                                let i = q / g.strides[d];
                                (q.is_multiple_of(g.strides[d]) && i < g.in_spatial[d]).then_some(i)
                            })
                            .collect();
                        let ic = group * cg + c;
                        let plane = (n * g.in_channels + ic) * in_len;
                        xs.push(pos.map_or(0.0, |p| x[plane + flatten(&p, &g.in_spatial)]));
                        ws.push(w[(ic * mg + mm) * klen + t]);
                    }
                }
                let acc = canonical_dot(&xs, &ws);
                out.push(bias.map_or(acc, |b| acc + b[m]));
            }
        }
    }
    out
}

#[test]
fn conv_transpose_matches_oracle_on_every_isa() {
    let mut rng = Rng::new(23);
    let cases = [
        // 2D stride 2 upsampling with padding and output padding.
        ConvTransposeGeometry {
            batch: 2,
            in_channels: 4,
            out_channels: 3,
            groups: 1,
            in_spatial: vec![5, 6],
            kernel: vec![3, 3],
            strides: vec![2, 2],
            dilations: vec![1, 1],
            pads_begin: vec![1, 1],
            pads_end: vec![1, 0],
            output_padding: vec![1, 0],
        },
        // 1D grouped with dilation.
        ConvTransposeGeometry {
            batch: 1,
            in_channels: 4,
            out_channels: 6,
            groups: 2,
            in_spatial: vec![9],
            kernel: vec![4],
            strides: vec![3],
            dilations: vec![2],
            pads_begin: vec![2],
            pads_end: vec![1],
            output_padding: vec![2],
        },
        // 2x upsampling with kernel 2 (PP-OCR det head) over many column blocks.
        ConvTransposeGeometry {
            batch: 2,
            in_channels: 24,
            out_channels: 5,
            groups: 1,
            in_spatial: vec![40, 37],
            kernel: vec![2, 2],
            strides: vec![2, 2],
            dilations: vec![1, 1],
            pads_begin: vec![0, 0],
            pads_end: vec![0, 0],
            output_padding: vec![0, 0],
        },
        // Unit stride with dilation (ONNX test_convtranspose_dilations), 6 output channels.
        ConvTransposeGeometry {
            batch: 1,
            in_channels: 3,
            out_channels: 6,
            groups: 1,
            in_spatial: vec![3, 5],
            kernel: vec![2, 3],
            strides: vec![1, 1],
            dilations: vec![2, 1],
            pads_begin: vec![0, 1],
            pads_end: vec![1, 0],
            output_padding: vec![0, 0],
        },
        // Leading padding past the kernel extent (the gather-matrix path).
        ConvTransposeGeometry {
            batch: 1,
            in_channels: 5,
            out_channels: 6,
            groups: 1,
            in_spatial: vec![6, 7],
            kernel: vec![3, 2],
            strides: vec![2, 3],
            dilations: vec![1, 1],
            pads_begin: vec![3, 2],
            pads_end: vec![0, 1],
            output_padding: vec![0, 0],
        },
        // 3D, 17 channels x 8 taps = 136 terms (3 tiles).
        ConvTransposeGeometry {
            batch: 1,
            in_channels: 17,
            out_channels: 2,
            groups: 1,
            in_spatial: vec![2, 3, 3],
            kernel: vec![2, 2, 2],
            strides: vec![2, 1, 2],
            dilations: vec![1, 1, 1],
            pads_begin: vec![0, 1, 0],
            pads_end: vec![0, 0, 1],
            output_padding: vec![0, 0, 0],
        },
    ];
    for g in cases {
        let (xl, wl, ol) = g.sizes();
        let (x, w, bias) = (rng.vec(xl), rng.vec(wl), rng.vec(g.out_channels));
        let want = conv_transpose_oracle(&g, &x, &w, Some(&bias));
        for (isa, got) in on_every_isa(|| {
            let mut out = vec![f32::NAN; ol];
            conv_transpose_f32(&g, &x, &w, Some(&bias), &mut out);
            out
        }) {
            assert_bits_eq(&got, &want, &format!("{g:?} on {isa}"));
        }
    }
}

#[test]
fn conv_is_close_to_float64() {
    let mut rng = Rng::new(24);
    let g = geometry(
        1,
        (16, 4, 1),
        &[10, 10],
        &[3, 3],
        &[1, 1],
        &[1, 1],
        (&[1, 1], &[1, 1]),
    );
    let (xl, wl, _) = g.sizes();
    let (x, w) = (rng.vec(xl), rng.vec(wl));
    let got = run_conv(&g, &x, &w, None);
    // Interior output (m, 5, 5): all taps in bounds.
    for m in 0..4 {
        let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
        for c in 0..16 {
            for kh in 0..3 {
                for kw in 0..3 {
                    let t = x[c * 100 + (4 + kh) * 10 + 4 + kw] as f64
                        * w[((m * 16 + c) * 3 + kh) * 3 + kw] as f64;
                    exact += t;
                    magnitude += t.abs();
                }
            }
        }
        let v = got[m * 100 + 55] as f64;
        assert!(
            (v - exact).abs() <= 1e-5 * magnitude,
            "m = {m}: {v} vs {exact}"
        );
    }
}

/// Flips the lowest bit of each value it sees (so a value mapped twice would come back
/// unchanged), and records whether a call's channel disagrees with its flat indices.
struct FlipLowBit {
    out_channels: usize,
    plane: usize,
    wrong_channel: AtomicBool,
}

impl OutputMap for FlipLowBit {
    fn apply(&self, channel: usize, start: usize, values: &mut [f32]) {
        let last = start + values.len() - 1;
        for flat in [start, last] {
            if flat / self.plane % self.out_channels != channel {
                self.wrong_channel.store(true, Ordering::Relaxed);
            }
        }
        for v in values {
            *v = f32::from_bits(v.to_bits() ^ 1);
        }
    }
}

/// Weights packed ahead of time (on the ISA of the call, and on another one, which the call
/// must ignore) give the bits of weights packed by the call.
#[test]
fn prepacked_weights_give_the_same_bits() {
    let mut rng = Rng::new(25);
    for g in conv_cases()
        .into_iter()
        .chain(direct_cases())
        .chain(im2col_cases())
    {
        let (xl, wl, ol) = g.sizes();
        let (x, w, bias) = (rng.vec(xl), rng.vec(wl), rng.vec(g.out_channels));
        let want = conv_oracle(&g, &x, &w, Some(&bias));
        for isa in Isa::available() {
            for packed_on in Isa::available() {
                let packed = on_threads(1, packed_on, || PackedConvWeights::new(&g, &w));
                let got = on_threads(2, isa, || {
                    let mut out = vec![f32::NAN; ol];
                    conv_f32_mapped(&g, &x, &w, Some(&packed), Some(&bias), None, &mut out);
                    out
                });
                let what = format!("{g:?} on {isa}, packed on {packed_on}");
                assert_bits_eq(&got, &want, &what);
            }
        }
    }
}

#[test]
fn an_output_map_sees_every_finished_output_once() {
    let mut rng = Rng::new(24);
    let flipped =
        |v: &[f32]| -> Vec<f32> { v.iter().map(|x| f32::from_bits(x.to_bits() ^ 1)).collect() };
    for g in conv_cases()
        .into_iter()
        .chain(direct_cases())
        .chain(im2col_cases())
    {
        let (xl, wl, ol) = g.sizes();
        let (x, w, bias) = (rng.vec(xl), rng.vec(wl), rng.vec(g.out_channels));
        let want = flipped(&conv_oracle(&g, &x, &w, Some(&bias)));
        for isa in Isa::available() {
            for threads in [1, 2] {
                let map = FlipLowBit {
                    out_channels: g.out_channels,
                    plane: ol / (g.batch * g.out_channels),
                    wrong_channel: AtomicBool::new(false),
                };
                let got = on_threads(threads, isa, || {
                    let mut out = vec![f32::NAN; ol];
                    conv_f32_mapped(&g, &x, &w, None, Some(&bias), Some(&map), &mut out);
                    out
                });
                let what = format!("{g:?} on {isa}, {threads} threads");
                assert_bits_eq(&got, &want, &what);
                assert!(!map.wrong_channel.into_inner(), "{what}: wrong channel");
            }
        }
    }
    let g = ConvTransposeGeometry {
        batch: 2,
        in_channels: 6,
        out_channels: 5,
        groups: 1,
        in_spatial: vec![9, 7],
        kernel: vec![2, 2],
        strides: vec![2, 2],
        dilations: vec![1, 1],
        pads_begin: vec![0, 0],
        pads_end: vec![0, 0],
        output_padding: vec![0, 0],
    };
    let (xl, wl, ol) = g.sizes();
    let (x, w) = (rng.vec(xl), rng.vec(wl));
    let want = flipped(&conv_transpose_oracle(&g, &x, &w, None));
    for isa in Isa::available() {
        let map = FlipLowBit {
            out_channels: g.out_channels,
            plane: ol / (g.batch * g.out_channels),
            wrong_channel: AtomicBool::new(false),
        };
        let got = on_threads(2, isa, || {
            let mut out = vec![f32::NAN; ol];
            conv_transpose_f32_mapped(&g, &x, &w, None, Some(&map), &mut out);
            out
        });
        assert_bits_eq(&got, &want, &format!("transposed on {isa}"));
        assert!(
            !map.wrong_channel.into_inner(),
            "transposed on {isa}: wrong channel"
        );
    }
}

/// Equal bits, or NaN on both sides (NaN payloads are not part of the contract).
fn assert_same_values(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    if let Some(i) = (0..got.len()).find(|&i| !same(got[i], want[i])) {
        panic!(
            "{what}: element {i} differs: got {:e} ({:#010x}), want {:e} ({:#010x})",
            got[i],
            got[i].to_bits(),
            want[i],
            want[i].to_bits()
        );
    }
}

/// A transposed convolution whose windows tile the output: stride = kernel, no padding.
fn disjoint_geometry(
    batch: usize,
    channels: (usize, usize, usize),
    in_spatial: &[usize],
    kernel: &[usize],
) -> ConvTransposeGeometry {
    let zeros = vec![0; kernel.len()];
    phase_geometry(batch, channels, in_spatial, (kernel, kernel), [&zeros; 3])
}

/// A transposed convolution with unit dilation: `(kernel, strides)`, then `[pads_begin,
/// pads_end, output_padding]`.
fn phase_geometry(
    batch: usize,
    (c, m, groups): (usize, usize, usize),
    in_spatial: &[usize],
    (kernel, strides): (&[usize], &[usize]),
    [pads_begin, pads_end, output_padding]: [&[usize]; 3],
) -> ConvTransposeGeometry {
    ConvTransposeGeometry {
        batch,
        in_channels: c,
        out_channels: m,
        groups,
        in_spatial: in_spatial.to_vec(),
        kernel: kernel.to_vec(),
        strides: strides.to_vec(),
        dilations: vec![1; kernel.len()],
        pads_begin: pads_begin.to_vec(),
        pads_end: pads_end.to_vec(),
        output_padding: output_padding.to_vec(),
    }
}

/// Kernels that are a whole number `r` of strides on every axis let the CPU skip the terms of
/// the taps no input can reach (all but `r` per axis); the outputs keep the contract's bits,
/// signed zeros included: products that underflow to `-0.0` are `+0.0` in the contract's chain
/// once a later zero term is added, and stay `-0.0` when the last real tap is the last tap.
/// Stride = kernel (windows that tile the output) and overlapping windows (k = 4, s = 2 with
/// pads 1 or 0 as in decoder upsampling, k = 6, s = 3, k = 2, s = 1), asymmetric pads, output
/// padding, tile boundaries (1, 15, 16, 17, 64, 100 channels for 4 and 16 taps), groups, 1-D
/// to 3-D, biases with signed zeros, infinite and NaN inputs, an infinite weight (the general
/// path), every ISA, 1 and 2 threads, with and without an output map.
#[test]
fn disjoint_conv_transpose_matches_oracle() {
    let mut rng = Rng::new(26);
    let mut cases = Vec::new();
    for c in [1, 15, 16, 17, 64, 100] {
        cases.push(disjoint_geometry(2, (c, 3, 1), &[5, 7], &[2, 2]));
        cases.push(disjoint_geometry(1, (c, 2, 1), &[3, 5], &[4, 4]));
        // The decoder upsampling of ViT: k = 4, s = 2, pads 1.
        cases.push(phase_geometry(
            1,
            (c, 3, 1),
            &[5, 6],
            (&[4, 4], &[2, 2]),
            [&[1, 1], &[1, 1], &[0, 0]],
        ));
    }
    cases.extend([
        disjoint_geometry(1, (6, 4, 2), &[4, 6], &[2, 2]),
        disjoint_geometry(1, (34, 10, 2), &[9], &[2]),
        disjoint_geometry(1, (40, 3, 1), &[70], &[2]),
        disjoint_geometry(2, (17, 3, 1), &[2, 3, 4], &[2, 2, 2]),
        disjoint_geometry(1, (20, 6, 1), &[11, 13], &[2, 4]),
        disjoint_geometry(1, (70, 5, 1), &[6, 7], &[1, 1]),
        // Several column blocks and row parts.
        disjoint_geometry(1, (24, 40, 1), &[30, 30], &[2, 2]),
        // 9 taps do not divide the tile: the general path.
        disjoint_geometry(1, (9, 2, 1), &[4, 4], &[3, 3]),
        // Overlapping windows: k = r * s.
        phase_geometry(2, (17, 4, 1), &[4, 5], (&[4, 4], &[2, 2]), [&[0, 0]; 3]),
        phase_geometry(
            1,
            (8, 6, 2),
            &[6, 5],
            (&[4, 4], &[2, 2]),
            [&[1, 1], &[1, 1], &[0, 0]],
        ),
        phase_geometry(1, (20, 5, 1), &[3, 4], (&[4, 2], &[2, 1]), [&[0, 0]; 3]),
        phase_geometry(
            1,
            (7, 3, 1),
            &[4, 5],
            (&[2, 2], &[1, 1]),
            [&[1, 0], &[0, 1], &[0, 0]],
        ),
        phase_geometry(1, (40, 3, 1), &[9], (&[4], &[2]), [&[1], &[1], &[0]]),
        phase_geometry(1, (9, 4, 1), &[7], (&[6], &[3]), [&[2], &[1], &[2]]),
        phase_geometry(1, (33, 2, 1), &[8], (&[32], &[16]), [&[5], &[3], &[0]]),
        phase_geometry(
            1,
            (5, 3, 1),
            &[3, 3, 4],
            (&[4, 2, 2], &[2, 1, 2]),
            [&[1, 0, 1]; 3],
        ),
        phase_geometry(
            1,
            (6, 2, 1),
            &[3, 4],
            (&[4, 4], &[2, 2]),
            [&[2, 3], &[3, 1], &[1, 0]],
        ),
        // Pads past the kernel extent (the gather-matrix path otherwise).
        phase_geometry(
            1,
            (5, 2, 1),
            &[6, 6],
            (&[2, 2], &[2, 2]),
            [&[3, 2], &[1, 2], &[1, 0]],
        ),
        // Several column blocks of one phase.
        phase_geometry(
            1,
            (24, 40, 1),
            &[40, 40],
            (&[4, 4], &[2, 2]),
            [&[1, 1], &[1, 1], &[0, 0]],
        ),
    ]);
    let tiny = [-1e-30f32, 1e-30, -1e-30, 0.0, -0.0, -1e-30];
    for g in cases {
        let (xl, wl, ol) = g.sizes();
        let mut specials = rng.vec(xl);
        for (i, v) in specials.iter_mut().enumerate().step_by(7) {
            *v = [f32::INFINITY, f32::NAN, f32::NEG_INFINITY, -0.0][i % 4];
        }
        let data = [
            ("random", rng.vec(xl), rng.vec(wl)),
            // Every product underflows to -0.0.
            ("underflow", vec![-1e-30; xl], vec![1e-30; wl]),
            // Products that underflow to zeros of both signs.
            (
                "mixed underflow",
                (0..xl).map(|i| tiny[i % 5]).collect(),
                (0..wl).map(|i| tiny[i % 3 + 1]).collect(),
            ),
            ("specials", specials, rng.vec(wl)),
            ("infinite weight", rng.vec(xl), {
                let mut w = rng.vec(wl);
                w[wl / 2] = f32::INFINITY;
                w
            }),
        ];
        let mut signed = vec![-0.0f32; g.out_channels];
        signed[0] = 0.0;
        let random = rng.vec(g.out_channels);
        for (name, x, w) in &data {
            for bias in [None, Some(&signed[..]), Some(&random[..])] {
                let want = conv_transpose_oracle(&g, x, w, bias);
                let taps: usize = g.kernel.iter().product();
                if *name == "underflow" && bias.is_none() && taps > 1 && 64 % taps == 0 {
                    assert!(
                        want.iter().any(|v| v.to_bits() == 0x8000_0000),
                        "{g:?}: -0.0"
                    );
                    assert!(want.iter().any(|v| v.to_bits() == 0), "{g:?}: +0.0");
                }
                let flipped: Vec<f32> = want
                    .iter()
                    .map(|v| f32::from_bits(v.to_bits() ^ 1))
                    .collect();
                for isa in Isa::available() {
                    for threads in [1, 2] {
                        let what = format!(
                            "{g:?}, {name}, bias {:?}, {isa}, {threads} threads",
                            bias.map(|b| b[0])
                        );
                        let got = on_threads(threads, isa, || {
                            let mut out = vec![f32::NAN; ol];
                            conv_transpose_f32(&g, x, w, bias, &mut out);
                            out
                        });
                        assert_same_values(&got, &want, &what);
                        let map = FlipLowBit {
                            out_channels: g.out_channels,
                            plane: ol / (g.batch * g.out_channels),
                            wrong_channel: AtomicBool::new(false),
                        };
                        let got = on_threads(threads, isa, || {
                            let mut out = vec![f32::NAN; ol];
                            conv_transpose_f32_mapped(&g, x, w, bias, Some(&map), &mut out);
                            out
                        });
                        assert_same_values(&got, &flipped, &format!("{what}, mapped"));
                        assert!(!map.wrong_channel.into_inner(), "{what}: wrong channel");
                    }
                }
            }
        }
    }
}
