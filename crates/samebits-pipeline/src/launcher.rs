//! The launcher: rank 0 of an NCCL pipeline ([`start`]) and the worker ranks ([`run_worker`]).
//!
//! On one host, rank 0 spawns ranks 1..N as processes of the same binary
//! (`samebits pipeline-worker MODEL --rank r --n-partitions N --rendezvous file:... --device
//! cuda:(g + r) --operation-set S`), each of which cuts the model the same way, builds only its
//! own stage on its own GPU and joins the NCCL communicator through the rendezvous. Across hosts
//! the same command is started by hand on each host with `--rendezvous tcp:HOST0:PORT`, and rank
//! 0 is given that address instead of spawning (`PipelineOptions::rendezvous`). A watchdog ends
//! rank 0 when a spawned worker fails (a dead rank would leave NCCL waiting forever), and a
//! spawned worker ends itself when its parent goes away.

use crate::nccl::{NcclLink, check_gpus, check_nccl, new_id};
use crate::rendezvous::{Published, Rendezvous, TIMEOUT};
use crate::simulation::loaded;
use crate::stage::{ModelSpec, prepare};
use crate::worker::{Head, serve};
use crate::{Loaded, Pipeline, PipelineError, PipelineOptions, Result, Workers};
use samebits_ops::OperationSet;
use samebits_runtime::Device;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Names the parent's process id in a spawned worker's environment.
const PARENT_ENV: &str = "SAMEBITS_PIPELINE_PARENT";

/// Starts rank 0 on GPU `first` and, unless workers come through `options.rendezvous`, the
/// worker processes of ranks 1..N on GPUs `first + 1..`.
pub fn start(
    spec: &ModelSpec,
    options: &PipelineOptions,
    first: usize,
) -> Result<(Pipeline, Loaded)> {
    let n = options.n_partitions;
    match &options.rendezvous {
        None => check_gpus(n, first)?,
        Some(_) => check_gpus(1, first)?,
    }
    check_nccl()?;
    let device = Device::Cuda(first);
    let prepared = prepare(spec, n, options.operation_set, &[(0, device)])?;
    let loaded = loaded(prepared.onnx, prepared.llm)?;
    let (_, stage0) = prepared
        .stages
        .into_iter()
        .next()
        .expect("stage 0 was built");
    let description = format!(
        "{n} pipeline stages over NCCL from {}",
        stage0.description()
    );
    let id = new_id()?;
    let (rendezvous, folder) = match &options.rendezvous {
        Some(r) => (r.clone(), None),
        None => {
            let folder = tempfile::Builder::new()
                .prefix("samebits-pipeline-")
                .tempdir()
                .map_err(|e| PipelineError::io(&std::env::temp_dir(), e))?;
            (
                Rendezvous::File(folder.path().join("nccl-id")),
                Some(folder),
            )
        }
    };
    let published = rendezvous.publish(&id, n - 1)?;
    let mut children = Children::new(published, folder);
    if options.rendezvous.is_none() {
        let exe = std::env::current_exe().map_err(|e| {
            PipelineError::Usage(format!(
                "cannot find this program to start pipeline workers: {e}"
            ))
        })?;
        for rank in 1..n {
            let child = Command::new(&exe)
                .args(worker_args(
                    spec,
                    rank,
                    n,
                    options.operation_set,
                    first + rank,
                    &rendezvous,
                ))
                .env(PARENT_ENV, std::process::id().to_string())
                .spawn()
                .map_err(|e| {
                    PipelineError::Usage(format!(
                        "cannot start pipeline worker {rank} ({}): {e}",
                        exe.display()
                    ))
                })?;
            children.add(rank, child);
        }
        children.watch();
    }
    let link = NcclLink::connect(first, 0, n, &id, prepared.fingerprint)?;
    let pipeline = Pipeline {
        head: Head::new(stage0, Box::new(link), n),
        workers: Workers::Processes(children),
        n_partitions: n,
        description,
        summary: prepared.summary,
    };
    Ok((pipeline, loaded))
}

/// The command line of worker `rank` (parsed by the CLI's `pipeline-worker`).
pub fn worker_args(
    spec: &ModelSpec,
    rank: usize,
    n: usize,
    operation_set: OperationSet,
    gpu: usize,
    rendezvous: &Rendezvous,
) -> Vec<String> {
    vec![
        "pipeline-worker".into(),
        spec.path().display().to_string(),
        "--kind".into(),
        spec.kind().into(),
        "--rank".into(),
        rank.to_string(),
        "--n-partitions".into(),
        n.to_string(),
        "--rendezvous".into(),
        rendezvous.to_string(),
        "--device".into(),
        format!("cuda:{gpu}"),
        "--operation-set".into(),
        operation_set.to_string(),
    ]
}

/// What a worker process is.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    pub spec: ModelSpec,
    pub rank: usize,
    pub n_partitions: usize,
    pub operation_set: OperationSet,
    /// Its GPU.
    pub device: Device,
    pub rendezvous: Rendezvous,
}

/// A worker rank: builds its stage, joins the communicator and serves until rank 0 stops.
pub fn run_worker(o: &WorkerOptions) -> Result<()> {
    let Device::Cuda(gpu) = o.device else {
        return Err(PipelineError::Usage(
            "a pipeline worker runs on a GPU: pass --device cuda:N".into(),
        ));
    };
    if o.rank == 0 || o.rank >= o.n_partitions {
        return Err(PipelineError::Usage(format!(
            "worker rank {} is not in 1..{} (rank 0 is the driving command)",
            o.rank, o.n_partitions
        )));
    }
    check_gpus(1, gpu)?;
    check_nccl()?;
    watch_parent();
    let prepared = prepare(
        &o.spec,
        o.n_partitions,
        o.operation_set,
        &[(o.rank, o.device)],
    )?;
    let (_, mut stage) = prepared
        .stages
        .into_iter()
        .next()
        .expect("the worker's stage");
    let id = o.rendezvous.fetch(TIMEOUT)?;
    let mut link = NcclLink::connect(gpu, o.rank, o.n_partitions, &id, prepared.fingerprint)?;
    serve(stage.as_mut(), &mut link, o.rank, o.n_partitions)
}

/// A spawned worker exits when the process that spawned it is gone.
fn watch_parent() {
    let Some(parent) = std::env::var(PARENT_ENV)
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
    else {
        return;
    };
    std::thread::spawn(move || {
        loop {
            if std::os::unix::process::parent_id() != parent {
                eprintln!("pipeline worker: rank 0 (process {parent}) is gone; exiting");
                std::process::exit(1);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    });
}

/// Rank 0's worker processes and the rendezvous they were given.
pub struct Children {
    list: Arc<Mutex<Vec<(usize, Child)>>>,
    finished: Arc<AtomicBool>,
    _published: Published,
    _folder: Option<tempfile::TempDir>,
}

impl Children {
    fn new(published: Published, folder: Option<tempfile::TempDir>) -> Children {
        Children {
            list: Arc::default(),
            finished: Arc::default(),
            _published: published,
            _folder: folder,
        }
    }

    fn add(&mut self, rank: usize, child: Child) {
        self.list.lock().expect("children lock").push((rank, child));
    }

    /// Ends this process when a worker fails before shutdown.
    fn watch(&self) {
        let (list, finished) = (Arc::clone(&self.list), Arc::clone(&self.finished));
        std::thread::spawn(move || {
            while !finished.load(Ordering::SeqCst) {
                let mut list = list.lock().expect("children lock");
                let failed = list
                    .iter_mut()
                    .find_map(|(rank, child)| match child.try_wait() {
                        Ok(Some(status)) if !status.success() => Some((*rank, status)),
                        _ => None,
                    });
                if let Some((rank, status)) = failed
                    && !finished.load(Ordering::SeqCst)
                {
                    eprintln!("error: pipeline worker {rank} exited ({status}); stopping");
                    for (_, child) in list.iter_mut() {
                        let _ = child.kill();
                    }
                    std::process::exit(1);
                }
                drop(list);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }

    /// After the shutdown round: waits for the workers (or kills them when it failed).
    pub fn finish(&mut self, stopped: bool) {
        self.finished.store(true, Ordering::SeqCst);
        for (_, child) in self.list.lock().expect("children lock").drain(..) {
            end(child, stopped);
        }
    }
}

fn end(mut child: Child, stopped: bool) {
    if !stopped {
        let _ = child.kill();
    }
    let _ = child.wait();
}

impl Drop for Children {
    /// Workers of a pipeline that never started (rank 0 failed to join) are killed.
    fn drop(&mut self) {
        self.finished.store(true, Ordering::SeqCst);
        if let Ok(mut list) = self.list.lock() {
            for (_, child) in list.drain(..) {
                end(child, false);
            }
        }
    }
}
