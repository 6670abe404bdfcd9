//! The samebits C API (`include/samebits.h`, generated from this file by cbindgen): compile an
//! ONNX model and run it on tensors in memory (optionally writing the receipt `samebits run`
//! writes), generate text with a language model (optionally with its receipt), and verify any
//! receipt. Built as `libsamebits.so` and `libsamebits.a`.
//!
//! Conventions: strings are NUL-terminated UTF-8; a function that can fail takes `char
//! **error` last and, on failure, returns NULL (or -1) and stores there the message the
//! `samebits` command prints, to be freed with `samebits_string_free` (`error` may be NULL).
//! Every object a function returns is freed with its `_free` function.

use samebits_ir::{DType, Tensor, Value};
use samebits_llm::{GenerateOptions, Llm, SamplingOptions};
use samebits_runtime::{CompileOptions, CompiledModel, Device, OperationSet};
use std::collections::BTreeMap;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::PathBuf;

/// An ONNX model compiled for one device and operation set.
pub struct SamebitsModel {
    compiled: CompiledModel,
}

/// The outputs of one run, in the model's output order.
pub struct SamebitsOutputs {
    outputs: Vec<OwnedOutput>,
}

struct OwnedOutput {
    name: CString,
    dtype: CString,
    shape: Vec<usize>,
    data: Vec<u8>,
}

/// One input of `samebits_run`: a row-major tensor of little-endian elements.
#[repr(C)]
pub struct SamebitsTensorView {
    /// The model input's name.
    pub name: *const c_char,
    /// The element type as samebits names it: "f32", "f64", "i64", "i32", "u8", "bool", ...
    pub dtype: *const c_char,
    /// `rank` dims.
    pub shape: *const usize,
    pub rank: usize,
    /// `size` bytes: the product of the dims times the element size.
    pub data: *const c_void,
    pub size: usize,
}

/// A message for the caller, or nothing when they passed no place for it.
///
/// # Safety
/// `error` is NULL or points to writable storage for one pointer.
unsafe fn report(error: *mut *mut c_char, message: impl std::fmt::Display) {
    if !error.is_null() {
        let text =
            CString::new(message.to_string().replace('\0', " ")).expect("NUL bytes were replaced");
        // SAFETY: the caller passes NULL or a writable pointer slot (documented contract).
        unsafe { *error = text.into_raw() };
    }
}

/// A string argument, `None` when NULL.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn text<'a>(s: *const c_char, what: &str) -> Result<Option<&'a str>, String> {
    if s.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map(Some)
        .map_err(|_| format!("{what} is not UTF-8"))
}

/// A string argument that must be given.
///
/// # Safety
/// As [`text`].
unsafe fn required<'a>(s: *const c_char, what: &str) -> Result<&'a str, String> {
    // SAFETY: forwarded contract.
    unsafe { text(s, what) }?.ok_or_else(|| format!("{what} is NULL"))
}

/// Compiles the ONNX model at `path` for `operation_set` ("reproducible" when NULL: the same
/// bits on every machine; "deterministic" or "default") on `device` ("cpu" when NULL, "cuda",
/// "cuda:N"). Returns NULL on failure.
///
/// # Safety
/// Strings are NULL (where allowed) or NUL-terminated; `error` as described at the top of samebits.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_compile(
    path: *const c_char,
    operation_set: *const c_char,
    device: *const c_char,
    error: *mut *mut c_char,
) -> *mut SamebitsModel {
    let compiled = (|| -> Result<CompiledModel, String> {
        // SAFETY: the caller's contract on every string argument.
        let (path, set, device) = unsafe {
            (
                required(path, "path")?,
                text(operation_set, "operation_set")?,
                text(device, "device")?,
            )
        };
        let operation_set: OperationSet = set.unwrap_or("reproducible").parse()?;
        let options = CompileOptions {
            requires_reproducibility: operation_set.is_reproducible(),
            operation_set: Some(operation_set),
            device: device.unwrap_or("cpu").parse()?,
            ..Default::default()
        };
        samebits_runtime::compile(PathBuf::from(path), &options).map_err(|e| e.to_string())
    })();
    match compiled {
        Ok(compiled) => Box::into_raw(Box::new(SamebitsModel { compiled })),
        Err(message) => {
            // SAFETY: the caller's contract on `error`.
            unsafe { report(error, message) };
            std::ptr::null_mut()
        }
    }
}

/// Frees a model (NULL is ignored).
///
/// # Safety
/// `model` is NULL or came from `samebits_compile` and is not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_model_free(model: *mut SamebitsModel) {
    if !model.is_null() {
        // SAFETY: made by Box::into_raw in samebits_compile, freed once.
        drop(unsafe { Box::from_raw(model) });
    }
}

/// The tensor an input view describes, copied.
///
/// # Safety
/// The view's pointers are valid for their lengths (see `SamebitsTensorView`).
unsafe fn input_tensor(view: &SamebitsTensorView) -> Result<(String, Tensor), String> {
    // SAFETY: the caller's contract on the view.
    let (name, dtype) = unsafe {
        (
            required(view.name, "input name")?,
            required(view.dtype, "dtype")?,
        )
    };
    let dtype = DType::from_name(dtype)
        .ok_or_else(|| format!("input \"{name}\": unknown dtype {dtype:?}"))?;
    let (shape, data): (&[usize], &[u8]) = unsafe {
        // SAFETY: `shape` holds `rank` dims and `data` holds `size` bytes (the view's contract);
        // empty slices for NULL pointers with zero lengths.
        (
            match view.rank {
                0 => &[],
                n => std::slice::from_raw_parts(view.shape, n),
            },
            match view.size {
                0 => &[],
                n => std::slice::from_raw_parts(view.data.cast::<u8>(), n),
            },
        )
    };
    let tensor = Tensor::from_le_bytes(dtype, shape.to_vec(), data)
        .map_err(|e| format!("input \"{name}\": {e}"))?;
    Ok((name.to_string(), tensor))
}

/// Runs `model` on `n_inputs` tensors and returns its outputs (NULL on failure: an unknown or
/// missing input, a wrong dtype or shape, ...). With `receipt` (may be NULL), writes each input
/// as `<receipt stem>.inputs/<i>.npy` beside it and the receipt of the run, which `samebits
/// verify` and `samebits_verify` re-run.
///
/// # Safety
/// `model` came from `samebits_compile`; `inputs` points to `n_inputs` valid views; strings
/// and `error` as described at the top of samebits.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_run(
    model: *const SamebitsModel,
    inputs: *const SamebitsTensorView,
    n_inputs: usize,
    receipt: *const c_char,
    error: *mut *mut c_char,
) -> *mut SamebitsOutputs {
    let outputs = (|| -> Result<SamebitsOutputs, String> {
        // SAFETY: the caller's contract on `model`, `inputs` and `receipt`.
        let (model, views, receipt) = unsafe {
            (
                model.as_ref().ok_or("model is NULL")?,
                match n_inputs {
                    0 => &[][..],
                    n => std::slice::from_raw_parts(inputs, n),
                },
                text(receipt, "receipt")?,
            )
        };
        let mut values = BTreeMap::new();
        for view in views {
            // SAFETY: each view is valid (the caller's contract).
            let (name, tensor) = unsafe { input_tensor(view) }?;
            if values.insert(name.clone(), Value::Tensor(tensor)).is_some() {
                return Err(format!("input \"{name}\" is given twice"));
            }
        }
        let outputs = model.compiled.run(&values).map_err(|e| e.to_string())?;
        if let Some(path) = receipt {
            samebits_bindings::run_receipt(&model.compiled, &values, &outputs, path.as_ref())
                .map_err(|e| e.to_string())?;
        }
        let owned = outputs
            .iter()
            .map(|(name, value)| {
                let not_tensor =
                    || format!("output \"{name}\" is a {}, not a tensor", value.kind());
                let tensor = value.as_tensor().map_err(|_| not_tensor())?;
                Ok(OwnedOutput {
                    name: CString::new(name.as_str()).map_err(|e| e.to_string())?,
                    dtype: CString::new(tensor.dtype().name()).expect("dtype names have no NUL"),
                    shape: tensor.shape().to_vec(),
                    data: tensor
                        .bytes()
                        .map_err(|e| format!("output \"{name}\": {e}"))?
                        .to_vec(),
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(SamebitsOutputs { outputs: owned })
    })();
    match outputs {
        Ok(outputs) => Box::into_raw(Box::new(outputs)),
        Err(message) => {
            // SAFETY: the caller's contract on `error`.
            unsafe { report(error, message) };
            std::ptr::null_mut()
        }
    }
}

/// Output `i`, or NULL when `outputs` is NULL or `i` is out of range.
///
/// # Safety
/// `outputs` is NULL or came from `samebits_run` and was not freed.
unsafe fn output<'a>(outputs: *const SamebitsOutputs, i: usize) -> Option<&'a OwnedOutput> {
    // SAFETY: the caller's contract.
    unsafe { outputs.as_ref() }?.outputs.get(i)
}

/// The number of outputs.
///
/// # Safety
/// `outputs` is NULL (0) or came from `samebits_run` and was not freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_outputs_count(outputs: *const SamebitsOutputs) -> usize {
    // SAFETY: the caller's contract.
    unsafe { outputs.as_ref() }.map_or(0, |o| o.outputs.len())
}

/// Output `i`'s name (NULL when out of range); valid until the outputs are freed.
///
/// # Safety
/// As `samebits_outputs_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_outputs_name(
    outputs: *const SamebitsOutputs,
    i: usize,
) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe { output(outputs, i) }.map_or(std::ptr::null(), |o| o.name.as_ptr())
}

/// Output `i`'s dtype name ("f32", ...; NULL when out of range).
///
/// # Safety
/// As `samebits_outputs_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_outputs_dtype(
    outputs: *const SamebitsOutputs,
    i: usize,
) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe { output(outputs, i) }.map_or(std::ptr::null(), |o| o.dtype.as_ptr())
}

/// Output `i`'s dims; stores their count in `*rank` (NULL when out of range).
///
/// # Safety
/// As `samebits_outputs_count`; `rank` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_outputs_shape(
    outputs: *const SamebitsOutputs,
    i: usize,
    rank: *mut usize,
) -> *const usize {
    // SAFETY: the caller's contract.
    let Some(o) = (unsafe { output(outputs, i) }) else {
        return std::ptr::null();
    };
    // SAFETY: `rank` is writable (the caller's contract).
    unsafe { *rank = o.shape.len() };
    o.shape.as_ptr()
}

/// Output `i`'s row-major little-endian element bytes; stores their count in `*size`.
///
/// # Safety
/// As `samebits_outputs_count`; `size` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_outputs_data(
    outputs: *const SamebitsOutputs,
    i: usize,
    size: *mut usize,
) -> *const c_void {
    // SAFETY: the caller's contract.
    let Some(o) = (unsafe { output(outputs, i) }) else {
        return std::ptr::null();
    };
    // SAFETY: `size` is writable (the caller's contract).
    unsafe { *size = o.data.len() };
    o.data.as_ptr().cast()
}

/// Frees the outputs of a run (NULL is ignored).
///
/// # Safety
/// `outputs` is NULL or came from `samebits_run` and is not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_outputs_free(outputs: *mut SamebitsOutputs) {
    if !outputs.is_null() {
        // SAFETY: made by Box::into_raw in samebits_run, freed once.
        drop(unsafe { Box::from_raw(outputs) });
    }
}

/// Generates text from `prompt` with the language model at `model_path` (a GGUF file or a
/// Hugging Face checkpoint folder), as `samebits generate` does: `temperature` 0 is greedy,
/// `top_k` 0 and `top_p` 1 keep every token, `chat` wraps the prompt in the model's chat
/// template, `device` is "cpu" when NULL. With `receipt` (may be NULL) the generation receipt is
/// written there. Returns the generated text (free it with `samebits_string_free`), or NULL.
///
/// # Safety
/// Strings are NULL (where allowed) or NUL-terminated; `error` as described at the top of samebits.h.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn samebits_generate(
    model_path: *const c_char,
    prompt: *const c_char,
    max_tokens: usize,
    temperature: f32,
    top_k: usize,
    top_p: f32,
    seed: u64,
    chat: bool,
    device: *const c_char,
    receipt: *const c_char,
    error: *mut *mut c_char,
) -> *mut c_char {
    let text_out = (|| -> Result<String, String> {
        // SAFETY: the caller's contract on every string argument.
        let (model_path, prompt, device, receipt) = unsafe {
            (
                required(model_path, "model_path")?,
                required(prompt, "prompt")?,
                text(device, "device")?,
                text(receipt, "receipt")?,
            )
        };
        let options = GenerateOptions {
            chat,
            max_tokens,
            sampling: SamplingOptions {
                temperature,
                top_k,
                top_p,
                seed,
            },
        };
        options.sampling.check().map_err(|e| e.to_string())?;
        let device: Device = device.unwrap_or("cpu").parse()?;
        let llm = Llm::load_on(model_path.as_ref(), OperationSet::Reproducible, device)
            .map_err(|e| format!("cannot load model {model_path}: {e}"))?;
        let generated =
            samebits_bindings::generate(&llm, prompt, &options, receipt.map(AsRef::as_ref), |_| {})
                .map_err(|e| e.to_string())?;
        Ok(generated.generation.text)
    })();
    match text_out.and_then(|t| CString::new(t).map_err(|e| e.to_string())) {
        Ok(text) => text.into_raw(),
        Err(message) => {
            // SAFETY: the caller's contract on `error`.
            unsafe { report(error, message) };
            std::ptr::null_mut()
        }
    }
}

/// Re-runs the receipt at `receipt_path` (of a run, a generation or an embedding) on `device`
/// ("cpu" when NULL) and compares bit for bit. Returns 0 when everything matches, 1 when
/// something differs, 2 when the receipt, the model or an input is unusable, as `samebits
/// verify` exits; -1 when the receipt cannot be read or an argument is bad. `message` (may be
/// NULL) receives one line saying what matched, the first difference, or why (free it with
/// `samebits_string_free`).
///
/// # Safety
/// Strings are NULL (where allowed) or NUL-terminated; `message` as `error` at the top of samebits.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_verify(
    receipt_path: *const c_char,
    device: *const c_char,
    message: *mut *mut c_char,
) -> c_int {
    let verified = (|| -> Result<samebits_bindings::Verification, String> {
        // SAFETY: the caller's contract on both strings.
        let (path, device) = unsafe {
            (
                required(receipt_path, "receipt_path")?,
                text(device, "device")?,
            )
        };
        let device: Device = device.unwrap_or("cpu").parse()?;
        samebits_bindings::verify(path.as_ref(), device)
            .map_err(|e| format!("cannot read {path}: {e}"))
    })();
    let (code, line) = match verified {
        Ok(v) => {
            let code = match v.status {
                samebits_bindings::Status::Match => 0,
                samebits_bindings::Status::Differ => 1,
                samebits_bindings::Status::Unusable => 2,
            };
            (code, v.message)
        }
        Err(e) => (-1, e),
    };
    // SAFETY: the caller's contract on `message`.
    unsafe { report(message, line) };
    code
}

/// Frees a string this library returned (NULL is ignored).
///
/// # Safety
/// `s` is NULL or came from this library and is not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn samebits_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: made by CString::into_raw in this library, freed once.
        drop(unsafe { CString::from_raw(s) });
    }
}
