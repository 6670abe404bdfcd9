//! Shape-dependent ops on CPU and CUDA (Conv, ConvTranspose, pooling, Resize, Transpose, Slice,
//! Split, Concat, BatchNormalization, `samebits::ElementwiseChain`): each case is a one-node
//! graph run by the CPU interpreter (the oracle) and by the CUDA executor, which must run the
//! node on the device (no fallback) and give the same bits; in the default operation set the
//! products run on cuBLAS with TF32 and only come close. The CPU variants check that every
//! case resolves its device kernel (`Op::shaped_kernel`) with the output shapes of the CPU op,
//! so a GPU-less machine still tests the resolution; the CUDA variants skip loudly without a
//! GPU.

use std::collections::HashMap;
use std::sync::Arc;

use samebits_cuda::testing::{Device, Rng, assert_same_bits, shared_cuda_arc};
use samebits_cuda::{CudaExecutor, test_device};
use samebits_ir::{Attribute, DType, Graph, Node, Shape, Tensor, Value, ValueInfo, ValueType};
use samebits_ops::{DeviceKernel, OperationSet, Plan, RunOptions};

/// One graph: runtime inputs and constants by name, its nodes, its outputs.
struct Case {
    what: String,
    nodes: Vec<Node>,
    inputs: Vec<(String, Tensor)>,
    constants: Vec<(String, Tensor)>,
    outputs: Vec<String>,
}

fn node(op_type: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<(&str, Attribute)>) -> Node {
    Node {
        name: outputs[0].into(),
        op_type: op_type.into(),
        domain: String::new(),
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        outputs: outputs.iter().map(|s| s.to_string()).collect(),
        attributes: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

/// A node's attributes.
type Attrs = Vec<(&'static str, Attribute)>;

fn ints(v: &[i64]) -> Attribute {
    Attribute::Ints(v.to_vec())
}

fn random(rng: &mut Rng, shape: &[usize], scale: f32) -> Tensor {
    Tensor::from_vec(shape.to_vec(), rng.values(shape.iter().product(), scale)).unwrap()
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_vec(vec![v.len()], v.to_vec()).unwrap()
}

fn f32s(v: &[f32]) -> Tensor {
    Tensor::from_vec(vec![v.len()], v.to_vec()).unwrap()
}

impl Case {
    fn new(what: impl Into<String>, node: Node) -> Case {
        Case {
            what: what.into(),
            outputs: node.outputs.clone(),
            nodes: vec![node],
            inputs: Vec::new(),
            constants: Vec::new(),
        }
    }

    fn input(mut self, name: &str, t: Tensor) -> Case {
        self.inputs.push((name.into(), t));
        self
    }

    fn constant(mut self, name: &str, t: Tensor) -> Case {
        self.constants.push((name.into(), t));
        self
    }

    fn plan(&self, set: OperationSet) -> Plan {
        let mut graph = Graph {
            name: self.what.clone(),
            nodes: self.nodes.clone(),
            ..Graph::default()
        };
        for (name, t) in &self.inputs {
            graph.inputs.push(ValueInfo {
                name: name.clone(),
                ty: Some(ValueType::tensor(t.dtype(), Some(Shape::known(t.shape())))),
            });
        }
        for (name, t) in &self.constants {
            graph.initializers.insert(name.clone(), t.clone());
        }
        for name in &self.outputs {
            graph.outputs.push(ValueInfo {
                name: name.clone(),
                ty: None,
            });
        }
        let opsets = [("".to_string(), 21), ("samebits".to_string(), 1)].into();
        Plan::build(&graph, &opsets, set, &[]).unwrap()
    }
}

/// Runs `case` on `device` against the CPU interpreter.
fn check(device: &Device, case: &Case) {
    let plan = Arc::new(case.plan(OperationSet::Reproducible));
    let inputs: Vec<Value> = case.inputs.iter().map(|(_, t)| t.clone().into()).collect();
    let want = plan.run(inputs.clone(), RunOptions::default()).unwrap();
    let got = match device {
        Device::Cpu => {
            check_resolution(&plan, case, &want);
            return;
        }
        Device::Cuda(_) => {
            let backend = Arc::clone(shared_cuda_arc().expect("cuda backend"));
            let executor = CudaExecutor::new(backend, Arc::clone(&plan));
            let (got, stats) = executor
                .run_with(inputs, RunOptions::default())
                .unwrap_or_else(|e| panic!("{}: {e}", case.what));
            assert!(
                stats.host_steps.is_empty(),
                "{}: fell back to the CPU: {stats:?}",
                case.what
            );
            got
        }
    };
    for (g, w) in got.iter().zip(&want) {
        let (g, w) = (g.as_tensor().unwrap(), w.as_tensor().unwrap());
        assert_eq!(g.shape(), w.shape(), "{}", case.what);
        assert_same_bits(
            g.as_slice::<f32>().unwrap(),
            w.as_slice::<f32>().unwrap(),
            &case.what,
        );
    }
}

/// Every step has a device kernel, and a shaped one resolves for the case's shapes, with the
/// CPU's output shapes (one-node cases: the plan's outputs).
fn check_resolution(plan: &Plan, case: &Case, want: &[Value]) {
    let mut known: HashMap<usize, Value> = plan.constants().map(|(s, v)| (s, v.clone())).collect();
    for (slot, (_, t)) in plan.input_slots().zip(&case.inputs) {
        known.insert(slot, t.clone().into());
    }
    for step in plan.steps() {
        let kernel = step.op.device_kernel();
        assert!(kernel.is_some(), "{}: {}", case.what, step.node);
        if kernel != Some(DeviceKernel::Shaped) {
            continue;
        }
        let host: Vec<Option<&Value>> = step
            .inputs
            .iter()
            .map(|s| s.and_then(|s| known.get(&s)))
            .collect();
        let shapes: Vec<Option<&[usize]>> = host
            .iter()
            .map(|v| v.and_then(|v| v.as_tensor().ok()).map(Tensor::shape))
            .collect();
        let kernel = step
            .op
            .shaped_kernel(&shapes, &host)
            .unwrap_or_else(|e| panic!("{}: {e}", case.what));
        let want_shapes: Vec<Vec<usize>> = want
            .iter()
            .map(|v| v.as_tensor().unwrap().shape().to_vec())
            .collect();
        assert_eq!(kernel.output_shapes(), want_shapes, "{}", case.what);
    }
}

/// Conv attributes: kernel, strides, dilations, pads (begin then end), group.
fn conv_node(k: &[i64], s: &[i64], d: &[i64], pads: &[i64], group: i64, bias: bool) -> Node {
    let inputs: &[&str] = if bias { &["x", "w", "b"] } else { &["x", "w"] };
    node(
        "Conv",
        inputs,
        &["y"],
        vec![
            ("kernel_shape", ints(k)),
            ("strides", ints(s)),
            ("dilations", ints(d)),
            ("pads", ints(pads)),
            ("group", Attribute::Int(group)),
        ],
    )
}

fn conv_cases() -> Vec<Case> {
    let mut rng = Rng::new(21);
    // (x shape, out channels, kernel, strides, dilations, pads, group, bias)
    type Spec = (
        &'static [usize],
        usize,
        &'static [i64],
        &'static [i64],
        &'static [i64],
        &'static [i64],
        i64,
        bool,
    );
    let specs: [Spec; 14] = [
        // depthwise 3x3 and 5x5 (direct), odd sizes, stride 2
        (
            &[1, 6, 7, 9],
            6,
            &[3, 3],
            &[1, 1],
            &[1, 1],
            &[1, 1, 1, 1],
            6,
            true,
        ),
        (
            &[2, 4, 11, 8],
            4,
            &[5, 5],
            &[2, 2],
            &[1, 1],
            &[2, 2, 2, 2],
            4,
            false,
        ),
        // few input channels per group (direct), 100 terms: two tiles
        (
            &[1, 4, 9, 10],
            5,
            &[5, 5],
            &[1, 1],
            &[1, 1],
            &[2, 1, 2, 1],
            1,
            true,
        ),
        (
            &[1, 3, 13, 12],
            8,
            &[3, 3],
            &[2, 2],
            &[1, 1],
            &[1, 1, 1, 1],
            1,
            true,
        ),
        // pointwise (GEMM on the planes): one image, two images, groups, 70 terms
        (
            &[1, 16, 9, 7],
            24,
            &[1, 1],
            &[1, 1],
            &[1, 1],
            &[0, 0, 0, 0],
            1,
            true,
        ),
        (
            &[2, 70, 5, 6],
            9,
            &[1, 1],
            &[1, 1],
            &[1, 1],
            &[0, 0, 0, 0],
            1,
            false,
        ),
        (
            &[2, 24, 4, 5],
            12,
            &[1, 1],
            &[1, 1],
            &[1, 1],
            &[0, 0, 0, 0],
            3,
            true,
        ),
        // im2col + GEMM: strides, dilations, asymmetric pads, groups, 72 and 54 terms
        (
            &[2, 8, 10, 9],
            16,
            &[3, 3],
            &[2, 1],
            &[1, 2],
            &[1, 0, 2, 1],
            1,
            true,
        ),
        (
            &[1, 12, 8, 8],
            6,
            &[3, 3],
            &[1, 1],
            &[1, 1],
            &[1, 1, 1, 1],
            2,
            false,
        ),
        (
            &[1, 10, 6, 7],
            3,
            &[1, 1],
            &[2, 2],
            &[1, 1],
            &[0, 0, 0, 0],
            1,
            true,
        ),
        (
            &[1, 5, 3, 4],
            7,
            &[2, 3],
            &[1, 1],
            &[1, 1],
            &[3, 3, 3, 3],
            1,
            true,
        ),
        // 1-D and 3-D
        (&[2, 6, 17], 5, &[3], &[2], &[2], &[2, 1], 1, true),
        (
            &[1, 5, 4, 5, 6],
            4,
            &[2, 3, 2],
            &[1, 2, 1],
            &[1, 1, 2],
            &[1, 0, 1, 0, 1, 1],
            1,
            true,
        ),
        (
            &[1, 8, 5, 4, 3],
            8,
            &[3, 1, 3],
            &[1, 1, 1],
            &[1, 1, 1],
            &[1, 0, 1, 1, 0, 1],
            8,
            false,
        ),
    ];
    let mut cases: Vec<Case> = specs
        .iter()
        .map(|&(x, m, k, s, d, pads, group, bias)| {
            let cg = x[1] / group as usize;
            let w_shape: Vec<usize> = [m, cg]
                .into_iter()
                .chain(k.iter().map(|&v| v as usize))
                .collect();
            let mut case = Case::new(
                format!("Conv x {x:?} M {m} k {k:?} s {s:?} d {d:?} pads {pads:?} group {group}"),
                conv_node(k, s, d, pads, group, bias),
            )
            .input("x", random(&mut rng, x, 2.0))
            .constant("w", random(&mut rng, &w_shape, 1.0));
            if bias {
                case = case.constant("b", random(&mut rng, &[m], 1.0));
            }
            case
        })
        .collect();
    for auto_pad in ["SAME_UPPER", "SAME_LOWER", "VALID"] {
        cases.push(
            Case::new(
                format!("Conv auto_pad {auto_pad}"),
                node(
                    "Conv",
                    &["x", "w"],
                    &["y"],
                    vec![
                        ("kernel_shape", ints(&[4, 3])),
                        ("strides", ints(&[2, 3])),
                        ("auto_pad", Attribute::String(auto_pad.into())),
                    ],
                ),
            )
            .input("x", random(&mut rng, &[1, 6, 9, 10], 2.0))
            .constant("w", random(&mut rng, &[5, 6, 4, 3], 1.0)),
        );
    }
    cases
}

fn conv(device: &Device) {
    for case in conv_cases() {
        check(device, &case);
    }
}
test_device!(conv, conv_cpu, conv_cuda);

fn conv_transpose(device: &Device) {
    let mut rng = Rng::new(22);
    // (x shape, weight shape, attributes, bias)
    let specs: Vec<(&[usize], &[usize], Attrs, bool)> = vec![
        (
            &[1, 8, 5, 6],
            &[8, 3, 2, 2],
            vec![("strides", ints(&[2, 2]))],
            false,
        ),
        (
            &[2, 6, 4, 5],
            &[6, 2, 3, 3],
            vec![
                ("strides", ints(&[2, 2])),
                ("pads", ints(&[1, 1, 1, 1])),
                ("output_padding", ints(&[1, 0])),
                ("group", Attribute::Int(2)),
            ],
            true,
        ),
        (
            &[1, 5, 7],
            &[5, 4, 3],
            vec![("dilations", ints(&[2])), ("strides", ints(&[3]))],
            true,
        ),
        (
            &[1, 40, 3, 3],
            &[40, 2, 3, 3],
            vec![("strides", ints(&[2, 1])), ("output_shape", ints(&[8, 4]))],
            true,
        ),
        // The GEMM form with groups, two images, dilations and asymmetric pads.
        (
            &[2, 12, 4, 5],
            &[12, 3, 3, 2],
            vec![
                ("strides", ints(&[2, 3])),
                ("pads", ints(&[1, 0, 0, 1])),
                ("dilations", ints(&[1, 2])),
                ("group", Attribute::Int(2)),
            ],
            true,
        ),
        // A decoder's 2x upsampling (ViT-S's saliency head): reductions of several tiles.
        (
            &[1, 64, 8, 8],
            &[64, 32, 2, 2],
            vec![("strides", ints(&[2, 2]))],
            true,
        ),
    ];
    for (x, w, attrs, bias) in specs {
        let m = w[1]
            * attrs
                .iter()
                .find(|(k, _)| *k == "group")
                .map_or(1, |(_, v)| match v {
                    Attribute::Int(g) => *g as usize,
                    _ => 1,
                });
        let inputs: &[&str] = if bias { &["x", "w", "b"] } else { &["x", "w"] };
        let mut case = Case::new(
            format!("ConvTranspose x {x:?} w {w:?} {attrs:?}"),
            node("ConvTranspose", inputs, &["y"], attrs),
        )
        .input("x", random(&mut rng, x, 2.0))
        .constant("w", random(&mut rng, w, 1.0));
        if bias {
            case = case.constant("b", random(&mut rng, &[m], 1.0));
        }
        check(device, &case);
    }
}
test_device!(conv_transpose, conv_transpose_cpu, conv_transpose_cuda);

fn pools(device: &Device) {
    let mut rng = Rng::new(23);
    let specs: Vec<(&str, &[usize], Attrs)> = vec![
        (
            "MaxPool",
            &[1, 3, 9, 11],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("strides", ints(&[2, 2])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
        ),
        (
            "MaxPool",
            &[2, 2, 10, 7],
            vec![
                ("kernel_shape", ints(&[3, 2])),
                ("strides", ints(&[2, 2])),
                ("ceil_mode", Attribute::Int(1)),
                ("dilations", ints(&[2, 1])),
            ],
        ),
        (
            "MaxPool",
            &[1, 4, 13],
            vec![
                ("kernel_shape", ints(&[4])),
                ("auto_pad", Attribute::String("SAME_UPPER".into())),
            ],
        ),
        (
            "AveragePool",
            &[1, 3, 9, 11],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("pads", ints(&[1, 2, 1, 0])),
            ],
        ),
        (
            "AveragePool",
            &[1, 3, 9, 11],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("pads", ints(&[1, 2, 1, 0])),
                ("count_include_pad", Attribute::Int(1)),
            ],
        ),
        (
            "AveragePool",
            &[2, 2, 12, 12],
            vec![
                ("kernel_shape", ints(&[9, 9])),
                ("strides", ints(&[3, 3])),
                ("ceil_mode", Attribute::Int(1)),
                ("count_include_pad", Attribute::Int(1)),
            ],
        ),
        (
            "AveragePool",
            &[1, 2, 5, 6, 7],
            vec![
                ("kernel_shape", ints(&[2, 3, 2])),
                ("strides", ints(&[2, 1, 2])),
                ("pads", ints(&[0, 1, 1, 1, 1, 0])),
            ],
        ),
    ];
    for (op, x, attrs) in specs {
        let case = Case::new(
            format!("{op} x {x:?} {attrs:?}"),
            node(op, &["x"], &["y"], attrs),
        )
        .input("x", random(&mut rng, x, 3.0));
        check(device, &case);
    }
    for op in ["GlobalAveragePool", "GlobalMaxPool"] {
        for x in [&[2usize, 5, 33, 17][..], &[1, 3, 1, 1], &[1, 4, 7]] {
            let case = Case::new(format!("{op} x {x:?}"), node(op, &["x"], &["y"], vec![]))
                .input("x", random(&mut rng, x, 3.0));
            check(device, &case);
        }
    }
}
test_device!(pools, pools_cpu, pools_cuda);

fn resize(device: &Device) {
    let mut rng = Rng::new(24);
    let string = |s: &str| Attribute::String(s.into());
    // (x shape, attributes, scales or sizes)
    type ScalesOrSizes = Result<Vec<f32>, Vec<i64>>;
    let specs: Vec<(&[usize], Attrs, ScalesOrSizes)> = vec![
        // PP-OCR det: nearest, asymmetric, floor, scales 2
        (
            &[1, 4, 5, 7],
            vec![
                ("mode", string("nearest")),
                ("coordinate_transformation_mode", string("asymmetric")),
                ("nearest_mode", string("floor")),
            ],
            Ok(vec![1.0, 1.0, 2.0, 2.0]),
        ),
        (
            &[1, 3, 6, 5],
            vec![
                ("mode", string("nearest")),
                ("nearest_mode", string("round_prefer_ceil")),
            ],
            Ok(vec![1.0, 1.0, 0.6, 1.7]),
        ),
        (
            &[2, 3, 4, 6],
            vec![("mode", string("linear"))],
            Err(vec![2, 3, 7, 5]),
        ),
        (
            &[1, 2, 5, 5],
            vec![
                ("mode", string("linear")),
                ("coordinate_transformation_mode", string("align_corners")),
            ],
            Ok(vec![1.0, 1.0, 1.5, 2.3]),
        ),
        (
            &[1, 2, 6, 7],
            vec![
                ("mode", string("cubic")),
                ("exclude_outside", Attribute::Int(1)),
            ],
            Ok(vec![1.0, 1.0, 1.4, 0.8]),
        ),
        (
            &[3, 9, 4],
            vec![
                ("mode", string("linear")),
                (
                    "coordinate_transformation_mode",
                    string("pytorch_half_pixel"),
                ),
            ],
            Ok(vec![1.0, 1.5, 2.0]),
        ),
        (
            &[2, 3, 4, 5, 3],
            vec![("mode", string("linear"))],
            Ok(vec![1.0, 1.0, 1.5, 1.5, 2.0]),
        ),
    ];
    for (x, attrs, target) in specs {
        let rank = x.len();
        let (inputs, target_input): (&[&str], Tensor) = match &target {
            Ok(scales) => (&["x", "", "scales"], f32s(scales)),
            Err(sizes) => (&["x", "", "", "sizes"], i64s(sizes)),
        };
        assert_eq!(target_input.numel(), rank);
        let name = if target.is_ok() { "scales" } else { "sizes" };
        let case = Case::new(
            format!("Resize x {x:?} {attrs:?} {target:?}"),
            node("Resize", inputs, &["y"], attrs),
        )
        .input("x", random(&mut rng, x, 3.0))
        .constant(name, target_input);
        check(device, &case);
    }
    let crop = node(
        "Resize",
        &["x", "roi", "", "sizes"],
        &["y"],
        vec![
            ("mode", Attribute::String("linear".into())),
            (
                "coordinate_transformation_mode",
                Attribute::String("tf_crop_and_resize".into()),
            ),
            ("extrapolation_value", Attribute::Float(-7.5)),
        ],
    );
    let case = Case::new("Resize tf_crop_and_resize", crop)
        .input("x", random(&mut rng, &[1, 2, 6, 5], 3.0))
        .constant("roi", f32s(&[0.0, 0.0, -0.2, 0.3, 1.0, 1.0, 1.1, 0.9]))
        .constant("sizes", i64s(&[1, 2, 7, 4]));
    check(device, &case);
}
test_device!(resize, resize_cpu, resize_cuda);

fn affine_grid(device: &Device) {
    let mut rng = Rng::new(29);
    // (size, align_corners): 2-D and 3-D, axes of one point included.
    let specs: [(&[i64], i64); 5] = [
        (&[2, 3, 5, 7], 0),
        (&[2, 3, 5, 7], 1),
        (&[1, 1, 1, 4], 1),
        (&[2, 1, 3, 4, 5], 0),
        (&[1, 2, 4, 1, 3], 1),
    ];
    for (size, align_corners) in specs {
        let dims = size.len() - 2;
        let theta = [size[0] as usize, dims, dims + 1];
        let case = Case::new(
            format!("AffineGrid size {size:?} align_corners {align_corners}"),
            node(
                "AffineGrid",
                &["theta", "size"],
                &["grid"],
                vec![("align_corners", Attribute::Int(align_corners))],
            ),
        )
        .input("theta", random(&mut rng, &theta, 2.0))
        .constant("size", i64s(size));
        check(device, &case);
    }
}
test_device!(affine_grid, affine_grid_cpu, affine_grid_cuda);

fn pad(device: &Device) {
    let mut rng = Rng::new(31);
    // (mode, pads, axes, constant value): negative pads crop; axes limit the pads.
    type Spec = (
        &'static str,
        &'static [i64],
        Option<&'static [i64]>,
        Option<f32>,
    );
    let specs: [Spec; 6] = [
        ("constant", &[0, 0, 1, 2, 0, 0, 3, 1], None, Some(2.5)),
        ("constant", &[0, 1, 0, -1, 0, 2, 0, 0], None, None),
        ("reflect", &[2, 1, 3, 2], Some(&[2, 3]), None),
        ("edge", &[0, 0, 4, 1, 0, 1, 0, 5], None, None),
        ("wrap", &[1, 3, 2, 4], Some(&[-1, 1]), None),
        ("constant", &[1, 1], Some(&[3]), Some(-0.0)),
    ];
    for (mode, pads, axes, value) in specs {
        let mut inputs = vec!["x", "pads", "value", "axes"];
        if axes.is_none() {
            inputs.pop();
        }
        if value.is_none() {
            inputs[2] = "";
        }
        let mut case = Case::new(
            format!("Pad {mode} {pads:?} axes {axes:?} value {value:?}"),
            node(
                "Pad",
                &inputs,
                &["y"],
                vec![("mode", Attribute::String(mode.into()))],
            ),
        )
        .input("x", random(&mut rng, &[2, 3, 5, 6], 1.0))
        .constant("pads", i64s(pads));
        if let Some(v) = value {
            case = case.constant("value", f32s(&[v]));
        }
        if let Some(a) = axes {
            case = case.constant("axes", i64s(a));
        }
        check(device, &case);
    }
}
test_device!(pad, pad_cpu, pad_cuda);

/// Cast of host integer and bool tensors to float32 (values float32 rounds included), Cast
/// float32 -> float32 (a view), Expand, and Gather with host indices (negative, scalar).
fn casts_and_gathers(device: &Device) {
    let mut rng = Rng::new(37);
    let big = (1i64 << 40) + 3;
    let ints: Vec<i64> = vec![0, 1, -1, 127, -128, 255, 70000, -(1 << 24) - 1, big, -big];
    let shape = vec![2, 5];
    let casts: Vec<(&str, Tensor)> = vec![
        (
            "int64",
            Tensor::from_vec(shape.clone(), ints.clone()).unwrap(),
        ),
        (
            "uint64",
            Tensor::from_vec(shape.clone(), ints.iter().map(|&v| v as u64).collect()).unwrap(),
        ),
        (
            "int32",
            Tensor::from_vec(shape.clone(), ints.iter().map(|&v| v as i32).collect()).unwrap(),
        ),
        (
            "uint32",
            Tensor::from_vec(shape.clone(), ints.iter().map(|&v| v as u32).collect()).unwrap(),
        ),
        (
            "int16",
            Tensor::from_vec(shape.clone(), ints.iter().map(|&v| v as i16).collect()).unwrap(),
        ),
        (
            "uint16",
            Tensor::from_vec(shape.clone(), ints.iter().map(|&v| v as u16).collect()).unwrap(),
        ),
        (
            "int8",
            Tensor::from_vec(shape.clone(), ints.iter().map(|&v| v as i8).collect()).unwrap(),
        ),
        (
            "uint8",
            Tensor::from_vec(shape.clone(), ints.iter().map(|&v| v as u8).collect()).unwrap(),
        ),
        (
            "bool",
            Tensor::from_bools(shape.clone(), ints.iter().map(|&v| v % 3 == 0).collect()).unwrap(),
        ),
        ("float", random(&mut rng, &shape, 2.0)),
    ];
    for (what, x) in casts {
        let cast = node("Cast", &["x"], &["y"], vec![("to", Attribute::Int(1))]);
        check(
            device,
            &Case::new(format!("Cast {what} to float"), cast).input("x", x),
        );
    }
    let case = Case::new("Expand", node("Expand", &["x", "shape"], &["y"], vec![]))
        .input("x", random(&mut rng, &[3, 1, 5], 1.0))
        .constant("shape", i64s(&[2, 1, 4, 1]));
    check(device, &case);
    // (data shape, axis, indices shape, indices)
    type Spec = (&'static [usize], i64, &'static [usize], &'static [i64]);
    let gathers: [Spec; 4] = [
        (&[10, 6], 0, &[2, 3], &[0, 9, -1, 4, 4, -10]),
        (&[3, 7, 4], 1, &[], &[-2]),
        (&[2, 3, 5], -1, &[4], &[4, 0, -5, 2]),
        (&[4, 3], 0, &[0], &[]),
    ];
    for (data, axis, shape, indices) in gathers {
        let case = Case::new(
            format!("Gather {data:?} axis {axis} indices {indices:?}"),
            node(
                "Gather",
                &["data", "i"],
                &["y"],
                vec![("axis", Attribute::Int(axis))],
            ),
        )
        .input(
            "i",
            Tensor::from_vec(shape.to_vec(), indices.to_vec()).unwrap(),
        )
        .constant("data", random(&mut rng, data, 1.0));
        check(device, &case);
    }
}
test_device!(
    casts_and_gathers,
    casts_and_gathers_cpu,
    casts_and_gathers_cuda
);

fn data_movement(device: &Device) {
    let mut rng = Rng::new(25);
    for perm in [&[0i64, 2, 3, 1][..], &[3, 1, 0, 2], &[0, 1, 2, 3]] {
        let case = Case::new(
            format!("Transpose {perm:?}"),
            node("Transpose", &["x"], &["y"], vec![("perm", ints(perm))]),
        )
        .input("x", random(&mut rng, &[2, 3, 5, 7], 1.0));
        check(device, &case);
    }
    let case = Case::new(
        "Transpose default",
        node("Transpose", &["x"], &["y"], vec![]),
    )
    .input("x", random(&mut rng, &[3, 1, 4, 2, 5, 2, 3], 1.0));
    check(device, &case);
    // Slice: starts, ends, axes, steps (negative steps, clamping, unit dims)
    for (starts, ends, axes, steps) in [
        (
            &[1i64, 0][..],
            &[3i64, 100][..],
            &[0i64, 2][..],
            &[1i64, 2][..],
        ),
        (&[-1, 4], &[-100, 0], &[1, 3], &[-1, -2]),
        (&[0], &[1], &[-1], &[1]),
    ] {
        let case = Case::new(
            format!("Slice {starts:?} {ends:?} {axes:?} {steps:?}"),
            node(
                "Slice",
                &["x", "starts", "ends", "axes", "steps"],
                &["y"],
                vec![],
            ),
        )
        .input("x", random(&mut rng, &[4, 3, 6, 7], 1.0))
        .constant("starts", i64s(starts))
        .constant("ends", i64s(ends))
        .constant("axes", i64s(axes))
        .constant("steps", i64s(steps));
        check(device, &case);
    }
    let split = node(
        "Split",
        &["x", "split"],
        &["a", "b", "c"],
        vec![("axis", Attribute::Int(2))],
    );
    let case = Case::new("Split sizes", split)
        .input("x", random(&mut rng, &[2, 3, 9, 4], 1.0))
        .constant("split", i64s(&[2, 0, 7]));
    check(device, &case);
    let split = node(
        "Split",
        &["x"],
        &["a", "b", "c"],
        vec![
            ("axis", Attribute::Int(-1)),
            ("num_outputs", Attribute::Int(3)),
        ],
    );
    let case = Case::new("Split num_outputs", split).input("x", random(&mut rng, &[3, 2, 8], 1.0));
    check(device, &case);
    for (axis, shapes) in [
        (1i64, [&[1usize, 3, 5, 4][..], &[1, 1, 5, 4], &[1, 6, 5, 4]]),
        (-1, [&[2, 3, 1], &[2, 3, 4], &[2, 3, 2]]),
        (0, [&[1, 7], &[3, 7], &[2, 7]]),
    ] {
        let case = Case::new(
            format!("Concat axis {axis} {shapes:?}"),
            node(
                "Concat",
                &["a", "b", "c"],
                &["y"],
                vec![("axis", Attribute::Int(axis))],
            ),
        )
        .input("a", random(&mut rng, shapes[0], 1.0))
        .input("b", random(&mut rng, shapes[1], 1.0))
        .input("c", random(&mut rng, shapes[2], 1.0));
        check(device, &case);
    }
}
test_device!(data_movement, data_movement_cpu, data_movement_cuda);

fn batch_norm(device: &Device) {
    let mut rng = Rng::new(26);
    for x in [&[2usize, 5, 7, 3][..], &[3, 4], &[1, 6, 9]] {
        let c = x[1];
        let var: Vec<f32> = rng.values(c, 1.0).iter().map(|v| v.abs()).collect();
        let case = Case::new(
            format!("BatchNormalization {x:?}"),
            node(
                "BatchNormalization",
                &["x", "s", "b", "m", "v"],
                &["y"],
                vec![("epsilon", Attribute::Float(1e-3))],
            ),
        )
        .input("x", random(&mut rng, x, 3.0))
        .constant("s", random(&mut rng, &[c], 1.0))
        .constant("b", random(&mut rng, &[c], 1.0))
        .constant("m", random(&mut rng, &[c], 1.0))
        .constant("v", f32s(&var));
        check(device, &case);
    }
}
test_device!(batch_norm, batch_norm_cpu, batch_norm_cuda);

/// ReduceSum / Mean / Max / Min / Prod / SumSquare over adjacent axes (a transformer's
/// per-token mean, a middle pair, every axis), the axes a constant input: the canonical order of
/// `reduce-axes` and ReduceMean's division by the count.
fn reductions(device: &Device) {
    let mut rng = Rng::new(28);
    let x_shape = [2usize, 3, 5, 300];
    let cases: [(&str, &[i64], i64); 6] = [
        ("ReduceMean", &[-1], 1),
        ("ReduceSum", &[1, 2], 0),
        ("ReduceMax", &[3], 1),
        ("ReduceMin", &[0, 1], 1),
        ("ReduceProd", &[2], 0),
        ("ReduceSumSquare", &[0, 1, 2, 3], 0),
    ];
    for (op, axes, keepdims) in cases {
        let case = Case::new(
            format!("{op} axes {axes:?} keepdims {keepdims}"),
            node(
                op,
                &["x", "axes"],
                &["y"],
                vec![("keepdims", Attribute::Int(keepdims))],
            ),
        )
        .input("x", random(&mut rng, &x_shape, 2.0))
        .constant("axes", i64s(axes));
        check(device, &case);
    }
}
test_device!(reductions, reductions_cpu, reductions_cuda);

/// Softmax and LogSoftmax along a middle axis (YOLOv8's distribution focal loss head): each
/// strided row gathered, normalised by the row kernel, put back, as the CPU op does.
fn softmax_middle_axis(device: &Device) {
    let mut rng = Rng::new(29);
    for (op, axis) in [("Softmax", 1i64), ("LogSoftmax", -2)] {
        let case = Case::new(
            format!("{op} axis {axis}"),
            node(op, &["x"], &["y"], vec![("axis", Attribute::Int(axis))]),
        )
        .input("x", random(&mut rng, &[2, 16, 7, 5], 6.0));
        check(device, &case);
    }
}
test_device!(
    softmax_middle_axis,
    softmax_middle_axis_cpu,
    softmax_middle_axis_cuda
);

/// RNN, GRU (both reset forms) and LSTM on the device (`kernels/recurrent.cu`): forward,
/// reverse and bidirectional, both layouts, sequence lengths (0 among them), initial states,
/// biases, peepholes, clip, non-default functions, reductions longer than a tile and hidden
/// sizes above one block's threads; Silero VAD's LSTM shapes.
fn recurrent(device: &Device) {
    let mut rng = Rng::new(41);
    // (op, attributes, seq, batch, input, hidden, directions, batch first, optional inputs)
    struct Spec {
        op: &'static str,
        attrs: Vec<(&'static str, Attribute)>,
        dims: [usize; 5],
        batch_first: bool,
        lengths: Option<&'static [i32]>,
        bias: bool,
        states: bool,
        peepholes: bool,
    }
    let strings = |v: &[&str]| Attribute::Strings(v.iter().map(|s| s.to_string()).collect());
    let direction = |d: &str| ("direction", Attribute::String(d.into()));
    let specs = vec![
        Spec {
            op: "LSTM",
            attrs: vec![("clip", Attribute::Float(3.0))],
            dims: [5, 3, 70, 40, 1],
            batch_first: false,
            lengths: Some(&[5, 0, 3]),
            bias: true,
            states: true,
            peepholes: true,
        },
        Spec {
            op: "LSTM",
            attrs: vec![
                direction("bidirectional"),
                (
                    "activations",
                    strings(&["HardSigmoid", "Elu", "Relu", "Sigmoid", "Tanh", "Tanh"]),
                ),
                ("activation_alpha", Attribute::Floats(vec![0.3, 0.7])),
            ],
            dims: [3, 2, 16, 300, 2],
            batch_first: true,
            lengths: None,
            bias: false,
            states: true,
            peepholes: false,
        },
        Spec {
            op: "LSTM",
            attrs: Vec::new(),
            dims: [4, 1, 128, 128, 1],
            batch_first: false,
            lengths: None,
            bias: true,
            states: true,
            peepholes: false,
        },
        Spec {
            op: "GRU",
            attrs: vec![direction("reverse")],
            dims: [4, 2, 33, 65, 1],
            batch_first: false,
            lengths: Some(&[2, 4]),
            bias: true,
            states: true,
            peepholes: false,
        },
        Spec {
            op: "GRU",
            attrs: vec![
                direction("bidirectional"),
                ("linear_before_reset", Attribute::Int(1)),
            ],
            dims: [3, 2, 20, 24, 2],
            batch_first: false,
            lengths: None,
            bias: true,
            states: false,
            peepholes: false,
        },
        Spec {
            op: "RNN",
            attrs: vec![("activations", strings(&["Relu"]))],
            dims: [6, 2, 8, 130, 1],
            batch_first: true,
            lengths: None,
            bias: false,
            states: true,
            peepholes: false,
        },
    ];
    for spec in specs {
        let [seq, batch, input, hidden, dirs] = spec.dims;
        let gates = match spec.op {
            "LSTM" => 4,
            "GRU" => 3,
            _ => 1,
        };
        let x_shape = match spec.batch_first {
            false => [seq, batch, input],
            true => [batch, seq, input],
        };
        let state_shape = match spec.batch_first {
            false => [dirs, batch, hidden],
            true => [batch, dirs, hidden],
        };
        let named = |on: bool, name: &'static str| if on { name } else { "" };
        let mut inputs = vec![
            "x",
            "w",
            "r",
            named(spec.bias, "b"),
            named(spec.lengths.is_some(), "lens"),
            named(spec.states, "h0"),
        ];
        if spec.op == "LSTM" {
            inputs.extend([named(spec.states, "c0"), named(spec.peepholes, "p")]);
        }
        while inputs.last() == Some(&"") {
            inputs.pop();
        }
        let outputs: &[&str] = match spec.op {
            "LSTM" => &["y", "y_h", "y_c"],
            _ => &["y", "y_h"],
        };
        let mut attrs = spec.attrs;
        attrs.push(("hidden_size", Attribute::Int(hidden as i64)));
        attrs.push(("layout", Attribute::Int(i64::from(spec.batch_first))));
        let what = format!("{} {attrs:?} dims {:?}", spec.op, spec.dims);
        let scale = 1.0 / (input as f32).sqrt();
        let mut case = Case::new(what, node(spec.op, &inputs, outputs, attrs))
            .input("x", random(&mut rng, &x_shape, 1.0))
            .constant("w", random(&mut rng, &[dirs, gates * hidden, input], scale))
            .constant(
                "r",
                random(&mut rng, &[dirs, gates * hidden, hidden], scale),
            );
        if spec.bias {
            case = case.constant("b", random(&mut rng, &[dirs, 2 * gates * hidden], 0.5));
        }
        if let Some(lengths) = spec.lengths {
            let t = Tensor::from_vec(vec![lengths.len()], lengths.to_vec()).unwrap();
            case = case.constant("lens", t);
        }
        if spec.states {
            case = case.input("h0", random(&mut rng, &state_shape, 1.0));
            if spec.op == "LSTM" {
                case = case.input("c0", random(&mut rng, &state_shape, 1.0));
            }
        }
        if spec.peepholes {
            case = case.constant("p", random(&mut rng, &[dirs, 3 * hidden], 0.5));
        }
        check(device, &case);
    }
}
test_device!(recurrent, recurrent_cpu, recurrent_cuda);

/// A `samebits::ElementwiseChain` node over `inputs` with `body` (the last node's output is
/// the chain's output "y").
fn chain_node(inputs: &[&str], body: Vec<Node>) -> Node {
    let graph = Graph {
        name: "chain".into(),
        inputs: inputs
            .iter()
            .map(|n| ValueInfo {
                name: n.to_string(),
                ty: None,
            })
            .collect(),
        outputs: vec![ValueInfo {
            name: body.last().unwrap().outputs[0].clone(),
            ty: Some(ValueType::tensor(DType::F32, None)),
        }],
        nodes: body,
        ..Graph::default()
    };
    let mut n = node(
        "ElementwiseChain",
        inputs,
        &["y"],
        vec![("body", Attribute::Graph(Box::new(graph)))],
    );
    n.domain = "samebits".into();
    n
}

fn elementwise_chain(device: &Device) {
    let mut rng = Rng::new(27);
    let x_shape = [1usize, 6, 5, 7];
    // PP-OCR's hard-swish chain: Mul Add Add Clip Mul Div Mul Add, scalar operands.
    let hswish = chain_node(
        &["w0", "x", "w1", "three", "zero", "six", "d", "v0", "v1"],
        vec![
            node("Mul", &["w0", "x"], &["t0"], vec![]),
            node("Add", &["t0", "w1"], &["t1"], vec![]),
            node("Add", &["t1", "three"], &["t2"], vec![]),
            node("Clip", &["t2", "zero", "six"], &["t3"], vec![]),
            node("Mul", &["t1", "t3"], &["t4"], vec![]),
            node("Div", &["t4", "d"], &["t5"], vec![]),
            node("Mul", &["v0", "t5"], &["t6"], vec![]),
            node("Add", &["t6", "v1"], &["y0"], vec![]),
        ],
    );
    let scalar = |v: f32| Tensor::from_vec(vec![], vec![v]).unwrap();
    let case = Case::new("ElementwiseChain hard swish", hswish)
        .constant("w0", f32s(&[1.25]))
        .input("x", random(&mut rng, &x_shape, 5.0))
        .constant("w1", f32s(&[-0.5]))
        .constant("three", scalar(3.0))
        .constant("zero", scalar(0.0))
        .constant("six", scalar(6.0))
        .constant("d", scalar(6.0))
        .constant("v0", f32s(&[0.75]))
        .constant("v1", f32s(&[0.125]));
    check(device, &case);
    // Add BatchNormalization Relu, with a per-channel [1, C, 1, 1] operand and a clip bound
    // omitted.
    let c = x_shape[1];
    let var: Vec<f32> = rng.values(c, 1.0).iter().map(|v| v.abs()).collect();
    let bn = chain_node(
        &["x", "r", "s", "b", "m", "v", "lo", "k"],
        vec![
            node("Add", &["x", "r"], &["t0"], vec![]),
            node(
                "BatchNormalization",
                &["t0", "s", "b", "m", "v"],
                &["t1"],
                vec![("epsilon", Attribute::Float(1e-5))],
            ),
            node("Relu", &["t1"], &["t2"], vec![]),
            node("Clip", &["t2", "lo"], &["t3"], vec![]),
            node("Sub", &["k", "t3"], &["y0"], vec![]),
        ],
    );
    let case = Case::new("ElementwiseChain batch norm", bn)
        .input("x", random(&mut rng, &x_shape, 3.0))
        .input("r", random(&mut rng, &x_shape, 3.0))
        .constant("s", random(&mut rng, &[c], 1.0))
        .constant("b", random(&mut rng, &[c], 1.0))
        .constant("m", random(&mut rng, &[c], 1.0))
        .constant("v", f32s(&var))
        .constant("lo", scalar(0.25))
        .constant("k", random(&mut rng, &[1, c, 1, 1], 1.0));
    check(device, &case);
    // The activations a chain takes: Sigmoid, HardSigmoid (non-default alpha, beta), HardSwish,
    // LeakyRelu.
    let act = chain_node(
        &["x", "r"],
        vec![
            node("Sigmoid", &["x"], &["t0"], vec![]),
            node("Mul", &["t0", "r"], &["t1"], vec![]),
            node(
                "HardSigmoid",
                &["t1"],
                &["t2"],
                vec![
                    ("alpha", Attribute::Float(0.3)),
                    ("beta", Attribute::Float(0.25)),
                ],
            ),
            node("HardSwish", &["t2"], &["t3"], vec![]),
            node(
                "LeakyRelu",
                &["t3"],
                &["y0"],
                vec![("alpha", Attribute::Float(0.3))],
            ),
        ],
    );
    let case = Case::new("ElementwiseChain activations", act)
        .input("x", random(&mut rng, &x_shape, 8.0))
        .input("r", random(&mut rng, &x_shape, 4.0));
    check(device, &case);
    // A decomposed layer norm's tail: per-row mean and std ([B, T, 1]), per-feature gamma and
    // beta ([D]).
    let (b, t, d) = (2usize, 3, 300);
    let ln = chain_node(
        &["x", "mean", "std", "gamma", "beta"],
        vec![
            node("Sub", &["x", "mean"], &["t0"], vec![]),
            node("Div", &["t0", "std"], &["t1"], vec![]),
            node("Mul", &["t1", "gamma"], &["t2"], vec![]),
            node("Add", &["t2", "beta"], &["y0"], vec![]),
        ],
    );
    let std: Vec<f32> = rng
        .values(b * t, 2.0)
        .iter()
        .map(|v| v.abs() + 0.5)
        .collect();
    let case = Case::new("ElementwiseChain per-row and per-feature operands", ln)
        .input("x", random(&mut rng, &[b, t, d], 4.0))
        .input("mean", random(&mut rng, &[b, t, 1], 1.0))
        .constant("std", Tensor::from_vec(vec![b, t, 1], std).unwrap())
        .constant("gamma", random(&mut rng, &[d], 2.0))
        .constant("beta", random(&mut rng, &[d], 1.0));
    check(device, &case);
}
test_device!(
    elementwise_chain,
    elementwise_chain_cpu,
    elementwise_chain_cuda
);

/// A `samebits::ConvChain` node: `conv` (its output "c") then the chain `body` reading "c"
/// among `body_inputs`; the node's inputs are the convolution's, then the body's others.
fn conv_chain_node(conv: Node, body_inputs: &[&str], body: Vec<Node>) -> Node {
    let chain = chain_node(body_inputs, body);
    let Some(Attribute::Graph(body)) = chain.attributes.get("body") else {
        unreachable!("chain_node sets the body")
    };
    let conv_graph = Graph {
        name: "conv".into(),
        inputs: conv
            .inputs
            .iter()
            .map(|n| ValueInfo {
                name: n.clone(),
                ty: None,
            })
            .collect(),
        outputs: vec![ValueInfo {
            name: conv.outputs[0].clone(),
            ty: None,
        }],
        nodes: vec![conv.clone()],
        ..Graph::default()
    };
    let mut inputs: Vec<&str> = conv.inputs.iter().map(String::as_str).collect();
    inputs.extend(body_inputs.iter().filter(|n| **n != "c"));
    let mut n = node(
        "ConvChain",
        &inputs,
        &["y"],
        vec![
            ("conv", Attribute::Graph(Box::new(conv_graph))),
            ("body", Attribute::Graph(body.clone())),
        ],
    );
    n.domain = "samebits".into();
    n
}

fn conv_chain(device: &Device) {
    let mut rng = Rng::new(29);
    // Conv with bias, then Mul by a per-channel scale and HardSwish (the conv output is the
    // chain's second input).
    let conv = node(
        "Conv",
        &["x", "w", "b"],
        &["c"],
        vec![("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
    );
    let body = vec![
        node("Mul", &["k", "c"], &["t0"], vec![]),
        node("HardSwish", &["t0"], &["y0"], vec![]),
    ];
    let case = Case::new(
        "ConvChain conv hard swish",
        conv_chain_node(conv, &["k", "c"], body),
    )
    .input("x", random(&mut rng, &[2, 5, 9, 11], 2.0))
    .constant("w", random(&mut rng, &[6, 5, 3, 3], 0.5))
    .constant("b", random(&mut rng, &[6], 0.5))
    .constant("k", random(&mut rng, &[1, 6, 1, 1], 1.5));
    check(device, &case);
    // ConvTranspose without bias, then Add of a full-size input and Sigmoid.
    let conv = node(
        "ConvTranspose",
        &["x", "w"],
        &["c"],
        vec![("strides", ints(&[2, 2]))],
    );
    let body = vec![
        node("Add", &["c", "r"], &["t0"], vec![]),
        node("Sigmoid", &["t0"], &["y0"], vec![]),
    ];
    let case = Case::new(
        "ConvChain transposed sigmoid",
        conv_chain_node(conv, &["c", "r"], body),
    )
    .input("x", random(&mut rng, &[1, 4, 6, 5], 2.0))
    .constant("w", random(&mut rng, &[4, 3, 2, 2], 0.5))
    .input("r", random(&mut rng, &[1, 3, 12, 10], 2.0));
    check(device, &case);
    // A squeeze-excitation gate (PP-OCR's neck): a 1x1 conv of a pooled [1, C, 1, 1] vector,
    // HardSigmoid, times the full feature map, plus it again: the conv's output and the gate
    // are one value per channel of the chain's output (per-element evaluation on the device).
    let conv = node("Conv", &["p", "w", "b"], &["c"], vec![]);
    let body = vec![
        node("HardSigmoid", &["c"], &["t0"], vec![]),
        node("Mul", &["f", "t0"], &["t1"], vec![]),
        node("Add", &["t1", "f"], &["y0"], vec![]),
    ];
    let case = Case::new(
        "ConvChain squeeze-excitation",
        conv_chain_node(conv, &["c", "f"], body),
    )
    .input("p", random(&mut rng, &[1, 6, 1, 1], 2.0))
    .constant("w", random(&mut rng, &[6, 6, 1, 1], 0.5))
    .constant("b", random(&mut rng, &[6], 0.5))
    .input("f", random(&mut rng, &[1, 6, 7, 5], 2.0));
    check(device, &case);
}
test_device!(conv_chain, conv_chain_cpu, conv_chain_cuda);

/// The default operation set: convolutions (pointwise and im2col) and Gemm on cuBLAS with TF32
/// where it loads: no fallback, and within TF32's error of the reproducible result.
fn default_set(device: &Device) {
    let Device::Cuda(_) = device else {
        return;
    };
    let mut rng = Rng::new(28);
    let mut cases = conv_cases();
    cases.push(
        Case::new(
            "Gemm transB alpha beta",
            node(
                "Gemm",
                &["a", "b", "c"],
                &["y"],
                vec![
                    ("transB", Attribute::Int(1)),
                    ("alpha", Attribute::Float(0.5)),
                    ("beta", Attribute::Float(2.0)),
                ],
            ),
        )
        .input("a", random(&mut rng, &[37, 300], 1.0))
        .constant("b", random(&mut rng, &[45, 300], 1.0))
        .constant("c", random(&mut rng, &[45], 1.0)),
    );
    for case in &cases {
        let want = case
            .plan(OperationSet::Reproducible)
            .run(
                case.inputs.iter().map(|(_, t)| t.clone().into()).collect(),
                RunOptions::default(),
            )
            .unwrap();
        let plan = Arc::new(case.plan(OperationSet::Default));
        let backend = Arc::clone(shared_cuda_arc().expect("cuda backend"));
        let inputs = case.inputs.iter().map(|(_, t)| t.clone().into()).collect();
        let (got, stats) = CudaExecutor::new(backend, plan)
            .run_with(inputs, RunOptions::default())
            .unwrap();
        assert!(stats.host_steps.is_empty(), "{}: {stats:?}", case.what);
        let (g, w) = (got[0].as_tensor().unwrap(), want[0].as_tensor().unwrap());
        let (g, w) = (g.as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
        let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        let diff: Vec<f32> = g.iter().zip(w).map(|(a, b)| a - b).collect();
        let relative = norm(&diff) / norm(w).max(1e-30);
        assert!(
            relative < 1e-2,
            "{}: relative error {relative:e}",
            case.what
        );
    }
}
test_device!(default_set, default_set_cpu, default_set_cuda);
