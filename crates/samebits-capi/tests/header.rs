//! `include/samebits.h` is what cbindgen generates from the crate today: a change to the C API
//! that is not in the committed header fails here (`SAMEBITS_BLESS=1` rewrites the header).

use std::path::Path;

#[test]
fn the_committed_header_is_cbindgens_output() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("config");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let header = crate_dir.join("include/samebits.h");
    if std::env::var_os("SAMEBITS_BLESS").is_some() {
        std::fs::write(&header, &generated).expect("header written");
    }
    let committed = std::fs::read(&header).expect("include/samebits.h");
    assert!(
        committed == generated,
        "include/samebits.h is not cbindgen's output for src/lib.rs; regenerate it with \
         SAMEBITS_BLESS=1 cargo test --release -p samebits-capi --test header"
    );
}
