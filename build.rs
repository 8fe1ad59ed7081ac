//! Compiles `proto/cri/api.proto` (CRI runtime.v1 subset) and
//! `proto/grpc/health/v1/health.proto` (the gRPC health protocol, for gRPC probes) with
//! protox, a pure Rust protobuf compiler, so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/cri/api.proto", "proto/grpc/health/v1/health.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let fds = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
