//! The op registry: `(domain, op_type)` → constructor. Each family file under `families/` has a
//! `register` function adding one line per op; [`global`] holds them all.

use crate::{BuildContext, Op, OpError, Result};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Builds an op instance from a node.
pub type Constructor = fn(&BuildContext) -> Result<Box<dyn Op>>;

/// Constructors by domain and op type.
#[derive(Default)]
pub struct Registry {
    ops: BTreeMap<(String, String), Constructor>,
    /// CUDA sources of the ops' own kernels ([`crate::SourceKernel`]) by file name.
    kernel_sources: BTreeMap<&'static str, &'static str>,
}

/// `""` and `"ai.onnx"` name the same (default) domain.
pub fn canonical_domain(domain: &str) -> &str {
    if domain == "ai.onnx" { "" } else { domain }
}

/// The opset version of `domain` in `opsets`, with ONNX's defaults when the model does not
/// import it (the newest default-domain opset this crate targets, 1 for other domains).
pub fn opset_of(opsets: &samebits_ir::OpsetImports, domain: &str) -> i64 {
    opsets.get(canonical_domain(domain)).copied().unwrap_or(
        if canonical_domain(domain).is_empty() {
            21
        } else {
            1
        },
    )
}

impl Registry {
    pub fn register(&mut self, domain: &str, op_type: &str, ctor: Constructor) {
        let key = (canonical_domain(domain).to_string(), op_type.to_string());
        assert!(
            self.ops.insert(key, ctor).is_none(),
            "op {domain}::{op_type} registered twice"
        );
    }

    /// Adds the CUDA source `source` (a `.cu` file beside the family, named `file`) of kernels
    /// an op launches as [`crate::ShapedKernel::Source`]; samebits-cuda compiles every
    /// registered source into its program, after the shared prelude and device ABI.
    pub fn register_kernel_source(&mut self, file: &'static str, source: &'static str) {
        assert!(
            self.kernel_sources.insert(file, source).is_none(),
            "kernel source {file} registered twice"
        );
    }

    /// Every registered kernel source as `(file, source)`, sorted by file name.
    pub fn kernel_sources(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        self.kernel_sources.iter().map(|(f, s)| (*f, *s))
    }

    /// Builds the op for `ctx.node`, or an `Unsupported` error naming the op.
    pub fn build(&self, ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let node = ctx.node;
        let key = (
            canonical_domain(&node.domain).to_string(),
            node.op_type.clone(),
        );
        match self.ops.get(&key) {
            Some(ctor) => ctor(ctx),
            None if key.0.is_empty() => Err(OpError::Unsupported(format!(
                "op {} is not implemented",
                node.op_type
            ))),
            None => Err(OpError::Unsupported(format!(
                "op {}::{} is not implemented",
                node.domain, node.op_type
            ))),
        }
    }

    pub fn supports(&self, domain: &str, op_type: &str) -> bool {
        self.ops
            .contains_key(&(canonical_domain(domain).to_string(), op_type.to_string()))
    }

    /// Every registered `(domain, op_type)`, sorted.
    pub fn op_types(&self) -> impl Iterator<Item = (&str, &str)> {
        self.ops.keys().map(|(d, o)| (d.as_str(), o.as_str()))
    }
}

/// The registry with every op family of this crate.
pub fn global() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut r = Registry::default();
        crate::families::register_all(&mut r);
        r
    })
}
