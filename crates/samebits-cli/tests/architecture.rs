//! The crate graph of docs/architecture.md, checked against `cargo metadata`: each samebits
//! crate depends (normal and build dependencies) only on the samebits crates its row of
//! [`ALLOWED`] lists; samebits-cuda only optionally (the `cuda` feature), and cudarc outside
//! samebits-cuda only optionally; samebits-testdata only as a dev-dependency. A workspace crate
//! without a row fails, so that a new crate is placed in the graph when it is added.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Each samebits crate and the samebits crates it may depend on (`samebits-` left out). Keep in
/// step with the mermaid graph of docs/architecture.md.
const ALLOWED: &[(&str, &[&str])] = &[
    ("ir", &[]),
    ("math", &[]),
    ("ggml", &[]),
    ("testdata", &["ir"]),
    ("bench-report", &[]),
    ("kernels", &["ggml"]),
    ("onnx", &["ir"]),
    ("gguf", &["ir", "ggml"]),
    ("tokenizer", &["gguf"]),
    ("ops", &["ir", "math", "kernels", "ggml"]),
    ("passes", &["ir", "ops"]),
    ("cuda", &["ir", "math", "kernels", "ggml", "ops"]),
    (
        "runtime",
        &["ir", "ops", "kernels", "passes", "onnx", "cuda"],
    ),
    (
        "llm",
        &[
            "ir",
            "ops",
            "kernels",
            "math",
            "ggml",
            "gguf",
            "tokenizer",
            "passes",
            "runtime",
        ],
    ),
    (
        "pipeline",
        &["ir", "ops", "ggml", "gguf", "tokenizer", "llm", "runtime"],
    ),
    (
        "tui",
        &[
            "ir",
            "ops",
            "gguf",
            "tokenizer",
            "llm",
            "pipeline",
            "runtime",
        ],
    ),
    ("serve", &["tokenizer", "llm", "pipeline", "runtime"]),
    ("bindings", &["ir", "llm", "runtime"]),
    ("python", &["ir", "ops", "llm", "runtime", "bindings"]),
    ("capi", &["ir", "llm", "runtime", "bindings"]),
    (
        "cli",
        &[
            "ir",
            "ops",
            "kernels",
            "onnx",
            "ggml",
            "gguf",
            "tokenizer",
            "passes",
            "runtime",
            "llm",
            "tui",
            "pipeline",
            "serve",
        ],
    ),
];

/// One dependency of one workspace crate, as `cargo metadata` lists it.
struct Dependency {
    name: String,
    /// `None` (normal), `Some("dev")` or `Some("build")`.
    kind: Option<String>,
    optional: bool,
}

/// The workspace's crates and their dependencies.
fn workspace() -> BTreeMap<String, Vec<Dependency>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let field = |v: &serde_json::Value, key: &str| v[key].as_str().map(str::to_string);
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|package| {
            let dependencies = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .map(|d| Dependency {
                    name: field(d, "name").expect("dependency name"),
                    kind: field(d, "kind"),
                    optional: d["optional"].as_bool().unwrap_or(false),
                })
                .collect();
            (field(package, "name").expect("package name"), dependencies)
        })
        .collect()
}

/// Whether the graph lets `from` depend on `to`.
fn allowed(from: &str, to: &str) -> bool {
    let row = ALLOWED.iter().find(|(name, _)| *name == from);
    row.is_some_and(|(_, allowed)| allowed.contains(&to))
}

#[test]
fn crates_depend_only_as_docs_architecture_allows() {
    let crates = workspace();
    let mut violations = Vec::new();
    for (name, dependencies) in &crates {
        let Some(from) = name.strip_prefix("samebits-") else {
            continue;
        };
        if !ALLOWED.iter().any(|(row, _)| *row == from) {
            violations.push(format!(
                "{name} has no row in the crate graph (docs/architecture.md, ALLOWED in \
                 crates/samebits-cli/tests/architecture.rs)"
            ));
        }
        for d in dependencies {
            let dev = d.kind.as_deref() == Some("dev");
            if d.name == "cudarc" && !dev && !d.optional && from != "cuda" {
                violations.push(format!(
                    "{name} -> cudarc is not optional: CUDA is the cargo feature `cuda`"
                ));
            }
            let Some(to) = d.name.strip_prefix("samebits-") else {
                continue;
            };
            if to == "testdata" {
                if !dev {
                    violations.push(format!(
                        "{name} -> {}: samebits-testdata is a dev-dependency only",
                        d.name
                    ));
                }
                continue;
            }
            if dev {
                continue;
            }
            if !allowed(from, to) {
                violations.push(format!(
                    "{name} -> {} is not an allowed dependency (docs/architecture.md)",
                    d.name
                ));
            }
            if to == "cuda" && !d.optional {
                violations.push(format!(
                    "{name} -> samebits-cuda is not optional: CUDA is the cargo feature `cuda`"
                ));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

/// The table itself: only known crates in the rows, and no crate allowed to depend on itself.
#[test]
fn the_allowed_table_names_only_its_own_crates() {
    for (from, to) in ALLOWED {
        assert!(!to.contains(from), "samebits-{from} allows itself");
        for t in *to {
            assert!(
                ALLOWED.iter().any(|(row, _)| row == t),
                "samebits-{from} allows samebits-{t}, which has no row"
            );
        }
    }
}
