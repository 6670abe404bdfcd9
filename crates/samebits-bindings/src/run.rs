//! [`run_receipt`]: the receipt of a run on inputs that came from memory, not files.

use samebits_ir::Value;
use samebits_runtime::receipt::Receipt;
use samebits_runtime::{CompiledModel, Result, RuntimeError, tensor_file};
use std::collections::BTreeMap;
use std::path::Path;

/// Writes each input as `<receipt stem>.inputs/<i>.npy` beside `path` (in name order: a run
/// receipt names the file of every input, which verification reads back), then the receipt of
/// the run, as `samebits run --receipt` writes it.
pub fn run_receipt(
    compiled: &CompiledModel,
    inputs: &BTreeMap<String, Value>,
    outputs: &[(String, Value)],
    path: &Path,
) -> Result<()> {
    let stem = path
        .file_stem()
        .unwrap_or(path.as_os_str())
        .to_string_lossy();
    let folder = path
        .parent()
        .unwrap_or(Path::new(""))
        .join(format!("{stem}.inputs"));
    std::fs::create_dir_all(&folder).map_err(|e| RuntimeError::io(&folder, e))?;
    let mut files = BTreeMap::new();
    for (i, (name, value)) in inputs.iter().enumerate() {
        let file = folder.join(format!("{i}.npy"));
        let tensor = value
            .as_tensor()
            .map_err(|e| RuntimeError::Usage(format!("input \"{name}\": {e}")))?;
        tensor_file::write_npy(&file, tensor)?;
        files.insert(name.clone(), file);
    }
    Receipt::new(compiled, inputs, &files, outputs, path)?.write(path)
}
