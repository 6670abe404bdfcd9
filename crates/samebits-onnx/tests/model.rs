//! ModelProto → IR: graphs, value types with symbolic dims, every attribute kind, subgraphs,
//! initializers, sparse initializers, opset checks and model-local function inlining.

mod common;

use common::*;
use prost::Message;
use samebits_ir::{Attribute, DType, Dim, Shape, Tensor, ValueType};
use samebits_onnx::proto::attribute_proto::AttributeType;
use samebits_onnx::proto::tensor_proto::DataType;
use samebits_onnx::proto::{
    AttributeProto, FunctionProto, GraphProto, SparseTensorProto, TensorProto, TypeProto,
    type_proto,
};
use samebits_onnx::{external_data_files, load_model, load_model_from_bytes};

fn i64_tensor(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Int64 as i32),
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

fn sparse(dims: &[i64], values: &[f32], indices: TensorProto) -> SparseTensorProto {
    SparseTensorProto {
        values: Some(f32_tensor("s", &[values.len() as i64], values)),
        indices: Some(indices),
        dims: dims.to_vec(),
    }
}

fn sequence_type(elem: TypeProto) -> TypeProto {
    TypeProto {
        denotation: None,
        value: Some(type_proto::Value::SequenceType(Box::new(
            type_proto::Sequence {
                elem_type: Some(Box::new(elem)),
            },
        ))),
    }
}

fn optional_type(elem: TypeProto) -> TypeProto {
    TypeProto {
        denotation: None,
        value: Some(type_proto::Value::OptionalType(Box::new(
            type_proto::Optional {
                elem_type: Some(Box::new(elem)),
            },
        ))),
    }
}

/// A subgraph `out = Identity(k)` with its own initializer `k`.
fn branch(name: &str, value: f32) -> GraphProto {
    GraphProto {
        name: Some(name.into()),
        node: vec![node("Identity", "id", &["k"], &["out"])],
        output: vec![value_info("out", tensor_type(DataType::Float, None))],
        initializer: vec![f32_tensor("k", &[1], &[value])],
        ..Default::default()
    }
}

/// Two nodes: a custom-domain node carrying one attribute of every kind, then an Add reading
/// an inline initializer and one stored externally.
fn every_attribute_kind_model() -> samebits_onnx::proto::ModelProto {
    let attributes = vec![
        AttributeProto {
            f: Some(0.5),
            ..attribute("f", AttributeType::Float)
        },
        int_attribute("i", -7),
        AttributeProto {
            s: Some(b"same".to_vec()),
            ..attribute("s", AttributeType::String)
        },
        AttributeProto {
            t: Some(f32_tensor("t", &[2], &[1.0, 2.0])),
            ..attribute("t", AttributeType::Tensor)
        },
        AttributeProto {
            g: Some(branch("then", 1.0)),
            ..attribute("g", AttributeType::Graph)
        },
        AttributeProto {
            sparse_tensor: Some(sparse(&[4], &[9.0], i64_tensor("idx", &[1], &[2]))),
            ..attribute("sparse", AttributeType::SparseTensor)
        },
        AttributeProto {
            tp: Some(tensor_type(DataType::Int32, Some(&[D::Value(4)]))),
            ..attribute("tp", AttributeType::TypeProto)
        },
        AttributeProto {
            floats: vec![1.5, -2.5],
            ..attribute("floats", AttributeType::Floats)
        },
        AttributeProto {
            ints: vec![1, 2, 3],
            ..attribute("ints", AttributeType::Ints)
        },
        AttributeProto {
            strings: vec![b"a".to_vec(), b"bc".to_vec()],
            ..attribute("strings", AttributeType::Strings)
        },
        AttributeProto {
            tensors: vec![f32_tensor("", &[], &[3.0]), f32_tensor("", &[0], &[])],
            ..attribute("tensors", AttributeType::Tensors)
        },
        AttributeProto {
            graphs: vec![branch("a", 1.0), branch("b", 2.0)],
            ..attribute("graphs", AttributeType::Graphs)
        },
        AttributeProto {
            sparse_tensors: vec![sparse(
                &[2, 2],
                &[5.0, 6.0],
                i64_tensor("", &[2, 2], &[0, 1, 1, 0]),
            )],
            ..attribute("sparse_list", AttributeType::SparseTensors)
        },
        AttributeProto {
            type_protos: vec![sequence_type(tensor_type(DataType::Bool, None))],
            ..attribute("tps", AttributeType::TypeProtos)
        },
    ];
    let custom = samebits_onnx::proto::NodeProto {
        domain: Some("test.domain".into()),
        attribute: attributes,
        ..node("Everything", "every", &["x"], &["h"])
    };
    let add = samebits_onnx::proto::NodeProto {
        domain: Some("ai.onnx".into()),
        ..node("Add", "", &["h", "w", "e"], &["y"])
    };
    let x_type = tensor_type(
        DataType::Float,
        Some(&[D::Param("batch"), D::Value(3), D::Absent]),
    );
    let mut m = model(GraphProto {
        name: Some("main".into()),
        node: vec![custom, add],
        input: vec![value_info("x", x_type)],
        output: vec![value_info(
            "y",
            tensor_type(DataType::Float, Some(&[D::Absent])),
        )],
        value_info: vec![
            value_info("seq", sequence_type(tensor_type(DataType::Int64, None))),
            value_info(
                "opt",
                optional_type(tensor_type(DataType::Float16, Some(&[]))),
            ),
        ],
        initializer: vec![
            f32_tensor("w", &[3], &[1.0, 2.0, 3.0]),
            external_f32_tensor("e", &[2], &[("location", "weights.bin"), ("offset", "8")]),
        ],
        ..Default::default()
    });
    m.opset_import.push(opset("test.domain", 3));
    m.metadata_props
        .push(samebits_onnx::proto::StringStringEntryProto {
            key: Some("author".into()),
            value: Some("tests".into()),
        });
    m
}

fn floats(t: &Tensor) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

#[test]
fn two_node_model_with_every_attribute_kind_round_trips_into_the_ir() {
    let dir = tempfile::tempdir().unwrap();
    let weights: Vec<u8> = [0f32, 0.0, 10.0, 20.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(dir.path().join("weights.bin"), weights).unwrap();
    let proto = every_attribute_kind_model();
    let path = dir.path().join("model.onnx");
    std::fs::write(&path, proto.encode_to_vec()).unwrap();
    assert_eq!(
        external_data_files(&proto),
        vec![std::path::PathBuf::from("weights.bin")]
    );

    let imported = load_model(&path).unwrap();
    assert_eq!(imported.ir_version, 10);
    assert_eq!(imported.producer, "samebits-tests");
    assert_eq!(imported.opset(""), Some(17));
    assert_eq!(imported.opset("test.domain"), Some(3));
    assert_eq!(imported.metadata["author"], "tests");
    let g = &imported.graph;
    assert_eq!(g.name, "main");
    let x = g.inputs[0].ty.as_ref().unwrap();
    assert_eq!(x.dtype(), Some(DType::F32));
    let dims = &x.shape().unwrap().0;
    assert_eq!(dims[0], Dim::Symbol("batch".into()));
    assert_eq!(dims[1], Dim::Known(3));
    let Dim::Symbol(generated_x) = &dims[2] else {
        panic!("absent dim must become a symbol")
    };
    let Dim::Symbol(generated_y) = &g.outputs[0].ty.as_ref().unwrap().shape().unwrap().0[0] else {
        panic!("absent dim must become a symbol")
    };
    assert_ne!(generated_x, generated_y, "generated symbols are unique");
    assert_eq!(
        g.value_types["seq"],
        ValueType::Sequence(Box::new(ValueType::tensor(DType::I64, None)))
    );
    assert_eq!(
        g.value_types["opt"],
        ValueType::Optional(Box::new(ValueType::tensor(DType::F16, Some(Shape(vec![])))))
    );
    assert_eq!(floats(&g.initializers["w"]), [1.0, 2.0, 3.0]);
    assert_eq!(floats(&g.initializers["e"]), [10.0, 20.0]);

    assert_eq!(g.nodes.len(), 2);
    let every = &g.nodes[0];
    assert_eq!(
        (every.op_type.as_str(), every.domain.as_str()),
        ("Everything", "test.domain")
    );
    assert_eq!(every.inputs, ["x"]);
    let a = &every.attributes;
    assert_eq!(a.len(), 14);
    assert!(matches!(a["f"], Attribute::Float(v) if v == 0.5));
    assert!(matches!(a["i"], Attribute::Int(-7)));
    assert!(matches!(&a["s"], Attribute::String(s) if s == "same"));
    assert!(matches!(&a["t"], Attribute::Tensor(t) if floats(t) == [1.0, 2.0]));
    let Attribute::Graph(then) = &a["g"] else {
        panic!("g is a graph")
    };
    assert_eq!(then.name, "then");
    assert_eq!(then.nodes[0].op_type, "Identity");
    assert_eq!(floats(&then.initializers["k"]), [1.0]);
    assert!(matches!(&a["sparse"], Attribute::Tensor(t) if floats(t) == [0.0, 0.0, 9.0, 0.0]));
    assert_eq!(
        a["tp"].kind(),
        "type",
        "type attributes keep their kind ({:?})",
        a["tp"]
    );
    assert!(
        matches!(&a["tp"], Attribute::Type(t) if *t == ValueType::tensor(DType::I32, Some(Shape::known(&[4]))))
    );
    assert!(matches!(&a["floats"], Attribute::Floats(v) if *v == [1.5, -2.5]));
    assert!(matches!(&a["ints"], Attribute::Ints(v) if *v == [1, 2, 3]));
    assert!(matches!(&a["strings"], Attribute::Strings(v) if *v == ["a", "bc"]));
    let Attribute::Tensors(ts) = &a["tensors"] else {
        panic!("tensors")
    };
    assert_eq!((ts[0].shape(), floats(&ts[0])), (&[][..], vec![3.0]));
    assert_eq!(ts[1].shape(), &[0]);
    let Attribute::Graphs(gs) = &a["graphs"] else {
        panic!("graphs")
    };
    assert_eq!(floats(&gs[1].initializers["k"]), [2.0]);
    let Attribute::Tensors(dense) = &a["sparse_list"] else {
        panic!("sparse tensors densify into tensors")
    };
    assert_eq!(
        (dense[0].shape(), floats(&dense[0])),
        (&[2, 2][..], vec![0.0, 5.0, 6.0, 0.0])
    );
    assert!(
        matches!(&a["tps"], Attribute::Types(v) if v[0] == ValueType::Sequence(Box::new(ValueType::tensor(DType::Bool, None))))
    );
    let add = &g.nodes[1];
    assert_eq!((add.op_type.as_str(), add.domain.as_str()), ("Add", ""));
    assert_eq!(add.inputs, ["h", "w", "e"]);
    assert_eq!(add.outputs, ["y"]);
}

fn unsupported_message(proto: samebits_onnx::proto::ModelProto) -> String {
    let err = load_model_from_bytes(&proto.encode_to_vec(), None).unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    err.to_string()
}

#[test]
fn default_opsets_outside_1_to_27_are_refused_and_other_domains_kept() {
    for version in [0, 28] {
        let mut m = model(relu_graph(vec![]));
        m.opset_import[0].version = Some(version);
        let msg = unsupported_message(m);
        assert!(
            msg.contains(&format!("default-domain opset {version}")),
            "{msg}"
        );
    }
    let mut m = model(relu_graph(vec![]));
    m.opset_import = vec![opset("ai.onnx", 7), opset("com.example", 1000)];
    let imported = load_model_from_bytes(&m.encode_to_vec(), None).unwrap();
    assert_eq!(imported.opset(""), Some(7));
    assert_eq!(imported.opset("com.example"), Some(1000));
}

#[test]
fn attribute_references_outside_functions_and_unsupported_types_are_named() {
    let mut g = relu_graph(vec![]);
    g.node[0].attribute.push(AttributeProto {
        ref_attr_name: Some("alpha_ref".into()),
        ..attribute("alpha", AttributeType::Float)
    });
    let msg = unsupported_message(model(g));
    assert!(
        msg.contains("node Relu \"relu\": attribute \"alpha\": unsupported: attribute reference (ref_attr_name \"alpha_ref\")"),
        "{msg}"
    );

    let mut g = relu_graph(vec![]);
    g.input[0] = value_info("x", tensor_type(DataType::Complex64, None));
    let msg = unsupported_message(model(g));
    assert_eq!(
        msg,
        "<model bytes>: graph \"main\": input \"x\": unsupported data type COMPLEX64 (ONNX data type 14)"
    );

    let mut g = relu_graph(vec![]);
    let mut t = f32_tensor("c", &[1], &[]);
    t.data_type = Some(DataType::Complex128 as i32);
    t.raw_data = Some(vec![0; 16]);
    g.initializer.push(t);
    let msg = unsupported_message(model(g));
    assert!(
        msg.contains("initializer \"c\": unsupported data type COMPLEX128"),
        "{msg}"
    );
}

#[test]
fn sparse_initializers_densify_and_bad_indices_are_errors() {
    let mut g = relu_graph(vec![]);
    g.sparse_initializer
        .push(sparse(&[2, 3], &[1.0, 2.0], i64_tensor("", &[2], &[1, 5])));
    let imported = load_model_from_bytes(&model(g).encode_to_vec(), None).unwrap();
    let s = &imported.graph.initializers["s"];
    assert_eq!(s.shape(), &[2, 3]);
    assert_eq!(floats(s), [0.0, 1.0, 0.0, 0.0, 0.0, 2.0]);

    let mut g = relu_graph(vec![]);
    g.sparse_initializer
        .push(sparse(&[2, 3], &[1.0], i64_tensor("", &[1], &[6])));
    let err = load_model_from_bytes(&model(g).encode_to_vec(), None).unwrap_err();
    assert!(
        err.to_string()
            .contains("sparse initializer \"s\": sparse index out of range"),
        "{err}"
    );

    let mut g = relu_graph(vec![]);
    g.sparse_initializer.push(sparse(
        &[1 << 40, 1 << 20],
        &[1.0],
        i64_tensor("", &[1], &[0]),
    ));
    let err = load_model_from_bytes(&model(g).encode_to_vec(), None).unwrap_err();
    assert!(err.is_unsupported() && err.to_string().contains("densifies to more than"));
}

/// `Scaled(x) = Mul(x, Constant(value_float = alpha))` with `alpha` defaulting to 2.0, and
/// `Twice(x) = Scaled<alpha = beta>(Scaled(x))`, calling the first.
fn functions() -> Vec<FunctionProto> {
    let constant = samebits_onnx::proto::NodeProto {
        attribute: vec![AttributeProto {
            ref_attr_name: Some("alpha".into()),
            ..attribute("value_float", AttributeType::Float)
        }],
        ..node("Constant", "c", &[], &["k"])
    };
    let scaled = FunctionProto {
        name: Some("Scaled".into()),
        domain: Some("local".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        attribute_proto: vec![AttributeProto {
            f: Some(2.0),
            ..attribute("alpha", AttributeType::Float)
        }],
        node: vec![constant, node("Mul", "m", &["x", "k"], &["y"])],
        opset_import: vec![opset("", 17)],
        ..Default::default()
    };
    let call = |name: &str, input: &str, output: &str, attrs| samebits_onnx::proto::NodeProto {
        domain: Some("local".into()),
        attribute: attrs,
        ..node("Scaled", name, &[input], &[output])
    };
    let twice = FunctionProto {
        name: Some("Twice".into()),
        domain: Some("local".into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        attribute: vec!["beta".into()],
        node: vec![
            call("first", "a", "mid", vec![]),
            call(
                "second",
                "mid",
                "b",
                vec![AttributeProto {
                    ref_attr_name: Some("beta".into()),
                    ..attribute("alpha", AttributeType::Float)
                }],
            ),
        ],
        ..Default::default()
    };
    vec![scaled, twice]
}

#[test]
fn model_local_functions_are_inlined_with_attribute_substitution() {
    let call = samebits_onnx::proto::NodeProto {
        domain: Some("local".into()),
        attribute: vec![AttributeProto {
            f: Some(5.0),
            ..attribute("beta", AttributeType::Float)
        }],
        ..node("Twice", "outer", &["x"], &["y"])
    };
    let mut g = relu_graph(vec![]);
    g.node = vec![call];
    let mut m = model(g);
    m.opset_import.push(opset("local", 1));
    m.functions = functions();
    let imported = load_model_from_bytes(&m.encode_to_vec(), None).unwrap();
    let nodes = &imported.graph.nodes;
    let ops: Vec<_> = nodes.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(ops, ["Constant", "Mul", "Constant", "Mul"]);
    // The first call keeps the default alpha, the second gets beta = 5 through two references.
    assert!(matches!(nodes[0].attributes["value_float"], Attribute::Float(v) if v == 2.0));
    assert!(matches!(nodes[2].attributes["value_float"], Attribute::Float(v) if v == 5.0));
    assert_eq!(nodes[1].inputs[0], "x");
    assert_eq!(nodes[1].inputs[1], nodes[0].outputs[0]);
    assert_eq!(
        nodes[1].outputs[0], nodes[3].inputs[0],
        "the calls are chained"
    );
    assert_eq!(nodes[3].outputs, ["y"]);
    assert_ne!(
        nodes[0].outputs[0], nodes[2].outputs[0],
        "internal names are per call"
    );
    assert!(nodes[0].outputs[0] != "k" && nodes[1].outputs[0] != "mid");

    let recursive = FunctionProto {
        name: Some("Loop".into()),
        domain: Some("local".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        node: vec![samebits_onnx::proto::NodeProto {
            domain: Some("local".into()),
            ..node("Loop", "again", &["x"], &["y"])
        }],
        ..Default::default()
    };
    let mut g = relu_graph(vec![]);
    g.node = vec![samebits_onnx::proto::NodeProto {
        domain: Some("local".into()),
        ..node("Loop", "start", &["x"], &["y"])
    }];
    let mut m = model(g);
    m.functions = vec![recursive];
    let err = load_model_from_bytes(&m.encode_to_vec(), None).unwrap_err();
    assert!(
        err.is_unsupported() && err.to_string().contains("function \"Loop\""),
        "{err}"
    );
}

#[test]
fn function_calls_inside_subgraphs_are_inlined() {
    let mut body = branch("then", 1.0);
    body.node = vec![samebits_onnx::proto::NodeProto {
        domain: Some("local".into()),
        ..node("Scaled", "inner", &["k"], &["out"])
    }];
    let mut g = relu_graph(vec![]);
    g.node[0].attribute.push(AttributeProto {
        g: Some(body),
        ..attribute("then_branch", AttributeType::Graph)
    });
    let mut m = model(g);
    m.functions = functions();
    let imported = load_model_from_bytes(&m.encode_to_vec(), None).unwrap();
    let Attribute::Graph(then) = &imported.graph.nodes[0].attributes["then_branch"] else {
        panic!("graph attribute")
    };
    let ops: Vec<_> = then.nodes.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(ops, ["Constant", "Mul"]);
    assert_eq!(then.nodes[1].outputs, ["out"]);
}

/// Functions that each call the next twice expand exponentially: thirty levels, each within the
/// call-depth limit, would inline 2^30 nodes (this hung the importer and grew past 3 GB, issue
/// #21). The expansion stops at `SAMEBITS_MAX_FUNCTION_CALLS` (default 2^20) with an error.
#[test]
fn exponential_function_expansion_is_bounded() {
    let level = |k: usize| {
        let body = if k == 0 {
            vec![node("Identity", "id", &["x"], &["y"])]
        } else {
            let call = |name: &str, input: &str, output: &str| samebits_onnx::proto::NodeProto {
                domain: Some("local".into()),
                ..node(&format!("F{}", k - 1), name, &[input], &[output])
            };
            vec![call("a", "x", "t"), call("b", "t", "y")]
        };
        FunctionProto {
            name: Some(format!("F{k}")),
            domain: Some("local".into()),
            input: vec!["x".into()],
            output: vec!["y".into()],
            node: body,
            opset_import: vec![opset("", 17), opset("local", 1)],
            ..Default::default()
        }
    };
    let mut g = relu_graph(vec![]);
    g.node = vec![samebits_onnx::proto::NodeProto {
        domain: Some("local".into()),
        ..node("F30", "start", &["x"], &["y"])
    }];
    let mut m = model(g);
    m.opset_import.push(opset("local", 1));
    m.functions = (0..=30).map(level).collect();
    let err = load_model_from_bytes(&m.encode_to_vec(), None).unwrap_err();
    assert!(
        err.to_string().contains(
            "expand to more than 1048576 calls (the limit SAMEBITS_MAX_FUNCTION_CALLS sets)"
        ),
        "{err}"
    );
}

#[test]
fn opsets_1_to_6_import_with_their_own_attributes() {
    // An opset-1 style node: Add with the legacy `broadcast` / `axis` attributes and
    // `consumed_inputs` (opsets 1-5); the importer keeps every attribute for the op to read.
    for version in 1..=6 {
        let mut g = relu_graph(vec![]);
        let mut add = node("Add", "add", &["x", "x"], &["y"]);
        add.attribute = vec![
            int_attribute("broadcast", 1),
            int_attribute("axis", 0),
            AttributeProto {
                ints: vec![0, 0],
                ..attribute("consumed_inputs", AttributeType::Ints)
            },
        ];
        g.node = vec![add];
        let mut m = model(g);
        m.opset_import = vec![opset("", version)];
        let imported = load_model_from_bytes(&m.encode_to_vec(), None).unwrap();
        assert_eq!(imported.opset(""), Some(version));
        let add = &imported.graph.nodes[0];
        assert_eq!(add.op_type, "Add");
        assert!(matches!(
            add.attributes.get("broadcast"),
            Some(Attribute::Int(1))
        ));
        assert!(matches!(
            add.attributes.get("axis"),
            Some(Attribute::Int(0))
        ));
        assert!(matches!(
            add.attributes.get("consumed_inputs"),
            Some(Attribute::Ints(v)) if v == &[0, 0]
        ));
    }
}
