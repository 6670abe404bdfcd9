//! External data: tensors view a shared memory map of the file, and unsafe or broken references
//! (absolute path, `..` escape, a link out of the folder, a FIFO, missing file, range past the
//! end) are refused with the tensor and location named.

mod common;

use common::*;
use prost::Message;
use samebits_onnx::{ExternalDataProblem, OnnxError, load_model, load_model_from_bytes};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

fn write_floats(path: &Path, values: &[f32]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

/// Writes a model whose initializer "w" (f32[2]) has the given external-data entries.
fn model_with_external(dir: &Path, entries: &[(&str, &str)]) -> std::path::PathBuf {
    let graph = relu_graph(vec![external_f32_tensor("w", &[2], entries)]);
    let path = dir.join("model.onnx");
    std::fs::write(&path, model(graph).encode_to_vec()).unwrap();
    path
}

fn load_error(dir: &Path, entries: &[(&str, &str)]) -> OnnxError {
    load_model(&model_with_external(dir, entries)).unwrap_err()
}

#[test]
fn external_tensors_are_views_into_one_shared_map() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    write_floats(&dir.path().join("sub/w.bin"), &[1.0, 2.0, 3.0, 4.0]);
    let graph = relu_graph(vec![
        external_f32_tensor("a", &[2], &[("location", "sub/w.bin"), ("length", "8")]),
        external_f32_tensor(
            "b",
            &[2],
            &[
                ("location", "sub/../sub/w.bin"),
                ("offset", "8"),
                ("checksum", "ignored"),
            ],
        ),
    ]);
    let path = dir.path().join("model.onnx");
    std::fs::write(&path, model(graph).encode_to_vec()).unwrap();
    let loaded = load_model(&path).unwrap();
    let (a, b) = (
        &loaded.graph.initializers["a"],
        &loaded.graph.initializers["b"],
    );
    assert_eq!(a.as_slice::<f32>().unwrap(), [1.0, 2.0]);
    assert_eq!(b.as_slice::<f32>().unwrap(), [3.0, 4.0]);
    // Both tensors view the same mapping: b's bytes follow a's directly.
    let a_end = a.bytes().unwrap().as_ptr_range().end;
    assert_eq!(a_end, b.bytes().unwrap().as_ptr());
    // And it is a map of the file, not a copy: an in-place write shows through.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("sub/w.bin"))
        .unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    file.write_all(&9f32.to_le_bytes()).unwrap();
    file.sync_all().unwrap();
    assert_eq!(a.as_slice::<f32>().unwrap(), [9.0, 2.0]);
}

#[test]
fn absolute_locations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::NamedTempFile::new().unwrap();
    write_floats(outside.path(), &[1.0, 2.0]);
    let location = outside.path().to_str().unwrap();
    let err = load_error(dir.path(), &[("location", location)]);
    assert!(matches!(
        err,
        OnnxError::ExternalData {
            problem: ExternalDataProblem::Absolute,
            ..
        }
    ));
    assert!(err.to_string().ends_with(&format!(
        "model.onnx: graph \"main\": initializer \"w\": external data location \"{location}\" \
         is an absolute path"
    )));
}

#[test]
fn dot_dot_escapes_are_refused_even_when_the_file_exists() {
    let root = tempfile::tempdir().unwrap();
    let model_dir = root.path().join("model");
    std::fs::create_dir_all(model_dir.join("sub")).unwrap();
    write_floats(&root.path().join("x.bin"), &[1.0, 2.0]);
    for location in ["../x.bin", "sub/../../x.bin", "./sub/../../model/../x.bin"] {
        let err = load_error(&model_dir, &[("location", location)]);
        assert!(
            err.to_string().ends_with(&format!(
                "model.onnx: graph \"main\": initializer \"w\": external data location \
                 \"{location}\" leaves the model folder"
            )),
            "{err}"
        );
    }
    // A symlinked folder followed by `..` lands outside although the path looks inside.
    #[cfg(unix)]
    {
        std::fs::create_dir(root.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(root.path().join("elsewhere"), model_dir.join("link")).unwrap();
        let err = load_error(&model_dir, &[("location", "link/../x.bin")]);
        assert!(
            matches!(
                &err,
                OnnxError::ExternalData {
                    problem: ExternalDataProblem::Refused(why),
                    ..
                } if why.contains("outside the model folder")
            ),
            "{err}"
        );
    }
}

/// A location that is a symbolic link to a file outside the model folder, or to a FIFO (whose
/// open would block forever), is refused by default (issue #21); `samebits_ir::paths` tests
/// the flag that allows outside links.
#[cfg(unix)]
#[test]
fn links_out_of_the_folder_and_fifos_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let model_dir = root.path().join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    write_floats(&root.path().join("secret.bin"), &[1.0, 2.0]);
    std::os::unix::fs::symlink(root.path().join("secret.bin"), model_dir.join("w.bin")).unwrap();
    let err = load_error(&model_dir, &[("location", "w.bin")]);
    let message = err.to_string();
    assert!(
        message.contains("external data location \"w.bin\" resolves to")
            && message.contains("outside the model folder")
            && message.contains("--allow-outside-links"),
        "{message}"
    );
    // A link that stays inside the folder is read.
    write_floats(&model_dir.join("real.bin"), &[1.0, 2.0]);
    std::os::unix::fs::symlink(model_dir.join("real.bin"), model_dir.join("inside.bin")).unwrap();
    load_model(&model_with_external(
        &model_dir,
        &[("location", "inside.bin")],
    ))
    .unwrap();
    let fifo = model_dir.join("fifo.bin");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let message = load_error(&model_dir, &[("location", "fifo.bin")]).to_string();
    assert!(message.contains("not a regular file"), "{message}");
}

#[test]
fn missing_files_and_ranges_past_the_end_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = load_error(dir.path(), &[("location", "nope.bin")]);
    let msg = err.to_string();
    assert!(
        msg.contains("initializer \"w\": external data location \"nope.bin\" names a file that cannot be opened"),
        "{msg}"
    );
    write_floats(&dir.path().join("w.bin"), &[1.0, 2.0, 3.0]);
    for (offset, length) in [
        ("8", "8"),
        ("13", "8"),
        ("0", "16"),
        ("18446744073709551615", "8"),
    ] {
        let err = load_error(
            dir.path(),
            &[
                ("location", "w.bin"),
                ("offset", offset),
                ("length", length),
            ],
        );
        assert!(
            matches!(
                err,
                OnnxError::ExternalData {
                    problem: ExternalDataProblem::PastEnd { file_len: 12, .. },
                    ..
                }
            ),
            "{offset}+{length}: {err}"
        );
        assert!(err.to_string().contains("past the end of"), "{err}");
    }
    let err = load_error(dir.path(), &[("location", "w.bin"), ("length", "12")]);
    assert!(
        err.to_string()
            .contains("holds 12 bytes, a f32 tensor of shape [2] needs 8"),
        "{err}"
    );
    let err = load_error(dir.path(), &[("location", "w.bin"), ("offset", "-4")]);
    assert!(
        err.to_string()
            .contains("offset \"-4\" is not a byte count"),
        "{err}"
    );
    let err = load_error(dir.path(), &[("offset", "0")]);
    assert!(err.to_string().contains("no \"location\""), "{err}");
}

#[test]
fn models_given_as_bytes_without_a_folder_cannot_use_external_data() {
    let graph = relu_graph(vec![external_f32_tensor(
        "w",
        &[2],
        &[("location", "w.bin")],
    )]);
    let err = load_model_from_bytes(&model(graph).encode_to_vec(), None).unwrap_err();
    assert!(matches!(
        err,
        OnnxError::ExternalData {
            problem: ExternalDataProblem::NoModelFolder,
            ..
        }
    ));
}
