//! The CPU simulation: all N stages in this process, each on its own thread with its own stage,
//! linked by [`ThreadLink`]s (which carry the encoded wire bytes) and running the same tick loop
//! as the NCCL ranks. `--device cpu --n-partitions N` runs it; the tests compare it, bit for bit,
//! with one stage.

use crate::link::ThreadLink;
use crate::stage::prepare;
use crate::worker::{Head, serve};
use crate::{Loaded, Pipeline, PipelineError, PipelineOptions, Result, Workers};
use samebits_runtime::Device;

/// Starts the N stages of `spec` on the CPU (rank 0 on the calling thread).
pub fn start(spec: &crate::ModelSpec, options: &PipelineOptions) -> Result<(Pipeline, Loaded)> {
    let n = options.n_partitions;
    let build: Vec<(usize, Device)> = (0..n).map(|r| (r, Device::Cpu)).collect();
    let prepared = prepare(spec, n, options.operation_set, &build)?;
    let loaded = loaded(prepared.onnx, prepared.llm)?;
    let mut links = ThreadLink::ring(n, prepared.fingerprint).into_iter();
    let mut stages = prepared.stages.into_iter();
    let (_, stage0) = stages.next().expect("n >= 1 stages");
    let head = Head::new(stage0, Box::new(links.next().expect("n links")), n);
    let threads = stages
        .zip(links)
        .map(|((rank, mut stage), mut link)| {
            std::thread::Builder::new()
                .name(format!("pipeline-stage-{rank}"))
                .spawn(move || serve(stage.as_mut(), &mut link, rank, n))
                .map_err(|e| PipelineError::Link(format!("cannot start a stage thread: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let pipeline = Pipeline {
        head,
        workers: Workers::Threads(threads),
        n_partitions: n,
        description: format!("cpu ({n} simulated pipeline stages)"),
        summary: prepared.summary,
    };
    Ok((pipeline, loaded))
}

/// Rank 0's model, whichever kind was prepared.
pub(crate) fn loaded(
    onnx: Option<samebits_runtime::CompiledModel>,
    llm: Option<samebits_llm::Llm>,
) -> Result<Loaded> {
    match (onnx, llm) {
        (Some(m), _) => Ok(Loaded::Onnx(Box::new(m))),
        (_, Some(l)) => Ok(Loaded::Llm(Box::new(l))),
        _ => Err(PipelineError::Usage("no model was prepared".into())),
    }
}
