//! The samebits ONNX importer: ONNX files into the samebits IR.
//!
//! - [`load_model`] / [`load_model_from_bytes`]: a `ModelProto` into a [`samebits_ir::Model`],
//!   with model-local functions expanded inline and external data memory-mapped.
//! - [`tensor_from_proto`] / [`tensor_to_proto`]: `TensorProto` ↔ [`samebits_ir::Tensor`].
//! - [`read_tensor_pb`], [`read_value_pb`], [`write_tensor_pb`]: the conformance suite's
//!   test-data files.
//! - [`external_data_files`]: the weight files a model refers to.
//! - [`proto`]: the protobuf messages, generated at build time from `proto/onnx.proto` and
//!   `proto/onnx-data.proto`, the ONNX format's schema (Apache-2.0, vendored unchanged from the
//!   onnx 1.22.0 wheel, except that `onnx-data.proto` imports `onnx.proto` where the wheel has
//!   `onnx/onnx-ml.proto`; the messages read here are the same in both).
//!
//! Every failure is an [`OnnxError`] naming the file and where in it; no input bytes panic.

mod error;
mod external;
mod function;
mod model;
pub mod proto;
mod tensor;
mod testdata;
mod types;

pub use error::{ExternalDataProblem, Location, OnnxError, Result};
pub use external::external_data_files;
pub use model::{
    SUPPORTED_DEFAULT_OPSETS, load_model, load_model_from_bytes, model_from_proto, read_model_proto,
};
pub use tensor::{MAX_DENSIFIED_BYTES, tensor_from_proto, tensor_to_proto};
pub use testdata::{read_tensor_pb, read_value_pb, write_tensor_pb};
pub use types::{dtype_from_onnx, onnx_data_type, onnx_data_type_name};
