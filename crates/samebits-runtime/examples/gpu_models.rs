//! Whole models on the GPU: for each `MODEL=N,C,H,W` argument (one image input), the output
//! bits of the reproducible set on the GPU against the CPU, the steps that ran on device
//! kernels or fell back, and the latency of the reproducible and the default operation sets on
//! the GPU, timed alternately (A B A B ...) in one process on one backend. The default set runs
//! its products on cuBLAS with TF32 (no promise about bits); its largest difference from the
//! reproducible output is printed too.
//!
//! Run on a CUDA machine: `LD_LIBRARY_PATH=/usr/local/cuda/lib64 gpu_models det.onnx=1,3,640,640`
//! (`RUNS` timed runs per set, default 20). The last lines are a markdown table.

use std::collections::BTreeMap;
use std::time::Instant;

use samebits_cuda::testing::Rng;
use samebits_ir::{Tensor, Value};
use samebits_runtime::device::Device;
use samebits_runtime::{CompileOptions, CompiledModel, OperationSet, compile};

fn compiled(path: &str, set: OperationSet, device: Device) -> CompiledModel {
    let options = CompileOptions {
        requires_reproducibility: set == OperationSet::Reproducible,
        operation_set: Some(set),
        device,
        ..CompileOptions::default()
    };
    compile(std::path::Path::new(path), &options).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn f32_outputs(outputs: &[(String, Value)]) -> Vec<Vec<f32>> {
    outputs
        .iter()
        .map(|(_, v)| v.as_tensor().unwrap().as_slice::<f32>().unwrap().to_vec())
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let backend = samebits_runtime::device::cuda_backend(0).expect("a CUDA device");
    println!(
        "{}: default set products on {}",
        backend.device_name(),
        if backend.has_cublas() {
            "cuBLAS (TF32)"
        } else {
            "the reproducible GEMM (no cuBLAS)"
        }
    );
    let mut rows = Vec::new();
    for arg in std::env::args().skip(1) {
        let (path, dims) = arg.split_once('=').expect("MODEL=N,C,H,W");
        let shape: Vec<usize> = dims.split(',').map(|d| d.parse().unwrap()).collect();
        let name = std::path::Path::new(path)
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let cpu = compiled(path, OperationSet::Reproducible, Device::Cpu);
        let rep = compiled(path, OperationSet::Reproducible, Device::Cuda(0));
        let def = compiled(path, OperationSet::Default, Device::Cuda(0));
        let x = Tensor::from_vec(
            shape.clone(),
            Rng::new(7).values(shape.iter().product(), 1.0),
        )
        .unwrap();
        let inputs: BTreeMap<String, Value> = [(cpu.input_names()[0].clone(), x.into())]
            .into_iter()
            .collect();
        let want = f32_outputs(&cpu.run(&inputs).unwrap());
        let (got, rep_stats) = rep.run_counted(&inputs, Default::default()).unwrap();
        let (fast, def_stats) = def.run_counted(&inputs, Default::default()).unwrap();
        let (got, fast) = (f32_outputs(&got), f32_outputs(&fast));
        let differing: usize = got
            .iter()
            .zip(&want)
            .map(|(g, w)| {
                g.iter()
                    .zip(w)
                    .filter(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()))
                    .count()
            })
            .sum();
        let max_diff = fast
            .iter()
            .zip(&got)
            .flat_map(|(f, g)| f.iter().zip(g).map(|(a, b)| (a - b).abs()))
            .fold(0.0f32, f32::max);
        let (rep_stats, def_stats) = (rep_stats.unwrap(), def_stats.unwrap());
        println!(
            "{name} {shape:?}: reproducible GPU vs CPU: {differing} differing elements; device steps {} / fallbacks {:?} (reproducible), {} / {:?} (default); default vs reproducible max |diff| {max_diff:e}",
            rep_stats.device_steps,
            rep_stats.host_steps,
            def_stats.device_steps,
            def_stats.host_steps
        );
        for _ in 0..3 {
            rep.run(&inputs).unwrap();
            def.run(&inputs).unwrap();
        }
        let (mut rep_ms, mut def_ms) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            for (model, times) in [(&rep, &mut rep_ms), (&def, &mut def_ms)] {
                let start = Instant::now();
                model.run(&inputs).unwrap();
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        let (r, d) = (median(rep_ms.clone()), median(def_ms.clone()));
        println!("{name}: reproducible ms {rep_ms:.3?}");
        println!("{name}: default ms {def_ms:.3?}");
        rows.push(format!(
            "| {name} {} | {differing} | {} / {} | {r:.3} | {d:.3} | {:+.0}% |",
            dims,
            rep_stats.device_steps,
            rep_stats.host_step_count(),
            (r / d - 1.0) * 100.0
        ));
    }
    println!(
        "| model, input | elements differing GPU vs CPU | device / fallback steps | reproducible ms | default ms | reproducible overhead |"
    );
    println!("|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
}
