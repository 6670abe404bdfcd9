//! Where a model's files may be: the rule every loader applies to a path that an untrusted model
//! names inside its own folder (ONNX external data, a checkpoint's weight shards, a
//! sentence-transformers module), written once (docs/security.md, "Paths").
//!
//! A file a model names must resolve, after every symbolic link, to a regular file inside the
//! model's folder. Links that leave the folder are refused unless the user allows them for the
//! whole process, with `samebits --allow-outside-links` or `SAMEBITS_ALLOW_OUTSIDE_LINKS=1`
//! (for a trusted model whose weights live elsewhere, or a compiler artifacts folder made without
//! `colocate_tensors`). Devices and FIFOs are refused always: reading one would not end.
//!
//! Also here: [`cache_dir`], the one folder samebits keeps downloaded and derived files in.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

static ALLOWED_BY_FLAG: AtomicBool = AtomicBool::new(false);

/// The cache folder: `$SAMEBITS_CACHE` when set and not empty, else `~/.cache/samebits` (as
/// scripts/setup.sh); `None` when neither variable is set.
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os("SAMEBITS_CACHE").filter(|dir| !dir.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/samebits")),
    }
}

/// Allows (for the rest of the process) files that a symbolic link places outside the model
/// folder; the CLI's `--allow-outside-links`.
pub fn allow_outside_links() {
    ALLOWED_BY_FLAG.store(true, Ordering::Relaxed);
}

/// Whether links leaving the model folder are allowed: by [`allow_outside_links`] or by
/// `SAMEBITS_ALLOW_OUTSIDE_LINKS=1`.
pub fn outside_links_allowed() -> bool {
    ALLOWED_BY_FLAG.load(Ordering::Relaxed)
        || std::env::var("SAMEBITS_ALLOW_OUTSIDE_LINKS").is_ok_and(|v| v.trim() == "1")
}

/// Checks that `path` (a file the model in `folder` names) resolves to a regular file inside
/// `folder`, following symbolic links; returns its canonical path, or why it may not be read.
/// A path that does not exist is returned as written, for the caller's own "missing" message.
pub fn resolve_inside(folder: &Path, path: &Path) -> Result<PathBuf, String> {
    let Ok(resolved) = path.canonicalize() else {
        return Ok(path.to_path_buf());
    };
    let folder = folder
        .canonicalize()
        .unwrap_or_else(|_| folder.to_path_buf());
    if !resolved.starts_with(&folder) && !outside_links_allowed() {
        return Err(format!(
            "resolves to {}, outside the model folder {} (through a symbolic link); run with \
             --allow-outside-links or SAMEBITS_ALLOW_OUTSIDE_LINKS=1 if you trust the model",
            resolved.display(),
            folder.display()
        ));
    }
    match std::fs::metadata(&resolved) {
        Ok(m) if !m.is_file() && !m.is_dir() => Err(format!(
            "resolves to {}, which is not a regular file (a device or FIFO)",
            resolved.display()
        )),
        _ => Ok(resolved),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn links_out_of_the_folder_and_special_files_are_refused() {
        let root = std::env::temp_dir().join(format!("samebits-paths-{}", std::process::id()));
        let folder = root.join("model");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(root.join("secret"), b"x").unwrap();
        std::fs::write(folder.join("weights.bin"), b"x").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), folder.join("out.bin")).unwrap();
        std::os::unix::fs::symlink(folder.join("weights.bin"), folder.join("in.bin")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", folder.join("zero.bin")).unwrap();

        let inside = resolve_inside(&folder, &folder.join("in.bin")).unwrap();
        assert_eq!(inside, folder.join("weights.bin").canonicalize().unwrap());
        let out = resolve_inside(&folder, &folder.join("out.bin")).unwrap_err();
        assert!(out.contains("outside the model folder"), "{out}");
        assert!(out.contains("--allow-outside-links"), "{out}");
        // /dev/zero is outside the folder too; with outside links allowed it is still refused
        // as a device (the flag is process-wide, so it is set last in this test binary's only
        // test that reads it).
        allow_outside_links();
        assert!(resolve_inside(&folder, &folder.join("out.bin")).is_ok());
        let zero = resolve_inside(&folder, &folder.join("zero.bin")).unwrap_err();
        assert!(zero.contains("not a regular file"), "{zero}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
