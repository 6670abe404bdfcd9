//! The binary interface Rust and the CUDA kernels share, generated from Rust: every constant the
//! `.cu` files use as a `#define` and every `#[repr(C)]` struct passed to a kernel by value.
//!
//! [`source`] is placed in the NVRTC program (src/program.rs) after samebits-math's header and
//! before the `.cu` files, which never restate a constant or a layout. Structs are declared once,
//! in the Rust module that fills them, with [`device_struct!`]: the macro writes the Rust struct
//! and its C declaration, plus `static_assert`s on the sizes of the struct and of every field,
//! so NVRTC rejects a C type whose size differs from its Rust field. `kernels/device_abi.cuh` is
//! a copy of [`source`] kept for readers and for the host emulation (emulate/run.sh); a test
//! keeps it equal.

use samebits_kernels::{REDUCTION_TILE, ReduceKind};
use samebits_ops::BinaryKernel;

use crate::elementwise::MAX_RANK;
use crate::{
    attention, chain, conv, elementwise, gemm, gguf, layout, pool, reduce, resize, source_kernel,
};

/// A Rust field type with a C spelling in a device struct.
pub(crate) trait DeviceField {
    /// The C declaration of `declarator` (a field name, with array suffixes) of this type;
    /// `scalar` replaces the C spelling of the innermost element (a pointer type for a device
    /// address held as `u64`).
    fn c_declaration(declarator: &str, scalar: Option<&str>) -> String;
}

macro_rules! scalar_field {
    ($($t:ty => $c:literal),*) => {$(
        impl DeviceField for $t {
            fn c_declaration(declarator: &str, scalar: Option<&str>) -> String {
                format!("{} {declarator}", scalar.unwrap_or($c))
            }
        }
    )*};
}
scalar_field!(i32 => "int", i64 => "long long", u64 => "unsigned long long", f32 => "float");

impl<T: DeviceField, const N: usize> DeviceField for [T; N] {
    fn c_declaration(declarator: &str, scalar: Option<&str>) -> String {
        T::c_declaration(&format!("{declarator}[{N}]"), scalar)
    }
}

/// A struct declared by [`device_struct!`].
pub(crate) trait DeviceStruct {
    /// Its C declaration with the layout checks.
    fn c_struct() -> String;
}

/// Declares a `#[repr(C)]` struct passed to kernels by value, its `DeviceRepr` and its C
/// declaration (`DeviceStruct::c_struct`) with `static_assert`s on the size and alignment of the
/// struct and the size of every field (same fields in the same order with the same sizes give
/// the same offsets: `#[repr(C)]` follows C's layout rules). Syntax: a struct with doc comments
/// only, an optional `as CName` when the C name differs, and `field: Type as "c scalar"` where a
/// `u64` device address is a C pointer. Doc comments are copied to the C declaration.
macro_rules! device_struct {
    (@c_name $name:ident) => { stringify!($name) };
    (@c_name $name:ident $c_name:ident) => { stringify!($c_name) };
    (
        $(#[doc = $doc:literal])*
        $vis:vis struct $name:ident $(as $c_name:ident)? {
            $(
                $(#[doc = $field_doc:literal])*
                $field_vis:vis $field:ident : $ty:ty $(as $c_scalar:literal)?,
            )*
        }
    ) => {
        $(#[doc = $doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default)]
        $vis struct $name {
            $($(#[doc = $field_doc])* $field_vis $field: $ty,)*
        }

        // SAFETY: a #[repr(C)] struct of plain numbers (device addresses as u64), arrays of them
        // and other device structs; its C declaration is generated from it and NVRTC checks the
        // sizes of the struct and of every field (device_abi.rs).
        unsafe impl cudarc::driver::DeviceRepr for $name {}

        impl $crate::device_abi::DeviceField for $name {
            fn c_declaration(declarator: &str, _: Option<&str>) -> String {
                format!("{} {declarator}", $crate::device_abi::device_struct!(@c_name $name $($c_name)?))
            }
        }

        impl $crate::device_abi::DeviceStruct for $name {
            fn c_struct() -> String {
                let c_name = $crate::device_abi::device_struct!(@c_name $name $($c_name)?);
                let mut c = String::new();
                $(c.push_str(&format!("//{}\n", $doc));)*
                c.push_str(&format!("struct {c_name} {{\n"));
                $(
                    $(c.push_str(&format!("  //{}\n", $field_doc));)*
                    let scalar: Option<&str> = None $(.or(Some($c_scalar)))?;
                    c.push_str(&format!(
                        "  {};\n",
                        <$ty as $crate::device_abi::DeviceField>::c_declaration(
                            stringify!($field),
                            scalar
                        )
                    ));
                )*
                c.push_str("};\n");
                c.push_str(&format!(
                    "static_assert(sizeof({c_name}) == {}, \"{c_name}: Rust size\");\n",
                    std::mem::size_of::<$name>()
                ));
                c.push_str(&format!(
                    "static_assert(alignof({c_name}) == {}, \"{c_name}: Rust alignment\");\n",
                    std::mem::align_of::<$name>()
                ));
                $(
                    c.push_str(&format!(
                        "static_assert(sizeof({c_name}::{0}) == {1}, \"{c_name}::{0}: Rust size\");\n",
                        stringify!($field),
                        std::mem::size_of::<$ty>()
                    ));
                )*
                c
            }
        }
    };
}
pub(crate) use device_struct;

/// The `#define`s of the program: C name, what it is, and its value from the Rust definition.
fn constants() -> Vec<(&'static str, &'static str, i64)> {
    let reduce = |kind| i64::from(reduce::kind_code(kind));
    vec![
        (
            "SB_TILE",
            "terms of one reduction tile (contract: canonical-sum), samebits_kernels::REDUCTION_TILE",
            REDUCTION_TILE as i64,
        ),
        (
            "SB_MAX_RANK",
            "most axes of a broadcast, strided copy or resize",
            MAX_RANK as i64,
        ),
        (
            "SB_BINARY_ADD",
            "binary operation code of BinaryKernel::Add (sb_binary_op, chain steps)",
            BinaryKernel::Add as i64,
        ),
        (
            "SB_BINARY_SUB",
            "binary operation code of BinaryKernel::Sub",
            BinaryKernel::Sub as i64,
        ),
        (
            "SB_BINARY_MUL",
            "binary operation code of BinaryKernel::Mul",
            BinaryKernel::Mul as i64,
        ),
        (
            "SB_BINARY_DIV",
            "binary operation code of BinaryKernel::Div",
            BinaryKernel::Div as i64,
        ),
        (
            "SB_BINARY_MAX",
            "binary operation code of BinaryKernel::Max (contract: reduce-extrema)",
            BinaryKernel::Max as i64,
        ),
        (
            "SB_BINARY_MIN",
            "binary operation code of BinaryKernel::Min (contract: reduce-extrema)",
            BinaryKernel::Min as i64,
        ),
        (
            "SB_BINARY_POW",
            "binary operation code of BinaryKernel::Pow (sb_powf, contract: activation)",
            BinaryKernel::Pow as i64,
        ),
        (
            "SB_CHAIN_STEPS",
            "most steps of a device chain",
            chain::STEPS as i64,
        ),
        (
            "SB_CHAIN_INPUTS",
            "most inputs of a device chain",
            chain::INPUTS as i64,
        ),
        (
            "SB_CHAIN_OPERANDS",
            "most operands of a chain step",
            chain::OPERANDS as i64,
        ),
        (
            "SB_CHAIN_ABSENT",
            "a chain step's missing operand",
            chain::ABSENT.into(),
        ),
        (
            "SB_CHAIN_FULL",
            "chain input layout: the whole output shape",
            chain::FULL.into(),
        ),
        (
            "SB_CHAIN_SCALAR",
            "chain input layout: one element",
            chain::SCALAR.into(),
        ),
        (
            "SB_CHAIN_CHANNEL",
            "chain input layout: one value per channel",
            chain::CHANNEL.into(),
        ),
        (
            "SB_CHAIN_ROW",
            "chain input layout: one value per row of the last axis",
            chain::ROW.into(),
        ),
        (
            "SB_CHAIN_LAST",
            "chain input layout: one value per position along the last axis",
            chain::LAST.into(),
        ),
        (
            "SB_CHAIN_RELU",
            "chain step code of Relu; codes below it are the binary operations of sb_binary_op",
            chain::RELU.into(),
        ),
        (
            "SB_CHAIN_CLIP",
            "chain step code of Clip (operands x, lo, hi)",
            chain::CLIP.into(),
        ),
        (
            "SB_CHAIN_BATCH_NORM",
            "chain step code of BatchNormalization (operands x, scale, bias, mean, var)",
            chain::BATCH_NORM.into(),
        ),
        (
            "SB_CHAIN_ACTIVATION",
            "chain step code of activation 0 of sb_activation; activation a is this + a",
            chain::ACTIVATION.into(),
        ),
        (
            "SB_REDUCE_SUM",
            "reduction code of ReduceKind::Sum",
            reduce(ReduceKind::Sum),
        ),
        (
            "SB_REDUCE_SUM_SQUARES",
            "reduction code of ReduceKind::SumSquares",
            reduce(ReduceKind::SumSquares),
        ),
        (
            "SB_REDUCE_PROD",
            "reduction code of ReduceKind::Prod",
            reduce(ReduceKind::Prod),
        ),
        (
            "SB_REDUCE_MAX",
            "reduction code of ReduceKind::Max",
            reduce(ReduceKind::Max),
        ),
        (
            "SB_REDUCE_MIN",
            "reduction code of ReduceKind::Min",
            reduce(ReduceKind::Min),
        ),
        (
            "SB_GEMV_MAX_M",
            "most rows of the split-K GEMV",
            gemm::SPLIT_K_MAX_M as i64,
        ),
        (
            "SB_RECURRENT_ROWS",
            "rows a warp of the recurrent kernel reduces at once, samebits_ops::RECURRENT_STAGE_ROWS",
            samebits_ops::RECURRENT_STAGE_ROWS as i64,
        ),
        (
            "SB_RECURRENT_COLS",
            "columns of one staged piece of them, samebits_ops::RECURRENT_STAGE_COLS",
            samebits_ops::RECURRENT_STAGE_COLS as i64,
        ),
        (
            "SB_GGUF_PITCH",
            "floats one 64-term tile of a GGUF product's activation row takes in shared memory",
            gguf::ROW_PITCH as i64,
        ),
    ]
}

/// The C declarations of every device struct, a nested struct before its container.
fn structs() -> [String; 14] {
    [
        elementwise::BroadcastLayout::c_struct(),
        gemm::SbMat::c_struct(),
        gemm::SbEpilogue::c_struct(),
        gguf::SbGgufMatrix::c_struct(),
        gguf::SbGgufMatrices::c_struct(),
        attention::SbStrides::c_struct(),
        attention::SbAttentionProduct::c_struct(),
        attention::SbRaggedSequence::c_struct(),
        conv::SbConv::c_struct(),
        pool::SbPool::c_struct(),
        resize::SbResize::c_struct(),
        layout::SbCopy::c_struct(),
        chain::SbChain::c_struct(),
        source_kernel::SbSourceKernel::c_struct(),
    ]
}

/// The generated source: the constants, the ggml type codes and block geometry
/// ([`gguf::ggml_type_source`]), then the structs.
pub(crate) fn source() -> String {
    let mut c = String::from(
        "// Generated from Rust by samebits-cuda/src/device_abi.rs: constants and kernel argument\n\
         // structs shared with the host code. Do not edit; change the Rust definitions.\n\n",
    );
    for (name, what, value) in constants() {
        let value = if value < 0 {
            format!("({value})")
        } else {
            value.to_string()
        };
        c.push_str(&format!("// {what}\n#define {name} {value}\n"));
    }
    c.push_str(&gguf::ggml_type_source());
    for declaration in structs() {
        c.push('\n');
        c.push_str(&declaration);
    }
    c
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// kernels/device_abi.cuh is [`super::source`]; `SAMEBITS_BLESS=1` rewrites it.
    #[test]
    fn checked_in_copy_is_current() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/device_abi.cuh");
        let generated = super::source();
        if std::env::var_os("SAMEBITS_BLESS").is_some() {
            std::fs::write(&path, &generated).expect("write kernels/device_abi.cuh");
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "kernels/device_abi.cuh is stale: rerun this test with SAMEBITS_BLESS=1"
        );
    }

    /// No `.cu` file restates a constant or a struct of the device ABI.
    #[test]
    fn kernels_restate_nothing_of_the_abi() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let abi = super::source();
        let defined: Vec<&str> = abi
            .lines()
            .filter_map(|l| {
                l.strip_prefix("#define ")
                    .or_else(|| l.strip_prefix("struct "))
            })
            .filter_map(|l| l.split([' ', '{']).next())
            .collect();
        assert!(defined.contains(&"SB_TILE") && defined.contains(&"SbChain"));
        for entry in std::fs::read_dir(dir).expect("kernels/") {
            let path = entry.expect("kernels/ entry").path();
            if path.extension().is_none_or(|e| e != "cu") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read a kernel file");
            for name in &defined {
                for restated in [format!("#define {name} "), format!("struct {name} {{")] {
                    assert!(
                        !text.contains(&restated),
                        "{} restates {name} of the device ABI",
                        path.display()
                    );
                }
            }
        }
    }
}
