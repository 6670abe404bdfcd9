//! The samebits graph IR: what every importer (ONNX, GGUF, Hugging Face) produces and every later
//! stage (passes, ops, runtime) consumes.
//!
//! - [`DType`] and [`Element`]: the element types a tensor can hold.
//! - [`small_types`]: the float8, float4, 4- and 2-bit integer codes: conversions and packing.
//! - [`Tensor`]: an immutable, cheaply cloned n-d array whose bytes live on the heap or in a
//!   memory-mapped file.
//! - [`Dim`], [`Shape`] and [`ValueType`]: shapes with symbolic dims, as ONNX writes them.
//! - [`Graph`], [`Node`] and [`Attribute`]: the computation, in ONNX's vocabulary.
//! - [`Value`]: a run-time value (tensor, sequence, optional).
//! - [`dump`]: the JSON and DOT renderings written after each compiler pass.
//! - [`limits`]: the bounds an untrusted model's sizes are checked against before allocation.
//! - [`RecycledF32`]: an f32 output buffer reused from a shelf of released ones, not cleared.
//! - [`paths`]: where the files an untrusted model names may be (inside its folder).

mod dtype;
pub mod dump;
mod error;
mod graph;
pub mod limits;
pub mod paths;
mod recycled;
mod shape;
pub mod small_types;
mod tensor;
mod value;

pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use graph::{Attribute, Graph, Model, Node, OpsetImports, ValueInfo};
pub use recycled::{RecycledF32, poison_taken_buffers};
pub use shape::{Dim, Shape, ValueType};
pub use tensor::{ByteSource, Tensor, checked_numel};
pub use value::Value;
