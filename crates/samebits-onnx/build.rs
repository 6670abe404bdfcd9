//! Generates the ONNX protobuf types from the vendored schema in `proto/` with prost-build,
//! parsing the `.proto` files with protox (pure Rust, no `protoc` needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/onnx.proto", "proto/onnx-data.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(protos, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
