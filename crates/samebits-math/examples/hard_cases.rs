//! Finds every binary32 input whose binary64 approximation fails the rounding test and writes
//! them to tools/hard_cases/<name>.txt as `<input bits> <fallback bits>` (hex), the input of
//! tools/gen_exceptions.py.
//!
//! Run: cargo run --release -p samebits-math --example hard_cases -- [FUNCS...] [--threads N]

use std::io::Write;

use rayon::prelude::*;
use samebits_math::UnaryFn;

fn main() {
    let mut funcs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--threads" {
            let n = args
                .next()
                .and_then(|n| n.parse().ok())
                .expect("--threads N");
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build_global()
                .expect("thread pool");
        } else {
            funcs
                .push(UnaryFn::from_name(&arg).unwrap_or_else(|| panic!("unknown function {arg}")));
        }
    }
    if funcs.is_empty() {
        funcs = UnaryFn::IMPLEMENTED.to_vec();
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/hard_cases");
    std::fs::create_dir_all(&dir).expect("create tools/hard_cases");
    for f in funcs {
        let start = std::time::Instant::now();
        let cases: Vec<(u32, u32)> = (0u32..1 << 16)
            .into_par_iter()
            .flat_map_iter(|chunk| {
                (0u32..1 << 16).filter_map(move |low| {
                    let bits = (chunk << 16) | low;
                    f.hard_case(f32::from_bits(bits))
                        .map(|fallback| (bits, fallback.to_bits()))
                })
            })
            .collect();
        let path = dir.join(format!("{}.txt", f.name()));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("create file"));
        for (x, fallback) in &cases {
            writeln!(out, "{x:08x} {fallback:08x}").expect("write");
        }
        println!(
            "{}: {} hard cases ({:.1} s) -> {}",
            f.name(),
            cases.len(),
            start.elapsed().as_secs_f64(),
            path.display()
        );
    }
}
