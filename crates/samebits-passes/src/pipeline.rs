//! [`Pipeline`]: runs the passes in order and, when given an artifacts directory, writes
//! `NN-<pass>.json` and `NN-<pass>.dot` after each one so every stage can be inspected.

use crate::{
    PassError, Result, cast_hoisting, dead_nodes, differentiation, folding, fusion, inference,
    topological,
};
use samebits_ir::{Model, dump};
use samebits_ops::OperationSet;
use std::path::PathBuf;

/// One pass's outcome: the node count after it and what it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct PassReport {
    pub pass: &'static str,
    pub nodes_after: usize,
    pub note: String,
}

/// The pass pipeline for one operation set, optionally dumping the IR after each pass.
pub struct Pipeline {
    pub operation_set: OperationSet,
    pub dump_dir: Option<PathBuf>,
}

impl Pipeline {
    pub fn run(&self, model: &mut Model) -> Result<Vec<PassReport>> {
        let mut reports = Vec::new();
        self.dump(model, 0, "imported")?;
        topological::run(&mut model.graph)?;
        self.record(model, &mut reports, "topological-order", String::new())?;
        let gradients = differentiation::run(&mut model.graph)?;
        self.record(
            model,
            &mut reports,
            "differentiation",
            format!("{gradients} Gradient nodes expanded"),
        )?;
        inference::run(model, self.operation_set)?;
        let known = model.graph.value_types.len();
        self.record(
            model,
            &mut reports,
            "shape-inference",
            format!("{known} value types known"),
        )?;
        let folded = folding::run(model, self.operation_set)?;
        self.record(
            model,
            &mut reports,
            "constant-folding",
            format!("{folded} nodes folded"),
        )?;
        let hoisted = cast_hoisting::run(&mut model.graph);
        self.record(
            model,
            &mut reports,
            "cast-hoisting",
            format!("{hoisted} casts hoisted"),
        )?;
        let removed = dead_nodes::run(&mut model.graph);
        self.record(
            model,
            &mut reports,
            "dead-node-removal",
            format!("{removed} nodes removed"),
        )?;
        let fused = fusion::run(model);
        self.record(
            model,
            &mut reports,
            "elementwise-fusion",
            format!(
                "{} nodes fused into {} chains",
                fused.nodes_fused, fused.chains
            ),
        )?;
        Ok(reports)
    }

    fn record(
        &self,
        model: &Model,
        reports: &mut Vec<PassReport>,
        pass: &'static str,
        note: String,
    ) -> Result<()> {
        reports.push(PassReport {
            pass,
            nodes_after: model.graph.nodes.len(),
            note,
        });
        self.dump(model, reports.len(), pass)
    }

    fn dump(&self, model: &Model, index: usize, pass: &str) -> Result<()> {
        let Some(dir) = &self.dump_dir else {
            return Ok(());
        };
        for (ext, text) in [
            ("json", dump::to_json(model)),
            ("dot", dump::to_dot(&model.graph)),
        ] {
            let path = dir.join(format!("{index:02}-{pass}.{ext}"));
            std::fs::write(&path, text).map_err(|source| PassError::Io {
                path: path.display().to_string(),
                source,
            })?;
        }
        Ok(())
    }
}
