//! What the fuzz targets share: a scratch folder per process (under `SAMEBITS_FUZZ_SCRATCH`,
//! else `/dev/shm` when there is one, so the files a target writes for path-taking APIs stay in
//! memory), writing a target's files into it, and splitting one fuzz input into the several
//! files a model folder holds.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The separator between the parts of a multi-file input (seed.py writes the same bytes).
pub const PART_SEPARATOR: &[u8] = b"\n--samebits-fuzz-part--\n";

/// This process's scratch folder, created on first use and left for the OS to clean (libFuzzer
/// exits without running destructors).
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let base = match std::env::var_os("SAMEBITS_FUZZ_SCRATCH") {
            Some(dir) => PathBuf::from(dir),
            None if shm.is_dir() => shm.to_path_buf(),
            None => std::env::temp_dir(),
        };
        let dir = base.join(format!("samebits-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the scratch folder");
        dir
    })
}

/// A sub-folder of the scratch folder, created if missing.
pub fn scratch_subdir(name: &str) -> PathBuf {
    let dir = scratch_dir().join(name);
    std::fs::create_dir_all(&dir).expect("create a scratch sub-folder");
    dir
}

/// Writes `bytes` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write a scratch file");
    path
}

/// The first `N` parts of `data` split at [`PART_SEPARATOR`]; missing parts are empty and the
/// last part keeps any further separators.
pub fn split_parts<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut parts = [&data[..0]; N];
    let mut rest = data;
    for part in parts.iter_mut().take(N - 1) {
        match find(rest, PART_SEPARATOR) {
            Some(at) => {
                *part = &rest[..at];
                rest = &rest[at + PART_SEPARATOR.len()..];
            }
            None => {
                *part = rest;
                rest = &rest[rest.len()..];
            }
        }
    }
    parts[N - 1] = rest;
    parts
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
