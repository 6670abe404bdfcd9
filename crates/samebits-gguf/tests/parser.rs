//! The GGUF reader on synthetic files: every value type, nested arrays, alignment, tensor views,
//! versions 2 and 3, and rejection (never a panic, never a huge allocation) of damaged files.

mod common;

use common::{GgufWriter, string, strings};
use samebits_gguf::{Error, GgmlType, GgufFile, MetadataValue, TensorData};
use samebits_ir::DType;
use samebits_testdata::Rng;
use std::sync::Arc;

fn parse(bytes: Vec<u8>) -> samebits_gguf::Result<GgufFile> {
    GgufFile::from_source("synthetic.gguf", Arc::new(bytes))
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn sample_writer(version: u32) -> GgufWriter {
    let nested = MetadataValue::Array(vec![
        MetadataValue::Array(vec![MetadataValue::I32(-1), MetadataValue::I32(2)]),
        MetadataValue::Array(vec![MetadataValue::I32(3)]),
    ]);
    let q8_block: Vec<u8> = [0x00u8, 0x3C] // d = 1.0 in f16
        .into_iter()
        .chain((0..32).map(|i| (i as i8 - 16) as u8))
        .collect();
    GgufWriter::new(version)
        .kv("general.architecture", string("llama"))
        .kv("u8", MetadataValue::U8(200))
        .kv("i8", MetadataValue::I8(-100))
        .kv("u16", MetadataValue::U16(60000))
        .kv("i16", MetadataValue::I16(-30000))
        .kv("u32", MetadataValue::U32(4_000_000_000))
        .kv("i32", MetadataValue::I32(-2_000_000_000))
        .kv("f32", MetadataValue::F32(1.5))
        .kv("bool", MetadataValue::Bool(true))
        .kv("u64", MetadataValue::U64(u64::MAX))
        .kv("i64", MetadataValue::I64(i64::MIN))
        .kv("f64", MetadataValue::F64(-2.25))
        .kv("words", strings(&["a", "bé", "🚀"]))
        .kv("nested", nested)
        .kv("empty", MetadataValue::Array(vec![]))
        .tensor("vec", &[3], GgmlType::F32, f32_bytes(&[1.0, -2.0, 3.5]))
        .tensor("mat", &[2, 3], GgmlType::F16, {
            let h: Vec<u16> = (1..=6)
                .map(|i| half::f16::from_f32(i as f32).to_bits())
                .collect();
            h.iter().flat_map(|v| v.to_le_bytes()).collect()
        })
        .tensor("bf", &[2], GgmlType::BF16, vec![0x80, 0x3F, 0x00, 0xC0])
        .tensor("q", &[32, 1], GgmlType::Q8_0, q8_block)
}

#[test]
fn every_value_type_and_tensor_kind_round_trips_in_v2_and_v3() {
    for version in [2, 3] {
        let file = parse(sample_writer(version).to_bytes()).unwrap();
        assert_eq!(file.version(), version);
        assert_eq!(file.alignment(), 32);
        assert_eq!(file.data_start() % 32, 0);
        let meta = file.metadata();
        assert_eq!(meta.entries().len(), 15);
        assert_eq!(meta.u64("u8").unwrap(), 200);
        assert_eq!(meta.get("i8"), Some(&MetadataValue::I8(-100)));
        assert_eq!(meta.u64("u16").unwrap(), 60000);
        assert_eq!(meta.get("i16"), Some(&MetadataValue::I16(-30000)));
        assert_eq!(meta.u64("u32").unwrap(), 4_000_000_000);
        assert_eq!(meta.get("i32").unwrap().as_i64(), Some(-2_000_000_000));
        assert_eq!(meta.f32("f32").unwrap(), 1.5);
        assert!(meta.bool("bool").unwrap());
        assert_eq!(meta.u64("u64").unwrap(), u64::MAX);
        assert_eq!(meta.get("i64").unwrap().as_i64(), Some(i64::MIN));
        assert_eq!(meta.get("f64"), Some(&MetadataValue::F64(-2.25)));
        assert_eq!(meta.str_array("words").unwrap(), ["a", "bé", "🚀"]);
        let nested = meta.get("nested").unwrap().as_array().unwrap();
        assert_eq!(nested[0].as_array().unwrap()[0], MetadataValue::I32(-1));
        assert_eq!(nested[1].as_array().unwrap().len(), 1);
        assert_eq!(meta.get("empty").unwrap().as_array().unwrap().len(), 0);

        let TensorData::Dense(vec) = file.tensor("vec").unwrap() else {
            panic!("F32 is dense")
        };
        assert_eq!(vec.as_slice::<f32>().unwrap(), &[1.0, -2.0, 3.5]);
        let TensorData::Dense(mat) = file.tensor("mat").unwrap() else {
            panic!("F16 is dense")
        };
        assert_eq!((mat.dtype(), mat.shape()), (DType::F16, &[3usize, 2][..]));
        let mat32 = file.tensor("mat").unwrap().to_f32().unwrap();
        assert_eq!(mat32.as_slice::<f32>().unwrap(), &[1., 2., 3., 4., 5., 6.]);
        let bf = file.tensor("bf").unwrap().to_f32().unwrap();
        assert_eq!(bf.as_slice::<f32>().unwrap(), &[1.0, -2.0]);
        let TensorData::Quantized(q) = file.tensor("q").unwrap() else {
            panic!("Q8_0 is quantized")
        };
        assert_eq!(
            (q.ggml_type(), q.shape(), q.row_bytes()),
            (GgmlType::Q8_0, &[1usize, 32][..], 34)
        );
        let expected: Vec<f32> = (0..32).map(|i| (i - 16) as f32).collect();
        assert_eq!(
            q.dequantize().unwrap().as_slice::<f32>().unwrap(),
            &expected[..]
        );
        assert_eq!(file.tensor_infos().len(), 4);
        assert_eq!(file.tensor_bytes("bf").unwrap(), &[0x80, 0x3F, 0x00, 0xC0]);
    }
}

#[test]
fn custom_alignment_is_honoured() {
    let bytes = GgufWriter::new(3)
        .kv("general.alignment", MetadataValue::U32(64))
        .tensor("a", &[1], GgmlType::F32, f32_bytes(&[7.0]))
        .tensor("b", &[1], GgmlType::F32, f32_bytes(&[8.0]))
        .to_bytes();
    let file = parse(bytes).unwrap();
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.data_start() % 64, 0);
    assert_eq!(file.tensor_info("b").unwrap().offset, 64);
    let b = file.tensor("b").unwrap().to_f32().unwrap();
    assert_eq!(b.as_slice::<f32>().unwrap(), &[8.0]);
    let bad = GgufWriter::new(3).kv("general.alignment", MetadataValue::U32(24));
    assert!(matches!(
        parse(bad.to_bytes()),
        Err(Error::Malformed { .. })
    ));
}

/// Offset of the first metadata value (after magic, version, counts, and the first key).
fn first_value_offset(key: &str) -> usize {
    4 + 4 + 8 + 8 + 8 + key.len() + 4
}

#[test]
fn huge_lengths_and_counts_are_errors_not_allocations() {
    let base = GgufWriter::new(3).kv("s", string("hello")).to_bytes();
    let at = first_value_offset("s");
    let mut huge_string = base.clone();
    huge_string[at..at + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let err = parse(huge_string).expect_err("string length 2^60 is rejected");
    assert!(err.to_string().contains("synthetic.gguf"), "{err}");
    assert!(err.to_string().contains("`s`"), "{err}");

    let base = GgufWriter::new(3).kv("arr", strings(&["x"])).to_bytes();
    let at = first_value_offset("arr") + 4;
    let mut huge_array = base.clone();
    huge_array[at..at + 8].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
    assert!(matches!(parse(huge_array), Err(Error::Malformed { .. })));

    let mut huge_counts = base.clone();
    huge_counts[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(parse(huge_counts).is_err());
    let mut huge_kv = base;
    huge_kv[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(parse(huge_kv).is_err());
}

#[test]
fn bad_headers_and_tensor_ranges_name_what_is_wrong() {
    let good = sample_writer(3).to_bytes();
    let mut bad_magic = good.clone();
    bad_magic[0] = b'X';
    assert!(parse(bad_magic).unwrap_err().to_string().contains("magic"));
    let mut v1 = good.clone();
    v1[4] = 1;
    assert!(parse(v1).unwrap_err().to_string().contains("version 1"));
    let truncated = good[..good.len() - 1].to_vec();
    let err = parse(truncated).unwrap_err();
    assert!(
        matches!(&err, Error::Tensor { tensor, .. } if tensor == "q"),
        "{err}"
    );

    let misaligned = GgufWriter::new(3)
        .tensor("t", &[1], GgmlType::F32, f32_bytes(&[1.0]))
        .to_bytes();
    // header (24) + name (8 + 1) + n_dims (4) + one dim (8) + type (4), then the offset
    let offset_at = 24 + 9 + 4 + 8 + 4;
    let mut shifted = misaligned.clone();
    shifted[offset_at..offset_at + 8].copy_from_slice(&4u64.to_le_bytes());
    let err = parse(shifted).unwrap_err();
    assert!(err.to_string().contains("alignment"), "{err}");

    let split_block = GgufWriter::new(3).tensor("q", &[16], GgmlType::Q4_0, vec![0; 18]);
    assert!(
        parse(split_block.to_bytes())
            .unwrap_err()
            .to_string()
            .contains("`q`")
    );
    let missing = parse(sample_writer(3).to_bytes()).unwrap();
    assert!(matches!(missing.tensor("nope"), Err(Error::Tensor { .. })));
    assert!(matches!(
        missing.metadata().u64("nope"),
        Err(Error::MissingKey { .. })
    ));
    assert!(matches!(
        missing.metadata().u64("words"),
        Err(Error::WrongType { .. })
    ));
}

#[test]
fn mutated_and_truncated_files_never_panic() {
    let good = sample_writer(3).to_bytes();
    let mut rng = Rng(7);
    let mut rejected = 0;
    for len in 0..good.len() {
        rejected += usize::from(parse(good[..len].to_vec()).is_err());
    }
    assert_eq!(rejected, good.len(), "every proper prefix is incomplete");
    for _ in 0..4000 {
        let mut bytes = good.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len());
            bytes[at] = match rng.below(4) {
                0 => 0xFF,
                1 => 0,
                2 => bytes[at] ^ (1 << rng.below(8)),
                _ => rng.next_u64() as u8,
            };
        }
        if let Ok(file) = parse(bytes) {
            for info in file.tensor_infos() {
                if let Ok(data) = file.tensor(&info.name) {
                    let _ = data.to_f32();
                }
            }
        }
    }
}
