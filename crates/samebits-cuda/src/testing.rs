//! One test body for the CPU and for CUDA, in the spirit of candle's `test_device!`, for
//! samebits-cuda's own tests and examples and other crates' GPU tests. (Always compiled, not a
//! cargo feature: a feature that only tests turn on would make test and plain builds resolve
//! different features and compile the workspace twice.)
//!
//! [`Device`] runs an operation on host slices. Ops run as a one-node graph of the production
//! samebits-ops op ([`Device::run_node`]): on the CPU its interpreter, on the GPU the
//! [`CudaExecutor`], which must run the node on the device. GEMM and reductions run the
//! samebits-kernels functions on the CPU and the backend's launch on the GPU. [`test_device!`]
//! turns a body `fn(&Device)` into a CPU test and a CUDA test; without a usable GPU (CI) the
//! CUDA test prints `SKIPPED (no CUDA device): <test>` to stderr and returns. The case lists
//! (`*_cases`) are shared by the tests and `examples/gpu_check.rs`.

use std::sync::{Arc, OnceLock};

use samebits_ir::{Attribute, Graph, Node, Shape, Tensor, Value, ValueInfo, ValueType};
use samebits_ops::{BinaryKernel, DeviceKernel, OperationSet, Plan, RunOptions, UnaryKernel};

use samebits_kernels::{Epilogue, MatRef, ReduceKind, gemm, reduce_f32};

use crate::{
    CudaBackend, CudaExecutor, DeviceMat, DeviceMatBf16, GemmEpilogue, GemmLaunch, GemmShape,
    SPLIT_K_MAX_M,
};

/// Where a test body runs.
pub enum Device {
    Cpu,
    Cuda(&'static CudaBackend),
}

/// The process-wide CUDA backend on GPU 0, or why there is none.
pub fn shared_cuda() -> Result<&'static CudaBackend, String> {
    shared_cuda_arc().map(|b| &**b)
}

/// [`shared_cuda`] as the `Arc` an executor takes.
pub fn shared_cuda_arc() -> Result<&'static Arc<CudaBackend>, String> {
    static BACKEND: OnceLock<Result<Arc<CudaBackend>, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| CudaBackend::new(0).map(Arc::new).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(Clone::clone)
}

/// The CUDA device, or `None` after printing the loud skip line for `test`.
pub fn cuda_or_skip(test: &str) -> Option<Device> {
    match shared_cuda() {
        Ok(backend) => Some(Device::Cuda(backend)),
        Err(why) => {
            // Written past the test harness's output capture, so that CI logs show every skip.
            let line = format!("SKIPPED (no CUDA device): {test} ({why})\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            None
        }
    }
}

/// Runs the GPU tests of a test binary one at a time: they share one backend and its stream,
/// and a test that launches on the stream directly must not run while another test's executor
/// records a CUDA graph ([`CudaBackend::lock_stream`] covers executor runs only).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static GPU_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    GPU_TESTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Defines `$cpu` and `$cuda` tests that both run `$body(&Device)` (the CUDA one under
/// [`serial`]).
#[macro_export]
macro_rules! test_device {
    ($body:ident, $cpu:ident, $cuda:ident) => {
        #[test]
        fn $cpu() {
            $body(&$crate::testing::Device::Cpu);
        }

        #[test]
        fn $cuda() {
            if let Some(device) =
                $crate::testing::cuda_or_skip(concat!(module_path!(), "::", stringify!($cuda)))
            {
                let _serial = $crate::testing::serial();
                $body(&device);
            }
        }
    };
}

/// Index of the first element whose bits differ, if any. Two NaNs count as equal whatever
/// their payloads: the NaN an IEEE operation creates is hardware-defined (x86 `0xffc00000`,
/// Arm `0x7fc00000`, NVIDIA `0x7fffffff`) and the contract does not fix it outside
/// `reduce-extrema`; [`nan_payload_differences`] counts those separately.
pub fn first_difference(got: &[f32], want: &[f32]) -> Option<usize> {
    if got.len() != want.len() {
        return Some(got.len().min(want.len()));
    }
    got.iter()
        .zip(want)
        .position(|(g, w)| g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan()))
}

/// Number of elements where both are NaN with different bits.
pub fn nan_payload_differences(got: &[f32], want: &[f32]) -> usize {
    got.iter()
        .zip(want)
        .filter(|(g, w)| g.is_nan() && w.is_nan() && g.to_bits() != w.to_bits())
        .count()
}

/// Panics with the first differing element unless `got` and `want` are bit-identical (NaN
/// payloads aside, see [`first_difference`]).
pub fn assert_same_bits(got: &[f32], want: &[f32], what: &str) {
    if let Some(i) = first_difference(got, want) {
        panic!(
            "{what}: element {i} differs: got {:?} (0x{:08x}), want {:?} (0x{:08x}); lengths {} and {}",
            got.get(i),
            got.get(i).map_or(0, |v| v.to_bits()),
            want.get(i),
            want.get(i).map_or(0, |v| v.to_bits()),
            got.len(),
            want.len()
        );
    }
}

/// A deterministic pseudo-random generator (SplitMix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// `n` values in [-scale, scale) with a few signed zeros mixed in.
    pub fn values(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| match self.next_u64() % 64 {
                0 => -0.0,
                1 => 0.0,
                _ => self.unit() * scale,
            })
            .collect()
    }

    /// `n` arbitrary bit patterns (NaNs, infinities, subnormals included) for unary functions.
    pub fn any_floats(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| f32::from_bits(self.next_u64() as u32))
            .collect()
    }
}

/// Strides of a host matrix view, used for both the CPU slice and the device buffer.
#[derive(Clone, Copy, Debug)]
pub struct Strides {
    pub offset: usize,
    pub batch: usize,
    pub row: usize,
    pub col: usize,
}

impl Strides {
    /// Dense row-major `[batch, rows, cols]`, or its transpose stored `[batch, cols, rows]`.
    pub fn dense(rows: usize, cols: usize, transposed: bool) -> Self {
        if transposed {
            Strides {
                offset: 0,
                batch: rows * cols,
                row: 1,
                col: rows,
            }
        } else {
            Strides {
                offset: 0,
                batch: rows * cols,
                row: cols,
                col: 1,
            }
        }
    }

    fn cpu<'a>(&self, data: &'a [f32]) -> MatRef<'a, f32> {
        MatRef {
            data,
            offset: self.offset,
            batch_stride: self.batch,
            row_stride: self.row,
            col_stride: self.col,
        }
    }

    fn gpu<'a>(&self, buffer: &'a crate::DeviceBuffer) -> DeviceMat<'a> {
        DeviceMat {
            buffer,
            offset: self.offset,
            batch_stride: self.batch,
            row_stride: self.row,
            col_stride: self.col,
        }
    }
}

/// The epilogue of a GEMM case.
#[derive(Clone, Copy, Debug)]
pub enum CaseEpilogue {
    None,
    /// A bias per column, `out = acc + bias[j]`.
    ColumnBias,
    /// `(alpha * acc) + (beta * c)` with a dense c.
    AlphaBeta(f32, f32),
}

/// One GEMM test case.
#[derive(Clone, Debug)]
pub struct GemmCase {
    pub shape: GemmShape,
    pub a: Vec<f32>,
    pub a_strides: Strides,
    pub b: Vec<f32>,
    pub b_strides: Strides,
    pub epilogue: CaseEpilogue,
    /// The epilogue's operand: `n` biases or a dense `[batch, m, n]` c.
    pub c: Vec<f32>,
}

impl GemmCase {
    /// Random operands for `shape`, A and B optionally stored transposed.
    pub fn random(
        rng: &mut Rng,
        shape: GemmShape,
        a_t: bool,
        b_t: bool,
        epilogue: CaseEpilogue,
    ) -> Self {
        let GemmShape { batch, m, n, k } = shape;
        let c_len = match epilogue {
            CaseEpilogue::None => 0,
            CaseEpilogue::ColumnBias => n,
            CaseEpilogue::AlphaBeta(..) => batch * m * n,
        };
        GemmCase {
            shape,
            a: rng.values(batch * m * k, 1.0),
            a_strides: Strides::dense(m, k, a_t),
            b: rng.values(batch * k * n, 1.0),
            b_strides: Strides::dense(k, n, b_t),
            epilogue,
            c: rng.values(c_len, 1.0),
        }
    }

    /// The launch shapes this case can take (all must agree).
    pub fn launches(&self) -> Vec<GemmLaunch> {
        std::iter::once(GemmLaunch::Auto)
            .chain(GemmLaunch::FORCED)
            .filter(|&l| l != GemmLaunch::SplitK || self.shape.m <= SPLIT_K_MAX_M)
            .collect()
    }
}

/// The GEMM cases: K = 0, 1, 63, 64, 65, 1000; M = 1..8, 9, 31, 64; odd N; transposed
/// operands; batches; every epilogue.
pub fn gemm_cases(seed: u64) -> Vec<GemmCase> {
    let mut rng = Rng::new(seed);
    let mut cases = Vec::new();
    let ks = [0, 1, 63, 64, 65, 129, 1000];
    let ms = [1, 2, 3, 5, 8, 9, 31, 64];
    let ns = [1, 7, 33, 64, 131];
    for (ci, &k) in ks.iter().enumerate() {
        for (mi, &m) in ms.iter().enumerate() {
            let n = ns[(ci + mi) % ns.len()];
            let batch = 1 + (ci + mi) % 3;
            let a_t = (ci + mi) % 2 == 1;
            let b_t = (ci * 3 + mi) % 4 == 1;
            let epilogue = match (ci + 2 * mi) % 3 {
                0 => CaseEpilogue::None,
                1 => CaseEpilogue::ColumnBias,
                _ => CaseEpilogue::AlphaBeta(0.5, -1.25),
            };
            cases.push(GemmCase::random(
                &mut rng,
                GemmShape { batch, m, n, k },
                a_t,
                b_t,
                epilogue,
            ));
        }
    }
    cases
}

/// A bigger GEMM (several blocks in every direction, partial edge blocks).
pub fn large_gemm_case(seed: u64) -> GemmCase {
    GemmCase::random(
        &mut Rng::new(seed),
        GemmShape {
            batch: 1,
            m: 300,
            n: 517,
            k: 777,
        },
        false,
        false,
        CaseEpilogue::None,
    )
}

/// Tiled products whose B rows take the 16-byte copies (N a multiple of 4, unit stride along n)
/// and ring wrap-arounds (many K steps), with edge blocks, whole blocks, transposed A and
/// batches.
pub fn vector_gemm_cases(seed: u64) -> Vec<GemmCase> {
    let mut rng = Rng::new(seed);
    [
        (1, 260, 516, 777, false, CaseEpilogue::None),
        (2, 130, 132, 200, true, CaseEpilogue::ColumnBias),
        (1, 9, 4, 1, false, CaseEpilogue::AlphaBeta(2.0, -0.5)),
        (3, 70, 68, 64, true, CaseEpilogue::None),
        // whole blocks of every configuration, K a multiple of the 64-term tile
        (1, 256, 512, 640, false, CaseEpilogue::None),
    ]
    .into_iter()
    .map(|(batch, m, n, k, a_t, epilogue)| {
        GemmCase::random(&mut rng, GemmShape { batch, m, n, k }, a_t, false, epilogue)
    })
    .collect()
}

/// Split-K products with bf16 weights (B's values rounded to bf16, so that the f32 CPU GEMM on
/// the same values is the oracle): `[k, n]` and `[n, k]` storage, aligned and odd sizes.
pub fn bf16_gemv_cases(seed: u64) -> Vec<GemmCase> {
    let mut rng = Rng::new(seed);
    [
        (1, 576, 1536, false),
        (1, 576, 1536, true),
        (3, 1000, 200, false),
        (2, 1000, 200, true),
        (5, 77, 33, false),
        (8, 130, 9, true),
        // wide [k, n]: 4 columns per thread, a partial last tile and column block
        (1, 200, 8192, false),
        (3, 77, 8200, false),
    ]
    .into_iter()
    .map(|(m, k, n, b_t)| {
        let mut case = GemmCase::random(
            &mut rng,
            GemmShape { batch: 1, m, n, k },
            false,
            b_t,
            CaseEpilogue::ColumnBias,
        );
        for v in &mut case.b {
            *v = f32::from_bits(v.to_bits() & 0xffff_0000);
        }
        case
    })
    .collect()
}

/// Wide split-K products that take the vectorised B reads: `[k, n]` weights (four columns per
/// thread, read directly) and `[n, k]` weights (staged 16-byte copies); odd K, a partial last
/// column block.
pub fn wide_gemv_cases(seed: u64) -> Vec<GemmCase> {
    let mut rng = Rng::new(seed);
    [
        (3, 16_384, 1000, false),
        (3, 16_384, 1000, true),
        (5, 8196, 130, false),
    ]
    .into_iter()
    .map(|(m, n, k, b_t)| {
        let shape = GemmShape { batch: 1, m, n, k };
        GemmCase::random(&mut rng, shape, false, b_t, CaseEpilogue::ColumnBias)
    })
    .collect()
}

impl Device {
    /// The device's name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda(_) => "cuda",
        }
    }

    /// Runs a GEMM case with the given launch (ignored on the CPU).
    pub fn gemm(&self, case: &GemmCase, how: GemmLaunch) -> Vec<f32> {
        let GemmShape { batch, m, n, .. } = case.shape;
        let c_strides = match case.epilogue {
            CaseEpilogue::ColumnBias => Strides {
                offset: 0,
                batch: 0,
                row: 0,
                col: 1,
            },
            _ => Strides {
                offset: 0,
                batch: m * n,
                row: n,
                col: 1,
            },
        };
        match self {
            Device::Cpu => {
                let c = c_strides.cpu(&case.c);
                let epilogue = match case.epilogue {
                    CaseEpilogue::None => Epilogue::None,
                    CaseEpilogue::ColumnBias => Epilogue::Add(c),
                    CaseEpilogue::AlphaBeta(alpha, beta) => Epilogue::AlphaBeta {
                        alpha,
                        beta,
                        c: Some(c),
                    },
                };
                let mut out = vec![0.0f32; batch * m * n];
                let GemmShape { batch, m, n, k } = case.shape;
                gemm(
                    batch,
                    m,
                    n,
                    k,
                    case.a_strides.cpu(&case.a),
                    case.b_strides.cpu(&case.b),
                    epilogue,
                    &mut out,
                );
                out
            }
            Device::Cuda(backend) => {
                let run = || -> crate::Result<Vec<f32>> {
                    let a = backend.upload(&case.a)?;
                    let b = backend.upload(&case.b)?;
                    let c_buffer = backend.upload(&case.c)?;
                    let c = c_strides.gpu(&c_buffer);
                    let epilogue = match case.epilogue {
                        CaseEpilogue::None => GemmEpilogue::None,
                        CaseEpilogue::ColumnBias => GemmEpilogue::Add(c),
                        CaseEpilogue::AlphaBeta(alpha, beta) => GemmEpilogue::AlphaBeta {
                            alpha,
                            beta,
                            c: Some(c),
                        },
                    };
                    let out = backend.gemm(
                        case.shape,
                        case.a_strides.gpu(&a),
                        case.b_strides.gpu(&b),
                        epilogue,
                        how,
                    )?;
                    backend.download(&out)
                };
                run().expect("cuda gemm")
            }
        }
    }

    /// Runs a split-K case with B stored as bf16 (its values must be bf16-exact); on the CPU,
    /// the f32 GEMM of the same values.
    pub fn gemv_bf16(&self, case: &GemmCase) -> Vec<f32> {
        let Device::Cuda(backend) = self else {
            return self.gemm(case, GemmLaunch::Auto);
        };
        let GemmShape { m, n, .. } = case.shape;
        let run = || -> crate::Result<Vec<f32>> {
            let a = backend.upload(&case.a)?;
            let bytes: Vec<u8> = case
                .b
                .iter()
                .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
                .collect();
            let b = backend.upload_bytes(&bytes)?;
            let bias = backend.upload(&case.c)?;
            let c = Strides {
                offset: 0,
                batch: 0,
                row: 0,
                col: 1,
            };
            let epilogue = match case.epilogue {
                CaseEpilogue::ColumnBias => GemmEpilogue::Add(c.gpu(&bias)),
                _ => GemmEpilogue::None,
            };
            let s = case.b_strides;
            let out = backend.gemv_bf16(
                case.shape,
                case.a_strides.gpu(&a),
                DeviceMatBf16 {
                    bytes: &b,
                    offset: s.offset,
                    batch_stride: s.batch,
                    row_stride: s.row,
                    col_stride: s.col,
                },
                epilogue,
            )?;
            debug_assert_eq!(out.len(), m * n);
            backend.download(&out)
        };
        run().expect("cuda gemv_bf16")
    }

    /// The outputs of `plan` on `inputs`: the CPU interpreter, or the CUDA executor (device
    /// kernels where the steps have them).
    pub fn run_plan(&self, plan: &Arc<Plan>, inputs: Vec<Value>) -> Vec<Value> {
        match self {
            Device::Cpu => plan.run(inputs, RunOptions::default()).expect("cpu plan"),
            Device::Cuda(_) => {
                let backend = Arc::clone(shared_cuda_arc().expect("cuda backend"));
                CudaExecutor::new(backend, Arc::clone(plan))
                    .run(inputs)
                    .expect("cuda plan")
            }
        }
    }

    /// The outputs of the one-node graph `node` on `inputs` (the node's inputs in order), in
    /// the reproducible operation set: the samebits-ops interpreter on the CPU; on CUDA the
    /// executor, which must run the node on the device (a CPU fallback panics).
    pub fn run_node(&self, node: &Node, inputs: &[Tensor]) -> Vec<Tensor> {
        let plan = Arc::new(one_node_plan(node, inputs).expect("one-node plan"));
        let inputs: Vec<Value> = inputs.iter().cloned().map(Value::from).collect();
        let outputs = match self {
            Device::Cpu => plan.run(inputs, RunOptions::default()).expect("cpu plan"),
            Device::Cuda(_) => {
                let backend = Arc::clone(shared_cuda_arc().expect("cuda backend"));
                let (outputs, stats) = CudaExecutor::new(backend, Arc::clone(&plan))
                    .run_with(inputs, RunOptions::default())
                    .unwrap_or_else(|e| panic!("{}: {e}", node.op_type));
                assert!(
                    stats.host_steps.is_empty(),
                    "{}: fell back to the CPU: {stats:?}",
                    node.op_type
                );
                outputs
            }
        };
        outputs
            .into_iter()
            .map(|v| v.as_tensor().expect("tensor output").clone())
            .collect()
    }

    /// Output 0 of [`Device::run_node`] as f32 values.
    fn node_values(&self, node: &Node, inputs: &[Tensor]) -> Vec<f32> {
        let outputs = self.run_node(node, inputs);
        outputs[0].as_slice::<f32>().expect("f32 output").to_vec()
    }

    /// `y[i] = f(x[i])` by the one-input `node` (one of [`unary_nodes`]).
    pub fn unary(&self, node: &Node, x: &[f32]) -> Vec<f32> {
        self.node_values(node, &[f32_tensor(&[x.len()], x)])
    }

    /// Broadcast binary operation by the two-input `node` (one of [`binary_nodes`]).
    pub fn binary(
        &self,
        node: &Node,
        a: &[f32],
        a_shape: &[usize],
        b: &[f32],
        b_shape: &[usize],
    ) -> Vec<f32> {
        self.node_values(node, &[f32_tensor(a_shape, a), f32_tensor(b_shape, b)])
    }

    /// Reduction of `[outer, len, inner]` over the middle axis.
    pub fn reduce(
        &self,
        kind: ReduceKind,
        x: &[f32],
        outer: usize,
        len: usize,
        inner: usize,
    ) -> Vec<f32> {
        match self {
            Device::Cpu => {
                let mut out = vec![0.0f32; outer * inner];
                reduce_f32(kind, x, outer, len, inner, &mut out);
                out
            }
            Device::Cuda(backend) => backend
                .upload(x)
                .and_then(|b| backend.reduce(kind, &b, outer, len, inner))
                .and_then(|y| backend.download(&y))
                .expect("cuda reduce"),
        }
    }

    /// Softmax or log-softmax (ONNX Softmax / LogSoftmax along the last axis) of rows of `len`.
    pub fn softmax(&self, x: &[f32], len: usize, log: bool) -> Vec<f32> {
        let op = if log { "LogSoftmax" } else { "Softmax" };
        let rows = x.len() / len.max(1);
        self.node_values(&node(op, 1, Vec::new()), &[f32_tensor(&[rows, len], x)])
    }

    /// ONNX LayerNormalization (output Y) of rows of `scale.len()`.
    pub fn layer_norm(&self, x: &[f32], scale: &[f32], bias: Option<&[f32]>, eps: f32) -> Vec<f32> {
        let len = scale.len();
        let mut inputs = vec![
            f32_tensor(&[x.len() / len.max(1), len], x),
            f32_tensor(&[len], scale),
        ];
        inputs.extend(bias.map(|b| f32_tensor(&[len], b)));
        let attrs = vec![("epsilon", Attribute::Float(eps))];
        self.node_values(&node("LayerNormalization", inputs.len(), attrs), &inputs)
    }

    /// ONNX RMSNormalization of rows of `scale.len()`.
    pub fn rms_norm(&self, x: &[f32], scale: &[f32], eps: f32) -> Vec<f32> {
        let len = scale.len();
        let inputs = [
            f32_tensor(&[x.len() / len.max(1), len], x),
            f32_tensor(&[len], scale),
        ];
        let attrs = vec![("epsilon", Attribute::Float(eps))];
        self.node_values(&node("RMSNormalization", 2, attrs), &inputs)
    }
}

/// A float32 tensor of `shape` holding `values`.
fn f32_tensor(shape: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_vec(shape.to_vec(), values.to_vec()).expect("tensor of its shape")
}

/// A default-domain node `op_type` with inputs `x0`, `x1`, ... and the output `y`.
pub fn node(op_type: &str, inputs: usize, attributes: Vec<(&str, Attribute)>) -> Node {
    Node {
        name: op_type.into(),
        op_type: op_type.into(),
        domain: String::new(),
        inputs: (0..inputs).map(|i| format!("x{i}")).collect(),
        outputs: vec!["y".into()],
        attributes: attributes
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    }
}

/// The reproducible plan of the graph holding only `node`, its inputs typed as `inputs`
/// (opset 23 of the default domain).
pub fn one_node_plan(node: &Node, inputs: &[Tensor]) -> samebits_ops::Result<Plan> {
    let graph = Graph {
        name: node.op_type.clone(),
        nodes: vec![node.clone()],
        inputs: node
            .inputs
            .iter()
            .zip(inputs)
            .map(|(name, t)| ValueInfo {
                name: name.clone(),
                ty: Some(ValueType::tensor(t.dtype(), Some(Shape::known(t.shape())))),
            })
            .collect(),
        outputs: node
            .outputs
            .iter()
            .map(|name| ValueInfo {
                name: name.clone(),
                ty: None,
            })
            .collect(),
        ..Graph::default()
    };
    let opsets = [("".to_string(), 23)].into();
    Plan::build(&graph, &opsets, OperationSet::Reproducible, &[])
}

/// The device kernel of the default-domain op `op_type` on float32 inputs of `shapes`, with
/// the node, when a plan of it builds (the op's attributes at their defaults).
fn kernel_of(op_type: &str, shapes: &[&[usize]]) -> Option<(DeviceKernel, Node)> {
    let node = node(op_type, shapes.len(), Vec::new());
    let inputs: Vec<Tensor> = shapes
        .iter()
        .map(|s| f32_tensor(s, &vec![0.0; s.iter().product()]))
        .collect();
    let plan = one_node_plan(&node, &inputs).ok()?;
    let kernel = plan.steps().next()?.op.device_kernel()?;
    Some((kernel, node))
}

/// Every default-domain op of samebits-ops whose float32 evaluation is a [`UnaryKernel`], as a
/// one-input node with its attributes at their defaults.
pub fn unary_nodes() -> Vec<(UnaryKernel, Node)> {
    samebits_ops::registry::global()
        .op_types()
        .filter(|(domain, _)| domain.is_empty())
        .filter_map(|(_, op_type)| match kernel_of(op_type, &[&[1]])? {
            (DeviceKernel::Unary(kernel), node) => Some((kernel, node)),
            _ => None,
        })
        .collect()
}

/// Every default-domain op of samebits-ops whose float32 evaluation of two inputs is a
/// [`BinaryKernel`], as a two-input node.
pub fn binary_nodes() -> Vec<(BinaryKernel, Node)> {
    samebits_ops::registry::global()
        .op_types()
        .filter(|(domain, _)| domain.is_empty())
        .filter_map(|(_, op_type)| match kernel_of(op_type, &[&[1], &[1]])? {
            (DeviceKernel::Binary(kernel), node) => Some((kernel, node)),
            _ => None,
        })
        .collect()
}

/// Row lengths of the reduction, softmax and normalization cases (1 tile, edges, many tiles).
pub const ROW_LENGTHS: [usize; 8] = [1, 5, 63, 64, 65, 576, 1000, 49_152];

/// Reduction kinds covered on the GPU.
pub const REDUCE_KINDS: [ReduceKind; 5] = [
    ReduceKind::Sum,
    ReduceKind::SumSquares,
    ReduceKind::Prod,
    ReduceKind::Max,
    ReduceKind::Min,
];

/// Broadcast shape pairs of the binary cases.
pub const BROADCAST_SHAPES: [(&[usize], &[usize]); 5] = [
    (&[1000], &[1000]),
    (&[4, 5, 6], &[6]),
    (&[4, 1, 6], &[1, 5, 1]),
    (&[2, 3, 1, 7], &[3, 9, 1]),
    (&[], &[17]),
];
