//! Dequantization against an independent f64 reference written after ggml's reference loops
//! (`dequantize_row_*` in ggml's quantization source) and the exactness argument of `docs/gguf.md`
//! (every product is exact, so the f64 result rounded once to f32 is the canonical value).

#![allow(clippy::needless_range_loop)] // the reference keeps ggml's indexed loops

mod common;

use common::{TYPES, random_blocks};
use samebits_ggml::{GgmlType, dequantize_row};
use samebits_testdata::Rng;

fn f16(b: &[u8], at: usize) -> f64 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f64()
}

/// ggml's scale/min unpacking for Q4_K and Q5_K (`get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (f64, f64) {
    if j < 4 {
        ((q[j] & 63) as f64, (q[j + 4] & 63) as f64)
    } else {
        (
            ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4)) as f64,
            ((q[j + 4] >> 4) | ((q[j] >> 6) << 4)) as f64,
        )
    }
}

/// The reference value of every element, in f64, following ggml's loop structure.
fn reference(ty: GgmlType, b: &[u8]) -> Vec<f64> {
    let mut y = Vec::new();
    match ty {
        GgmlType::F32 => y.push(f32::from_le_bytes(b[..4].try_into().unwrap()) as f64),
        GgmlType::F16 => y.push(f16(b, 0)),
        GgmlType::BF16 => y.push(half::bf16::from_le_bytes([b[0], b[1]]).to_f64()),
        GgmlType::Q4_0 | GgmlType::Q4_1 => {
            let d = f16(b, 0);
            // Q4_0: (q - 8) * d; Q4_1: q * d + m.
            let value = |q: u8| match ty {
                GgmlType::Q4_0 => (q as f64 - 8.0) * d,
                _ => q as f64 * d + f16(b, 2),
            };
            let qs = if ty == GgmlType::Q4_1 {
                &b[4..]
            } else {
                &b[2..]
            };
            y.resize(32, 0.0);
            for j in 0..16 {
                y[j] = value(qs[j] & 0xF);
                y[j + 16] = value(qs[j] >> 4);
            }
        }
        GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let d = f16(b, 0);
            // Q5_0: (q - 16) * d; Q5_1: q * d + m.
            let value = |q: u32| match ty {
                GgmlType::Q5_0 => (q as f64 - 16.0) * d,
                _ => q as f64 * d + f16(b, 2),
            };
            let rest = if ty == GgmlType::Q5_1 {
                &b[4..]
            } else {
                &b[2..]
            };
            let qh = u32::from_le_bytes(rest[..4].try_into().unwrap());
            let qs = &rest[4..];
            y.resize(32, 0.0);
            for j in 0..16 {
                let xh0 = ((qh >> j) << 4) & 0x10;
                let xh1 = (qh >> (j + 12)) & 0x10;
                y[j] = value((qs[j] & 0xF) as u32 | xh0);
                y[j + 16] = value((qs[j] >> 4) as u32 | xh1);
            }
        }
        GgmlType::Q8_0 => {
            let d = f16(b, 0);
            y.extend(b[2..34].iter().map(|&q| q as i8 as f64 * d));
        }
        GgmlType::Q4K | GgmlType::Q5K => {
            let (d, dmin) = (f16(b, 0), f16(b, 2));
            let scales = &b[4..16];
            let (qh, mut ql) = if ty == GgmlType::Q5K {
                (&b[16..48], &b[48..])
            } else {
                (&b[0..0], &b[16..])
            };
            let (mut u1, mut u2) = (1u8, 2u8);
            for is in (0..8).step_by(2) {
                let (sc, m) = scale_min_k4(is, scales);
                let (d1, m1) = (d * sc, dmin * m);
                let (sc, m) = scale_min_k4(is + 1, scales);
                let (d2, m2) = (d * sc, dmin * m);
                let high = |l: usize, u: u8| {
                    if !qh.is_empty() && qh[l] & u != 0 {
                        16.0
                    } else {
                        0.0
                    }
                };
                for l in 0..32 {
                    y.push(d1 * ((ql[l] & 0xF) as f64 + high(l, u1)) - m1);
                }
                for l in 0..32 {
                    y.push(d2 * ((ql[l] >> 4) as f64 + high(l, u2)) - m2);
                }
                ql = &ql[32..];
                u1 <<= 2;
                u2 <<= 2;
            }
        }
        GgmlType::Q6K => {
            let d = f16(b, 208);
            y.resize(256, 0.0);
            for n in 0..2 {
                let (ql, qh, sc) = (&b[64 * n..], &b[128 + 32 * n..], &b[192 + 8 * n..]);
                let out = &mut y[128 * n..];
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                    let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                    let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                    let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                    let s = |i: usize| sc[i] as i8 as f64;
                    out[l] = d * s(is) * q1 as f64;
                    out[l + 32] = d * s(is + 2) * q2 as f64;
                    out[l + 64] = d * s(is + 4) * q3 as f64;
                    out[l + 96] = d * s(is + 6) * q4 as f64;
                }
            }
        }
        GgmlType::Q2K | GgmlType::Q3K => {
            // After the structure of the `gguf` package's vectorised dequantization: codes of
            // qs in groups of 32 bytes and four 2-bit shifts, 16 sub-blocks of 16.
            let qs = if ty == GgmlType::Q2K {
                &b[16..80]
            } else {
                &b[32..96]
            };
            let mut codes = [0i32; 256];
            for g in 0..2 {
                for shift in 0..4 {
                    for l in 0..32 {
                        codes[128 * g + 32 * shift + l] =
                            ((qs[32 * g + l] >> (2 * shift)) & 3) as i32;
                    }
                }
            }
            for e in 0..256 {
                let j = e / 16;
                y.push(match ty {
                    GgmlType::Q2K => {
                        let (d, dmin) = (f16(b, 80), f16(b, 82));
                        d * (b[j] & 0xF) as f64 * codes[e] as f64 - dmin * (b[j] >> 4) as f64
                    }
                    _ => {
                        let sc = &b[96..108];
                        let lo = (sc[j % 8] >> (4 * (j / 8))) & 0xF;
                        let hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
                        let scale = (lo | (hi << 4)) as f64 - 32.0;
                        let h = (b[e % 32] >> (e / 32)) & 1;
                        let q = codes[e] - if h == 0 { 4 } else { 0 };
                        f16(b, 108) * scale * q as f64
                    }
                });
            }
        }
        GgmlType::Iq4Nl | GgmlType::Iq4Xs => {
            // ggml's kvalues_iq4nl, written out again for the reference.
            const KVALUES: [f64; 16] = [
                -127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0,
                53.0, 69.0, 89.0, 113.0,
            ];
            let d = f16(b, 0);
            // IQ4_NL: one sub-block, dl = d; IQ4_XS: eight, dl = d * (ls - 32).
            let subs: Vec<(f64, &[u8])> = match ty {
                GgmlType::Iq4Nl => vec![(d, &b[2..18])],
                _ => {
                    let scales_h = u16::from_le_bytes([b[2], b[3]]) as usize;
                    (0..8)
                        .map(|ib| {
                            let ls = ((b[4 + ib / 2] as usize >> (4 * (ib % 2))) & 0xF)
                                | (((scales_h >> (2 * ib)) & 3) << 4);
                            (d * (ls as f64 - 32.0), &b[8 + 16 * ib..8 + 16 * ib + 16])
                        })
                        .collect()
                }
            };
            for (dl, qs) in subs {
                let start = y.len();
                y.resize(start + 32, 0.0);
                for j in 0..16 {
                    y[start + j] = dl * KVALUES[(qs[j] & 0xF) as usize];
                    y[start + j + 16] = dl * KVALUES[(qs[j] >> 4) as usize];
                }
            }
        }
        other => panic!("no reference for {other}"),
    }
    y
}

#[test]
fn dequantization_matches_the_exact_reference_rounded_once() {
    let mut rng = Rng(1);
    for ty in TYPES {
        let blocks = 40;
        let data = random_blocks(ty, blocks, &mut rng);
        let mut out = vec![0f32; blocks * ty.block_elems()];
        dequantize_row(ty, &data, &mut out).unwrap();
        let expected: Vec<f64> = data
            .chunks_exact(ty.block_bytes())
            .flat_map(|b| reference(ty, b))
            .collect();
        assert_eq!(expected.len(), out.len(), "{ty}");
        for (i, (&got, &want)) in out.iter().zip(&expected).enumerate() {
            assert_eq!(
                got.to_bits(),
                (want as f32).to_bits(),
                "{ty} element {i}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn hand_built_q4_1_and_q8_0_blocks() {
    // Q4_1: d = 0.5, m = -1.0; codes 0..15 then 15..0.
    let mut q4_1 = vec![0x00, 0x38, 0x00, 0xBC];
    q4_1.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
    let mut out = [0f32; 32];
    dequantize_row(GgmlType::Q4_1, &q4_1, &mut out).unwrap();
    assert_eq!(out[0], -1.0);
    assert_eq!(out[3], 0.5);
    assert_eq!(out[15], 6.5);
    assert_eq!(out[16], 6.5);
    assert_eq!(out[31], -1.0);
    // Q8_0: d = 2.0; codes -128, 127, 0, ...
    let mut q8 = vec![0x00, 0x40, 0x80, 0x7F];
    q8.extend([0u8; 30]);
    dequantize_row(GgmlType::Q8_0, &q8, &mut out).unwrap();
    assert_eq!(&out[..3], &[-256.0, 254.0, 0.0]);
    assert!(dequantize_row(GgmlType::Q8_0, &q8[..33], &mut out).is_err());
    assert!(dequantize_row(GgmlType::Iq2Xxs, &[0; 66], &mut [0f32; 256]).is_err());
}

/// The `gguf` Python package's `gguf.quants.dequantize` (an implementation independent of ggml's
/// C and of this crate) gives the same values bit for bit on random blocks of every quantized
/// type this crate dequantizes, printed by `python3 tools/reference_gguf_dequantize.py` (gguf
/// 0.19.0) into `tests/fixtures/gguf_package_dequantize.json`.
#[test]
fn the_gguf_package_dequantizes_the_same_values() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/gguf_package_dequantize.json"
    );
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let fixture = fixture.as_object().unwrap();
    assert_eq!(fixture.len(), 12);
    for (name, case) in fixture {
        let ty = (0..64)
            .filter_map(GgmlType::from_id)
            .find(|t| t.name() == name)
            .unwrap_or_else(|| panic!("type {name}"));
        let hex = case["blocks"].as_str().unwrap();
        let blocks: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let bits: Vec<u32> = case["bits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let mut got = vec![0f32; bits.len()];
        dequantize_row(ty, &blocks, &mut got).unwrap();
        for (i, (g, want)) in got.iter().zip(&bits).enumerate() {
            assert_eq!(g.to_bits(), *want, "{name} element {i}");
        }
    }
}
