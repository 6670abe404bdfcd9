//! The real SmolLM2-135M-Instruct Q4_1 GGUF (skipped with a notice when absent): header, model
//! configuration, tensor views, and dequantized rows against `tools/reference_weights.py`.

mod common;

use common::{GgufWriter, smollm2_path, string};
use samebits_ggml::dequantize_row;
use samebits_gguf::{Error, GgmlType, GgufFile, MetadataValue, ModelConfig, TensorData};
use samebits_ir::DType;
use std::sync::Arc;

/// Printed by `python3 tools/reference_weights.py <SmolLM2 GGUF>` (the `gguf` package's numpy
/// dequantization): tensor, row, the first 8 values as f32 bits, and the f64 sum of the row.
const REFERENCE_ROWS: [(&str, usize, [u32; 8], f64); 4] = [
    (
        "token_embd.weight",
        504,
        [
            0x3de07800, 0x3c8ed800, 0xbdc1dc00, 0x3da85a00, 0x3dbcc200, 0xbce07800, 0x3d607800,
            0x3d93f200,
        ],
        -3.5683345794677734,
    ),
    (
        "blk.0.attn_q.weight",
        7,
        [
            0x3eb97800, 0xbe61b000, 0x3d914000, 0x3f71e400, 0xbf030000, 0x3d914000, 0xbcd68000,
            0xbcd68000,
        ],
        -5.409759521484375,
    ),
    (
        "blk.29.ffn_down.weight",
        575,
        [
            0xbe6ab000, 0xbd204000, 0xbe8dac00, 0x3e7be000, 0x3c098000, 0xbd204000, 0x3d650000,
            0x3e1a9000,
        ],
        -5.229949951171875,
    ),
    (
        "output_norm.weight",
        0,
        [
            0x3fe10000, 0x3fe90000, 0x3fe40000, 0x3fcd0000, 0x3fdf0000, 0x3fdc0000, 0x3fea0000,
            0x3fe00000,
        ],
        1038.33203125,
    ),
];

#[test]
fn header_config_and_tensor_table() {
    let Some(path) = smollm2_path() else { return };
    let file = GgufFile::open(path).unwrap();
    assert_eq!(file.version(), 3);
    assert_eq!(file.metadata().entries().len(), 33);
    assert_eq!(file.tensor_infos().len(), 272);
    assert_eq!(file.alignment(), 32);
    let count = |ty| {
        file.tensor_infos()
            .iter()
            .filter(|t| t.ggml_type == ty)
            .count()
    };
    assert_eq!(
        (
            count(GgmlType::Q4_1),
            count(GgmlType::Q8_0),
            count(GgmlType::F32)
        ),
        (210, 1, 61)
    );
    assert_eq!(
        file.metadata()
            .str_array("tokenizer.ggml.merges")
            .unwrap()
            .len(),
        48_900
    );

    let config = ModelConfig::from_gguf(&file).unwrap();
    assert_eq!(
        config,
        ModelConfig {
            architecture: "llama".into(),
            qk_rows_half_split: false,
            variant: Default::default(),
            block_count: 30,
            embedding_length: 576,
            feed_forward_length: 1536,
            head_count: 9,
            head_count_kv: 3,
            head_dim: 64,
            rope_dimension_count: 64,
            rope_freq_base: 100_000.0,
            rope_freq_divisors: None,
            rms_norm_eps: 1e-5,
            context_length: 8192,
            vocab_size: 49152,
            tied_embeddings: true,
        }
    );

    let embd = file.tensor_info("token_embd.weight").unwrap();
    assert_eq!(
        (embd.dims.as_slice(), embd.ggml_type),
        (&[576u64, 49152][..], GgmlType::Q8_0)
    );
    let TensorData::Quantized(q) = file.tensor("blk.0.ffn_down.weight").unwrap() else {
        panic!("Q4_1 is quantized")
    };
    assert_eq!(
        (q.shape(), q.row_bytes()),
        (&[576usize, 1536][..], 1536 / 32 * 20)
    );
    let TensorData::Dense(norm) = file.tensor("blk.0.attn_norm.weight").unwrap() else {
        panic!("F32 is dense")
    };
    assert_eq!((norm.dtype(), norm.shape()), (DType::F32, &[576usize][..]));
}

#[test]
fn dequantized_rows_match_the_gguf_package() {
    let Some(path) = smollm2_path() else { return };
    let file = GgufFile::open(path).unwrap();
    for (name, row, first_bits, sum) in REFERENCE_ROWS {
        let info = file.tensor_info(name).unwrap();
        let k = info.row_len();
        let row_bytes = info.ggml_type.row_bytes(k).unwrap();
        let blocks = &file.tensor_bytes(name).unwrap()[row * row_bytes..(row + 1) * row_bytes];
        let mut values = vec![0f32; k];
        dequantize_row(info.ggml_type, blocks, &mut values).unwrap();
        let bits: Vec<u32> = values[..8].iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, first_bits, "{name} row {row}");
        let total: f64 = values.iter().map(|&v| v as f64).sum();
        assert!(
            (total - sum).abs() < 1e-9,
            "{name} row {row}: {total} vs {sum}"
        );
    }
}

fn llama_writer() -> GgufWriter {
    GgufWriter::new(3)
        .kv("general.architecture", string("llama"))
        .kv("llama.block_count", MetadataValue::U32(2))
        .kv("llama.embedding_length", MetadataValue::U32(64))
        .kv("llama.feed_forward_length", MetadataValue::U32(128))
        .kv("llama.attention.head_count", MetadataValue::U32(4))
        .kv("llama.rope.freq_base", MetadataValue::F32(10_000.0))
        .kv(
            "llama.attention.layer_norm_rms_epsilon",
            MetadataValue::F32(1e-6),
        )
        .kv("llama.context_length", MetadataValue::U64(256))
        .kv("llama.vocab_size", MetadataValue::U32(100))
}

#[test]
fn config_defaults_and_missing_keys() {
    let parse = |w: GgufWriter| GgufFile::from_source("cfg.gguf", Arc::new(w.to_bytes())).unwrap();
    let file = parse(llama_writer().tensor("output.weight", &[1], GgmlType::F32, vec![0; 4]));
    let config = ModelConfig::from_gguf(&file).unwrap();
    assert_eq!(
        (
            config.head_count_kv,
            config.head_dim,
            config.rope_dimension_count
        ),
        (4, 16, 16)
    );
    assert!(!config.tied_embeddings);
    assert_eq!(config.context_length, 256);

    let mut without_blocks = llama_writer();
    without_blocks
        .metadata
        .retain(|(k, _)| k != "llama.block_count");
    let err = ModelConfig::from_gguf(&parse(without_blocks)).unwrap_err();
    assert!(
        matches!(&err, Error::MissingKey { key, file } if key == "llama.block_count" && file == "cfg.gguf"),
        "{err}"
    );
    let bad_kv = llama_writer().kv("llama.attention.head_count_kv", MetadataValue::U32(3));
    let err = ModelConfig::from_gguf(&parse(bad_kv)).unwrap_err();
    assert!(err.to_string().contains("head_count_kv"), "{err}");
    let other = GgufWriter::new(3).kv("general.architecture", string("mamba"));
    assert!(
        ModelConfig::from_gguf(&parse(other))
            .unwrap_err()
            .to_string()
            .contains("mamba")
    );
    // Sizes found by mutation that used to panic or exhaust memory further on.
    for (key, value, named) in [
        (
            "llama.rope.dimension_count",
            0x7fff_ffff,
            "rope.dimension_count",
        ),
        ("llama.rope.dimension_count", 15, "rope.dimension_count"),
        ("llama.rope.dimension_count", 0, "rope.dimension_count"),
        ("llama.vocab_size", 0, "vocab_size"),
    ] {
        let mut writer = llama_writer();
        writer.metadata.retain(|(k, _)| k != key);
        let err = ModelConfig::from_gguf(&parse(writer.kv(key, MetadataValue::U32(value))))
            .unwrap_err()
            .to_string();
        assert!(err.contains(named), "{key} = {value}: {err}");
    }
    let duplicate = llama_writer().kv("llama.attention.layer_norm_rms_epsilon", string("x"));
    assert!(GgufFile::from_source("cfg.gguf", Arc::new(duplicate.to_bytes())).is_err());
}
