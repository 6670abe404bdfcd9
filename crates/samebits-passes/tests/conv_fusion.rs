//! Convolution epilogue fusion: a Conv or ConvTranspose followed by elementwise nodes becomes
//! one `samebits::ConvChain` node whose outputs have the same bits as the unfused graph's (the
//! reference is the unfused graph run by the same interpreter), on random geometries (odd
//! sizes, padding, strides, dilations, groups: depthwise, small and large groups, 1x1 read in
//! place), on every available ISA and with 1 and 2 threads, on the kernel's fused path and on
//! the fallback (an operand layout the fused path does not take). Inputs hold NaN, infinities
//! and zeros of both signs; NaN results compare as NaN (their sign and payload are not part of
//! the contract, docs/contract.md "Arithmetic").

mod common;

use common::node;
use samebits_ir::{Attribute, DType, Graph, Model, Node, Tensor, Value, ValueInfo, ValueType};
use samebits_kernels::{Isa, with_isa};
use samebits_ops::{OperationSet, Plan, RunOptions};
use samebits_passes::Pipeline;

/// xorshift64* generator with occasional zeros of either sign and a spread of magnitudes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn value(&mut self) -> f32 {
        let r = self.next();
        match r % 256 {
            0..=3 => 0.0,
            4..=7 => -0.0,
            8 => f32::NAN,
            9 => f32::INFINITY,
            10 => f32::NEG_INFINITY,
            _ => {
                let unit = ((r >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
                unit * 2f32.powi(((r >> 8) % 9) as i32 - 4)
            }
        }
    }

    fn tensor(&mut self, shape: &[usize]) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_vec(shape.to_vec(), (0..n).map(|_| self.value()).collect()).unwrap()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn ints(v: &[usize]) -> Attribute {
    Attribute::Ints(v.iter().map(|&x| x as i64).collect())
}

/// One convolution case: `transpose` picks ConvTranspose (weight `[C, M/g, k...]`).
struct Case {
    transpose: bool,
    batch: usize,
    channels: usize,
    out_channels: usize,
    groups: usize,
    input: Vec<usize>,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads: Vec<usize>,
    bias: bool,
}

impl Case {
    fn random(rng: &mut Rng, transpose: bool) -> Case {
        let dims = 1 + rng.below(2);
        let groups = [1, 1, 2, 3][rng.below(4)];
        // Depthwise (one channel per group), the direct kernel (<= 4), and im2col (> 4).
        let per_group = [1, 2, 5, 7][rng.below(4)];
        let depthwise = !transpose && rng.below(4) == 0;
        let (groups, channels, out_channels) = if depthwise {
            let c = 3 + rng.below(6);
            (c, c, c)
        } else {
            (groups, groups * per_group, groups * (1 + rng.below(9)))
        };
        let kernel: Vec<usize> = (0..dims).map(|_| 1 + rng.below(3)).collect();
        let pointwise = !transpose && rng.below(3) == 0;
        let (kernel, strides, dilations, pads) = if pointwise {
            (
                vec![1; dims],
                vec![1; dims],
                vec![1; dims],
                vec![0; 2 * dims],
            )
        } else {
            let strides = (0..dims).map(|_| 1 + rng.below(2)).collect();
            let dilations = (0..dims).map(|_| 1 + rng.below(2)).collect();
            let pads = (0..2 * dims).map(|d| rng.below(kernel[d % dims])).collect();
            (kernel, strides, dilations, pads)
        };
        Case {
            transpose,
            batch: 1 + rng.below(2),
            channels,
            out_channels,
            groups,
            input: (0..dims).map(|_| 5 + rng.below(13)).collect(),
            kernel,
            strides,
            dilations,
            pads,
            bias: rng.below(3) > 0,
        }
    }

    fn weight_shape(&self) -> Vec<usize> {
        let head = if self.transpose {
            [self.channels, self.out_channels / self.groups]
        } else {
            [self.out_channels, self.channels / self.groups]
        };
        head.into_iter()
            .chain(self.kernel.iter().copied())
            .collect()
    }

    fn x_shape(&self) -> Vec<usize> {
        [self.batch, self.channels]
            .into_iter()
            .chain(self.input.iter().copied())
            .collect()
    }

    /// Output shape (the graph computes it too; the test needs it for full-size operands).
    fn y_shape(&self) -> Vec<usize> {
        let spatial = (0..self.input.len()).map(|d| {
            let extent = self.dilations[d] * (self.kernel[d] - 1) + 1;
            let pads = self.pads[d] + self.pads[d + self.input.len()];
            if self.transpose {
                (self.input[d] - 1) * self.strides[d] + extent - pads
            } else {
                (self.input[d] + pads - extent) / self.strides[d] + 1
            }
        });
        [self.batch, self.out_channels]
            .into_iter()
            .chain(spatial)
            .collect()
    }

    fn conv_node(&self) -> Node {
        let mut inputs = vec!["x", "w"];
        if self.bias {
            inputs.push("b");
        }
        let op = if self.transpose {
            "ConvTranspose"
        } else {
            "Conv"
        };
        let mut conv = node(op, &inputs, "conv");
        for (name, value) in [
            ("kernel_shape", &self.kernel),
            ("strides", &self.strides),
            ("dilations", &self.dilations),
            ("pads", &self.pads),
        ] {
            conv.attributes.insert(name.into(), ints(value));
        }
        conv.attributes
            .insert("group".into(), Attribute::Int(self.groups as i64));
        conv
    }
}

/// The elementwise nodes after the convolution, reading `conv`, ending in `y`; `residual` is a
/// graph input of the output's shape, `plane` one of shape `[1, 1, spatial...]` (which the
/// fused path does not take).
fn chain(kind: usize) -> Vec<Node> {
    let mut bn = node(
        "BatchNormalization",
        &["conv", "scale", "shift", "mean", "var"],
        "bn",
    );
    bn.attributes
        .insert("epsilon".into(), Attribute::Float(1e-5));
    let mut hsig = node("HardSigmoid", &["affine"], "hsig");
    hsig.attributes
        .insert("alpha".into(), Attribute::Float(0.1666667));
    match kind {
        // PP-OCRv4's learnable affine and hand-written hard swish.
        0 => vec![
            node("Mul", &["a", "conv"], "scaled"),
            node("Add", &["scaled", "c"], "affine"),
            node("Add", &["affine", "three"], "shifted"),
            node("Clip", &["shifted", "zero", "six"], "clipped"),
            node("Mul", &["affine", "clipped"], "gated"),
            node("Div", &["gated", "six"], "y"),
        ],
        // BatchNormalization, residual Add, Relu.
        1 => vec![
            bn,
            node("Add", &["bn", "residual"], "sum"),
            node("Relu", &["sum"], "y"),
        ],
        // One node: per-channel division with the constant on the left.
        2 => vec![node("Div", &["channel", "conv"], "y")],
        // Composite activations.
        3 => {
            let mut leaky = node("LeakyRelu", &["swish"], "y");
            leaky
                .attributes
                .insert("alpha".into(), Attribute::Float(0.3));
            vec![
                node("Sigmoid", &["conv"], "sig"),
                node("Sub", &["sig", "conv"], "affine"),
                hsig,
                node("HardSwish", &["hsig"], "swish"),
                leaky,
            ]
        }
        // Constants on the left of Sub and right of Div (an affine pair), hard swish with the
        // clipped value first in its Mul, then a residual Add and Relu: the evaluator's other
        // pass forms.
        4 => vec![
            node("Sub", &["c", "conv"], "scaled"),
            node("Div", &["scaled", "channel"], "affine"),
            node("Add", &["affine", "three"], "shifted"),
            node("Clip", &["shifted", "zero", "six"], "clipped"),
            node("Mul", &["clipped", "affine"], "gated"),
            node("Div", &["gated", "six"], "swish"),
            node("Add", &["swish", "residual"], "sum"),
            node("Relu", &["sum"], "y"),
        ],
        // A plane-shaped operand: the fallback path.
        _ => vec![
            node("Mul", &["conv", "plane"], "scaled"),
            node("Relu", &["scaled"], "y"),
        ],
    }
}

fn model(case: &Case, kind: usize, rng: &mut Rng) -> (Model, Vec<Value>) {
    let mut g = Graph::default();
    let y_shape = case.y_shape();
    let m = case.out_channels;
    for name in ["x", "residual", "plane"] {
        g.inputs.push(ValueInfo {
            name: name.into(),
            ty: Some(ValueType::tensor(DType::F32, None)),
        });
    }
    g.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    let positive = |t: Tensor| {
        let v: Vec<f32> = t
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.abs())
            .collect();
        Tensor::from_vec(t.shape().to_vec(), v).unwrap()
    };
    let scalar = |v: f32| Tensor::from_vec(vec![1], vec![v]).unwrap();
    let inits = [
        ("w", rng.tensor(&case.weight_shape())),
        ("b", rng.tensor(&[m])),
        ("scale", rng.tensor(&[m])),
        ("shift", rng.tensor(&[m])),
        ("mean", rng.tensor(&[m])),
        ("var", positive(rng.tensor(&[m]))),
        ("channel", rng.tensor(&[1, m, 1, 1][..y_shape.len()])),
        ("a", scalar(1.1)),
        ("c", scalar(-0.3)),
        ("three", scalar(3.0)),
        ("zero", scalar(0.0)),
        ("six", scalar(6.0)),
    ];
    for (name, t) in inits {
        g.initializers.insert(name.into(), t);
    }
    g.nodes.push(case.conv_node());
    g.nodes.extend(chain(kind));
    // Keep the graph inputs read, whatever the chain.
    g.nodes
        .push(node("Identity", &["residual"], "residual_copy"));
    g.nodes.push(node("Identity", &["plane"], "plane_copy"));
    g.outputs
        .extend(["residual_copy", "plane_copy"].map(|name| ValueInfo {
            name: name.into(),
            ty: None,
        }));
    let mut plane_shape = vec![1, 1];
    plane_shape.extend(&y_shape[2..]);
    let inputs = vec![
        Value::Tensor(rng.tensor(&case.x_shape())),
        Value::Tensor(rng.tensor(&y_shape)),
        Value::Tensor(rng.tensor(&plane_shape)),
    ];
    let model = Model {
        graph: g,
        ..Default::default()
    };
    (model, inputs)
}

fn bits(graph: &Graph, inputs: &[Value]) -> Vec<u32> {
    let plan = Plan::build(graph, &Default::default(), OperationSet::Reproducible, &[]).unwrap();
    let outputs = plan.run(inputs.to_vec(), RunOptions::default()).unwrap();
    let y = outputs.into_iter().next().unwrap().into_tensor().unwrap();
    y.as_slice::<f32>()
        .unwrap()
        .iter()
        .map(|f| if f.is_nan() { f32::NAN } else { *f }.to_bits())
        .collect()
}

fn on_threads<R: Send>(threads: usize, isa: Isa, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(|| with_isa(isa, f))
}

#[test]
fn a_fused_convolution_gives_the_bits_of_the_unfused_nodes() {
    let mut rng = Rng(0x5eed_c0de);
    for round in 0..48 {
        let transpose = round % 4 == 3;
        let case = Case::random(&mut rng, transpose);
        let kind = round % 6;
        let (unfused, inputs) = model(&case, kind, &mut rng);
        let mut fused = unfused.clone();
        Pipeline {
            operation_set: OperationSet::Reproducible,
            dump_dir: None,
        }
        .run(&mut fused)
        .unwrap();
        let ops: Vec<&str> = fused
            .graph
            .nodes
            .iter()
            .map(|n| n.op_type.as_str())
            .collect();
        assert!(ops.contains(&"ConvChain"), "round {round}: {ops:?}");
        let want = on_threads(1, Isa::Scalar, || bits(&unfused.graph, &inputs));
        for isa in Isa::available() {
            for threads in [1, 2] {
                let got = on_threads(threads, isa, || bits(&fused.graph, &inputs));
                if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                    panic!(
                        "round {round} (chain {kind}, transpose {transpose}, x {:?}, w {:?}, \
                         groups {}, strides {:?}, pads {:?}), {} with {threads} threads: element \
                         {i} is {:#010x}, unfused {:#010x}",
                        case.x_shape(),
                        case.weight_shape(),
                        case.groups,
                        case.strides,
                        case.pads,
                        isa.name(),
                        got[i],
                        want[i]
                    );
                }
            }
        }
    }
}
