//! Compiles the protos with protox, a pure Rust protobuf compiler, so no system `protoc` is
//! needed: `proto/cri/api.proto` (CRI runtime.v1 subset), `proto/grpc/health/v1/health.proto`
//! (the gRPC health protocol, for gRPC probes), `proto/ledgerlet/v1/ledger.proto` (the
//! ledger stream) and `proto/containerd/events/v1/events.proto` (containerd's task exits).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/cri/api.proto",
        "proto/grpc/health/v1/health.proto",
        "proto/ledgerlet/v1/ledger.proto",
        "proto/containerd/events/v1/events.proto",
    ];
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
