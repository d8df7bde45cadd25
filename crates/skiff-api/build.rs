//! Compiles Xray's API protos (written for Skiff in proto/) into the gRPC server code.
//! Needs `protoc` (Debian: protobuf-compiler), or PROTOC naming one.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/app/stats/command/command.proto",
        "proto/app/log/command/config.proto",
    ];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    tonic_prost_build::configure()
        .build_client(false)
        .compile_protos(&protos, &["proto"])?;
    Ok(())
}
