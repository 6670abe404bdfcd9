//! Attention and RotaryEmbedding: the contract formula by hand on a tiny case, prefill versus
//! token-by-token decode with a KV cache (identical bits), GQA, masks, 3-D layout, errors.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

fn attention(inputs: &[Option<Tensor>], attrs: &[(&str, Attribute)], n: usize) -> Vec<Tensor> {
    let inputs: Vec<Option<Value>> = inputs.iter().map(|t| t.clone().map(Value::from)).collect();
    run_node_opset("Attention", 23, &inputs, attrs, n)
        .unwrap()
        .into_iter()
        .map(|v| v.into_tensor().unwrap())
        .collect()
}

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7 + seed * 13) % 23) as f32 - 11.0) * 0.09)
        .collect()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

#[test]
fn tiny_case_follows_the_contract_formula() {
    // One head, one query, two keys, head size 2, value size 1.
    let (q, k, v) = (
        [0.5f32, -1.0],
        [[1.0f32, 2.0], [-0.5, 0.25]],
        [3.0f32, -1.0],
    );
    let y = attention(
        &[
            Some(f32s(&[1, 1, 1, 2], &q)),
            Some(f32s(&[1, 1, 2, 2], k.as_flattened())),
            Some(f32s(&[1, 1, 2, 1], &v)),
        ],
        &[],
        1,
    );
    let scale = 1.0 / 2f32.sqrt();
    let s: Vec<f32> = k
        .iter()
        .map(|kj| samebits_kernels::canonical_dot(&q, kj) * scale)
        .collect();
    let m = s[0].max(s[1]);
    let e: Vec<f32> = s.iter().map(|&x| samebits_math::exp(x - m)).collect();
    let total = samebits_kernels::canonical_sum(&e);
    let p: Vec<f32> = e.iter().map(|&x| x / total).collect();
    assert_eq!(values(&y[0]), vec![samebits_kernels::canonical_dot(&p, &v)]);
}

#[test]
fn causal_prefill_equals_decode_with_kv_cache() {
    // 150 rows: a prefill of more than one block of queries runs in blocks, each over the keys
    // its last row sees (attention.rs); decode steps see every key at once.
    for seq in [5, 150] {
        causal_prefill_equals_decode(seq);
    }
}

fn causal_prefill_equals_decode(seq: usize) {
    let (heads, size) = (2, 8);
    let q = data(heads * seq * size, 1);
    let k = data(heads * seq * size, 2);
    let v = data(heads * seq * size, 3);
    let causal = [("is_causal", Attribute::Int(1))];
    let prefill = values(
        &attention(
            &[
                Some(f32s(&[1, heads, seq, size], &q)),
                Some(f32s(&[1, heads, seq, size], &k)),
                Some(f32s(&[1, heads, seq, size], &v)),
            ],
            &causal,
            1,
        )[0],
    );
    // Token t attends to tokens 0..=t: past = tokens 0..t, new = token t.
    let tokens = |x: &[f32], range: std::ops::Range<usize>| -> Tensor {
        let mut out = Vec::new();
        for h in 0..heads {
            for s in range.clone() {
                out.extend_from_slice(&x[(h * seq + s) * size..(h * seq + s + 1) * size]);
            }
        }
        f32s(&[1, heads, range.len(), size], &out)
    };
    for t in 0..seq {
        let out = attention(
            &[
                Some(tokens(&q, t..t + 1)),
                Some(tokens(&k, t..t + 1)),
                Some(tokens(&v, t..t + 1)),
                None,
                Some(tokens(&k, 0..t)),
                Some(tokens(&v, 0..t)),
            ],
            &causal,
            3,
        );
        let step = values(&out[0]);
        for h in 0..heads {
            let want = &prefill[(h * seq + t) * size..(h * seq + t + 1) * size];
            assert_eq!(&step[h * size..(h + 1) * size], want, "token {t}, head {h}");
        }
        assert_eq!(out[1], tokens(&k, 0..t + 1), "present_key");
    }
}

#[test]
fn gqa_shares_each_kv_head_between_consecutive_query_heads() {
    let (s, d) = (3, 4);
    let q = data(4 * s * d, 4);
    let (k, v) = (data(2 * s * d, 5), data(2 * s * d, 6));
    let repeat =
        |x: &[f32]| -> Vec<f32> { [&x[..s * d], &x[..s * d], &x[s * d..], &x[s * d..]].concat() };
    let grouped = attention(
        &[
            Some(f32s(&[1, 4, s, d], &q)),
            Some(f32s(&[1, 2, s, d], &k)),
            Some(f32s(&[1, 2, s, d], &v)),
        ],
        &[],
        1,
    );
    let full = attention(
        &[
            Some(f32s(&[1, 4, s, d], &q)),
            Some(f32s(&[1, 4, s, d], &repeat(&k))),
            Some(f32s(&[1, 4, s, d], &repeat(&v))),
        ],
        &[],
        1,
    );
    assert_eq!(grouped[0], full[0]);
}

#[test]
fn bool_mask_equals_minus_infinity_float_mask_and_3d_equals_4d() {
    let (s, d) = (2, 4);
    let (q, k, v) = (data(s * d, 7), data(s * d, 8), data(s * d, 9));
    let four = |x: &[f32]| Some(f32s(&[1, 1, s, d], x));
    let keep = Tensor::from_bools(vec![s, s], vec![true, false, true, true]).unwrap();
    let add = f32s(&[s, s], &[0.0, f32::NEG_INFINITY, 0.0, 0.0]);
    let with_bool = attention(&[four(&q), four(&k), four(&v), Some(keep)], &[], 1);
    let with_float = attention(&[four(&q), four(&k), four(&v), Some(add)], &[], 1);
    assert_eq!(with_bool[0], with_float[0]);
    let three = |x: &[f32]| Some(f32s(&[1, s, d], x));
    let heads = [
        ("q_num_heads", Attribute::Int(1)),
        ("kv_num_heads", Attribute::Int(1)),
    ];
    let flat = attention(&[three(&q), three(&k), three(&v)], &heads, 1);
    let plain = attention(&[four(&q), four(&k), four(&v)], &[], 1);
    assert_eq!(values(&flat[0]), values(&plain[0]));
}

#[test]
fn rotary_embedding_rotates_halves_or_pairs() {
    // One head of size 4, one token at position 1: cos = [0, 1], sin = [1, 0] (by hand).
    let x = f32s(&[1, 1, 1, 4], &[1., 2., 3., 4.]);
    let (cos, sin) = (
        f32s(&[2, 2], &[1., 1., 0., 1.]),
        f32s(&[2, 2], &[0., 0., 1., 0.]),
    );
    let pos = Tensor::from_vec(vec![1, 1], vec![1i64]).unwrap();
    let halves = run1(
        "RotaryEmbedding",
        &[x.clone(), cos.clone(), sin.clone(), pos.clone()],
        &[],
    )
    .unwrap();
    // Pairs (x0, x2) rotated by 90 degrees, (x1, x3) unchanged.
    assert_eq!(values(&halves), vec![-3., 2., 1., 4.]);
    let pairs = run1(
        "RotaryEmbedding",
        &[x, cos, sin, pos],
        &[("interleaved", Attribute::Int(1))],
    )
    .unwrap();
    // Pairs (x0, x1) rotated, (x2, x3) unchanged.
    assert_eq!(values(&pairs), vec![-2., 1., 3., 4.]);
}

#[test]
fn bad_shapes_and_attributes_are_named() {
    let t = |shape: &[usize]| Some(f32s(shape, &vec![0.0; shape.iter().product()]));
    let inputs: Vec<Option<Value>> = [t(&[1, 3, 2, 4]), t(&[1, 2, 2, 4]), t(&[1, 2, 2, 4])]
        .into_iter()
        .map(|x| x.map(Value::from))
        .collect();
    let e = run_node_opset("Attention", 23, &inputs, &[], 1).unwrap_err();
    assert!(e.to_string().contains("multiple"), "{e}");
    let inputs: Vec<Option<Value>> = [t(&[1, 2, 6]), t(&[1, 2, 6]), t(&[1, 2, 6])]
        .into_iter()
        .map(|x| x.map(Value::from))
        .collect();
    let e = run_node_opset(
        "Attention",
        23,
        &inputs,
        &[
            ("q_num_heads", Attribute::Int(4)),
            ("kv_num_heads", Attribute::Int(4)),
        ],
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("q_num_heads"), "{e}");
    let e = run1(
        "RotaryEmbedding",
        &[
            f32s(&[1, 1, 1, 4], &[0.; 4]),
            f32s(&[1, 2], &[0.; 2]),
            f32s(&[1, 2], &[0.; 2]),
        ],
        &[("rotary_embedding_dim", Attribute::Int(3))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("rotary_embedding_dim"), "{e}");
}

/// The heads resolution the CPU ops and samebits-cuda's attention and rotary launches share.
#[test]
fn heads_resolve_layouts_and_errors() {
    use samebits_ops::{AttentionHeads, HeadsLayout, RotaryShape};
    // 3-D Q: 4 heads of 8; 3-D K and V: 2 heads of 8 and 6; a 4-D past of 5 positions.
    let qkv = [&[2, 3, 32][..], &[2, 3, 16][..], &[2, 3, 12][..]];
    let past = Some([&[2, 2, 5, 8][..], &[2, 2, 5, 6][..]]);
    let h = AttentionHeads::resolve(qkv, past, 4, 2).unwrap();
    assert_eq!(h.q, HeadsLayout::split(2, 3, 4, 8));
    assert_eq!(h.v, HeadsLayout::split(2, 3, 2, 6));
    assert_eq!(h.past, 5);
    assert_eq!(h.y, HeadsLayout::split(2, 3, 4, 6));
    assert_eq!(h.y_shape, vec![2, 3, 24]);
    assert_eq!(h.scale(None), 1.0 / 8f32.sqrt());
    assert_eq!(h.scale(Some(0.5)), 0.5);
    // A past of another head size; query heads not a multiple of the key/value heads.
    let bad_past = Some([&[2, 2, 5, 4][..], &[2, 2, 5, 6][..]]);
    assert!(AttentionHeads::resolve(qkv, bad_past, 4, 2).is_err());
    let q3 = [&[2, 3, 24][..], &[2, 3, 16][..], &[2, 3, 12][..]];
    assert!(AttentionHeads::resolve(q3, None, 3, 2).is_err());
    let r = RotaryShape::resolve(&[1, 4, 2, 8], [&[4, 3], &[4, 3]], 0, 6).unwrap();
    assert_eq!(r.heads, HeadsLayout::dense(1, 4, 2, 8));
    assert_eq!((r.rot, r.width, r.cache_rows), (6, 3, 4));
    assert!(RotaryShape::resolve(&[1, 4, 2, 8], [&[4, 2], &[4, 2]], 0, 6).is_err());
}
