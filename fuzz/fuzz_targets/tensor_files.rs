//! Tensor-file bytes through the readers `samebits run` and the conformance runner use: as a
//! `.npy` file ([`tensor_file::parse_npy`] and [`tensor_file::read_tensor`]), as a `.pb`
//! `TensorProto` ([`tensor_file::read_tensor`]), and as a `.pb` sequence or optional value
//! ([`samebits_onnx::read_value_pb`]). A tensor read from `.npy` must write back to the same
//! bytes it reads again from.

#![no_main]

use libfuzzer_sys::fuzz_target;
use samebits_fuzz::{scratch_subdir, write_file};
use samebits_ir::{DType, ValueType};
use samebits_runtime::tensor_file;

fuzz_target!(|data: &[u8]| {
    let folder = scratch_subdir("tensors");
    if let Ok(tensor) = tensor_file::parse_npy(data)
        && let Ok(written) = tensor_file::npy_bytes(&tensor)
    {
        let again = tensor_file::parse_npy(&written).expect("a written .npy file reads back");
        assert_eq!(
            tensor_file::npy_bytes(&again).expect("a read-back tensor writes"),
            written,
            "a .npy round trip changed the bytes"
        );
    }
    let _ = tensor_file::read_tensor(&write_file(&folder, "t.npy", data));
    let pb = write_file(&folder, "t.pb", data);
    let _ = tensor_file::read_tensor(&pb);
    let element = ValueType::tensor(DType::F32, None);
    let _ =
        samebits_onnx::read_value_pb(&pb, Some(&ValueType::Sequence(Box::new(element.clone()))));
    let _ = samebits_onnx::read_value_pb(&pb, Some(&ValueType::Optional(Box::new(element))));
});
