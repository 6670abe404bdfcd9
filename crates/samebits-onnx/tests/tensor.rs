//! TensorProto decoding for every IR dtype from raw_data and from the typed fields, exact
//! length checks, and the test-data files (TensorProto, SequenceProto, OptionalProto).

use half::{bf16, f16};
use prost::Message;
use samebits_ir::{DType, Tensor, Value, ValueType};
use samebits_onnx::proto::tensor_proto::DataType;
use samebits_onnx::proto::{OptionalProto, SequenceProto, TensorProto, optional_proto};
use samebits_onnx::{
    OnnxError, read_tensor_pb, read_value_pb, tensor_from_proto, tensor_to_proto, write_tensor_pb,
};

fn typed(data_type: DataType, dims: &[i64]) -> TensorProto {
    TensorProto {
        name: Some("t".into()),
        dims: dims.to_vec(),
        data_type: Some(data_type as i32),
        ..Default::default()
    }
}

fn decode(proto: TensorProto) -> Result<Tensor, OnnxError> {
    tensor_from_proto(proto, None)
}

fn error(proto: TensorProto) -> String {
    decode(proto).unwrap_err().to_string()
}

/// One tensor of every numeric and bool dtype, with values that exercise sign and range.
fn samples() -> Vec<Tensor> {
    let shape = vec![3];
    vec![
        Tensor::from_vec(shape.clone(), vec![1.5f32, -0.0, f32::INFINITY]).unwrap(),
        Tensor::from_vec(shape.clone(), vec![1e300f64, -2.0, 0.1]).unwrap(),
        Tensor::from_vec(
            shape.clone(),
            vec![f16::from_f32(1.5), f16::MIN, f16::NEG_ZERO],
        )
        .unwrap(),
        Tensor::from_vec(
            shape.clone(),
            vec![bf16::from_f32(-3.0), bf16::MAX, bf16::ONE],
        )
        .unwrap(),
        Tensor::from_vec(shape.clone(), vec![i8::MIN, -1i8, i8::MAX]).unwrap(),
        Tensor::from_vec(shape.clone(), vec![i16::MIN, -1i16, i16::MAX]).unwrap(),
        Tensor::from_vec(shape.clone(), vec![i32::MIN, -1i32, i32::MAX]).unwrap(),
        Tensor::from_vec(shape.clone(), vec![i64::MIN, -1i64, i64::MAX]).unwrap(),
        Tensor::from_vec(shape.clone(), vec![0u8, 7, u8::MAX]).unwrap(),
        Tensor::from_vec(shape.clone(), vec![0u16, 7, u16::MAX]).unwrap(),
        Tensor::from_vec(shape.clone(), vec![0u32, 7, u32::MAX]).unwrap(),
        Tensor::from_vec(shape.clone(), vec![0u64, 7, u64::MAX]).unwrap(),
        Tensor::from_bools(shape.clone(), vec![true, false, true]).unwrap(),
        Tensor::from_strings(shape.clone(), vec!["a".into(), "".into(), "ünï".into()]).unwrap(),
        Tensor::from_codes(DType::F8E4M3FN, shape.clone(), vec![0x7E, 0x80, 0x7F]).unwrap(),
        Tensor::from_codes(DType::F8E8M0, shape.clone(), vec![0, 127, 0xFF]).unwrap(),
        Tensor::from_codes(DType::F4E2M1, shape.clone(), vec![0x7, 0xF, 0x1]).unwrap(),
        Tensor::from_codes(DType::I4, shape.clone(), vec![0xF8, 0xFF, 7]).unwrap(),
        Tensor::from_codes(DType::U4, shape.clone(), vec![15, 0, 9]).unwrap(),
        Tensor::from_codes(DType::I2, shape.clone(), vec![0xFE, 1, 0xFF]).unwrap(),
        Tensor::from_codes(DType::U2, vec![5], vec![3, 0, 1, 2, 3]).unwrap(),
    ]
}

/// The same tensor written into the typed repeated field the schema assigns to its dtype.
fn typed_fields_of(t: &Tensor) -> TensorProto {
    let mut p = tensor_to_proto(t, "t");
    p.raw_data = None;
    let ints = |v: Vec<i64>| v.into_iter().map(|x| x as i32).collect();
    match t.dtype() {
        DType::F32 => p.float_data = t.as_slice::<f32>().unwrap().to_vec(),
        DType::F64 => p.double_data = t.as_slice::<f64>().unwrap().to_vec(),
        DType::I64 => p.int64_data = t.to_i64_vec().unwrap(),
        DType::U64 => p.uint64_data = t.as_slice::<u64>().unwrap().to_vec(),
        DType::U32 => p.uint64_data = t.to_i64_vec().unwrap().iter().map(|&v| v as u64).collect(),
        DType::F16 => {
            p.int32_data = t
                .as_slice::<f16>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits() as i32)
                .collect()
        }
        DType::BF16 => {
            p.int32_data = t
                .as_slice::<bf16>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits() as i32)
                .collect()
        }
        DType::Bool => p.int32_data = t.as_bools().unwrap().iter().map(|&b| b as i32).collect(),
        d if d.is_storage_only() => {
            let packed = samebits_ir::small_types::pack(d, t.as_codes().unwrap());
            p.int32_data = packed.into_iter().map(i32::from).collect()
        }
        DType::String => {}
        _ => p.int32_data = ints(t.to_i64_vec().unwrap()),
    }
    p
}

#[test]
fn every_dtype_decodes_from_raw_data_and_from_its_typed_field() {
    for t in samples() {
        let raw = tensor_to_proto(&t, "t");
        assert_eq!(
            decode(raw).unwrap(),
            t,
            "raw_data / string_data of {}",
            t.dtype()
        );
        assert_eq!(
            decode(typed_fields_of(&t)).unwrap(),
            t,
            "typed field of {}",
            t.dtype()
        );
    }
}

#[test]
fn lengths_are_checked_against_the_shape_before_allocating() {
    let mut p = typed(DataType::Float, &[2, 2]);
    p.raw_data = Some(vec![0; 15]);
    assert!(
        error(p).ends_with(
            "tensor \"t\": f32 tensor of shape [2, 2] needs 16 bytes of raw_data, has 15"
        )
    );

    let mut p = typed(DataType::Int64, &[1 << 40, 1 << 20]);
    p.int64_data = vec![1, 2];
    assert!(error(p).contains("needs 1152921504606846976 values, int64_data has 2"));

    let mut p = typed(DataType::Float, &[i64::MAX, i64::MAX]);
    p.raw_data = Some(vec![0; 4]);
    assert!(error(p).contains("more elements than fit"));

    let mut p = typed(DataType::Float, &[2, -1]);
    p.float_data = vec![1.0, 2.0];
    assert!(error(p).contains("negative dim -1"));

    let mut p = typed(DataType::Int32, &[2]);
    p.float_data = vec![1.0, 2.0];
    assert!(error(p).contains("i32 tensor stores its values in float_data, not int32_data"));

    let mut p = typed(DataType::Float, &[1]);
    p.float_data = vec![1.0];
    p.raw_data = Some(vec![0; 4]);
    assert!(error(p).contains("both raw_data and float_data"));

    let p = typed(DataType::Float, &[3]);
    assert!(error(p).contains("needs 3 values, float_data has 0"));
    assert_eq!(decode(typed(DataType::Float, &[0, 5])).unwrap().numel(), 0);
}

#[test]
fn narrow_typed_values_out_of_range_are_errors() {
    for (data_type, value) in [
        (DataType::Int8, 128),
        (DataType::Uint8, -1),
        (DataType::Int16, 40000),
        (DataType::Uint16, 70000),
        (DataType::Float16, -1),
        (DataType::Bool, 2),
    ] {
        let mut p = typed(data_type, &[1]);
        p.int32_data = vec![value];
        let msg = error(p);
        assert!(msg.contains(&value.to_string()), "{msg}");
    }
    let mut p = typed(DataType::Uint32, &[1]);
    p.uint64_data = vec![1 << 32];
    assert!(error(p).contains("does not fit a u32 tensor"));
    let mut p = typed(DataType::String, &[1]);
    p.string_data = vec![vec![0xff, 0xfe]];
    assert!(decode(p).unwrap_err().is_unsupported());
    let mut p = typed(DataType::Bool, &[1]);
    p.raw_data = Some(vec![3]);
    assert!(decode(p).is_err());
}

#[test]
fn unsupported_and_unknown_data_types_are_named() {
    for (data_type, name) in [
        (DataType::Complex64, "COMPLEX64"),
        (DataType::Complex128, "COMPLEX128"),
    ] {
        let mut p = typed(data_type, &[1]);
        p.raw_data = Some(vec![0; 8]);
        let err = decode(p).unwrap_err();
        assert!(matches!(err, OnnxError::UnsupportedDataType { .. }));
        assert!(
            err.to_string()
                .contains(&format!("tensor \"t\": unsupported data type {name}")),
            "{err}"
        );
    }
    let mut p = typed(DataType::Float, &[1]);
    p.data_type = Some(99);
    assert!(error(p).contains("unknown ONNX data type 99"));
    assert!(error(typed(DataType::Undefined, &[1])).contains("UNDEFINED"));
    assert_eq!(samebits_onnx::onnx_data_type_name(17), "FLOAT8E4M3FN");
    assert_eq!(samebits_onnx::dtype_from_onnx(16).unwrap(), DType::BF16);
}

#[test]
fn test_data_files_round_trip_tensors_sequences_and_optionals() {
    let dir = tempfile::tempdir().unwrap();
    for (i, t) in samples().into_iter().enumerate() {
        let path = dir.path().join(format!("input_{i}.pb"));
        std::fs::write(&path, write_tensor_pb(&t)).unwrap();
        assert_eq!(read_tensor_pb(&path).unwrap(), t);
    }

    let elems = vec![
        Tensor::from_vec(vec![2], vec![1i64, 2]).unwrap(),
        Tensor::from_vec(vec![1], vec![3i64]).unwrap(),
    ];
    let seq = SequenceProto {
        elem_type: Some(1),
        tensor_values: elems.iter().map(|t| tensor_to_proto(t, "")).collect(),
        ..Default::default()
    };
    let seq_path = dir.path().join("seq.pb");
    std::fs::write(&seq_path, seq.encode_to_vec()).unwrap();
    let i64_type = ValueType::tensor(DType::I64, None);
    let seq_type = ValueType::Sequence(Box::new(i64_type.clone()));
    assert_eq!(
        read_value_pb(&seq_path, Some(&seq_type)).unwrap(),
        Value::Sequence(elems.clone())
    );
    let f32_seq = ValueType::Sequence(Box::new(ValueType::tensor(DType::F32, None)));
    assert!(
        read_value_pb(&seq_path, Some(&f32_seq)).is_err(),
        "element dtype is checked"
    );

    let opt_type = ValueType::Optional(Box::new(i64_type));
    let some = OptionalProto {
        elem_type: Some(optional_proto::DataType::Tensor as i32),
        tensor_value: Some(tensor_to_proto(&elems[1], "")),
        ..Default::default()
    };
    let none = OptionalProto {
        elem_type: Some(optional_proto::DataType::Tensor as i32),
        ..Default::default()
    };
    for (proto, expected) in [
        (
            some,
            Value::Optional(Some(Box::new(Value::Tensor(elems[1].clone())))),
        ),
        (none, Value::Optional(None)),
    ] {
        let path = dir.path().join("opt.pb");
        std::fs::write(&path, proto.encode_to_vec()).unwrap();
        assert_eq!(read_value_pb(&path, Some(&opt_type)).unwrap(), expected);
    }

    let garbage = dir.path().join("bad.pb");
    std::fs::write(&garbage, [0x0a, 0xff]).unwrap();
    let msg = read_tensor_pb(&garbage).unwrap_err().to_string();
    assert!(
        msg.contains("bad.pb: truncated or malformed protobuf (failed to decode TensorProto"),
        "{msg}"
    );
    let msg = read_tensor_pb(&dir.path().join("absent.pb"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("absent.pb"), "{msg}");
}

#[test]
fn small_integer_and_float4_tensors_are_packed_low_bits_first() {
    let t = Tensor::from_codes(DType::I4, vec![3], vec![0xF8, 0xFF, 7]).unwrap();
    assert_eq!(tensor_to_proto(&t, "t").raw_data.unwrap(), [0xF8, 0x07]);
    let t = Tensor::from_codes(DType::U2, vec![5], vec![3, 0, 1, 2, 3]).unwrap();
    assert_eq!(
        tensor_to_proto(&t, "t").raw_data.unwrap(),
        [0b10_01_00_11, 0b11]
    );
    let mut p = typed(DataType::Int4, &[3]);
    p.raw_data = Some(vec![0xF8]);
    assert!(error(p).contains("i4 tensor of shape [3] needs 2 bytes in raw_data, has 1"));
    let mut p = typed(DataType::Float4e2m1, &[2]);
    p.int32_data = vec![0x1F0];
    assert!(error(p).contains("int32_data value 496 does not fit a f4e2m1 tensor"));
}
