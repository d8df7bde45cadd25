//! Compiles Xray's API protos (written for Skiff in proto/) into the gRPC server code.
//! Needs `protoc` (Debian: protobuf-compiler), or PROTOC naming one.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/app/stats/command/command.proto",
        "proto/app/log/command/config.proto",
        "proto/app/proxyman/command/command.proto",
        "proto/proxy/accounts.proto",
        "proto/app/proxyman/config.proto",
        "proto/proxy/handlers.proto",
        "proto/transport/internet/tls/config.proto",
        "proto/transport/internet/websocket/config.proto",
        "proto/transport/internet/tcp/config.proto",
        "proto/transport/internet/httpupgrade/config.proto",
        "proto/transport/internet/grpc/config.proto",
        "proto/transport/internet/headers/http.proto",
        "proto/transport/internet/reality/config.proto",
        "proto/app/router/command/command.proto",
        "proto/app/router/config.proto",
    ];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    for p in [
        "proto/common/protocol/user.proto",
        "proto/common/serial/typed_message.proto",
        "proto/core/config.proto",
        "proto/common/net/net.proto",
        "proto/common/protocol/server_spec.proto",
        "proto/transport/internet/config.proto",
        "proto/common/geodata/geodat.proto",
    ] {
        println!("cargo:rerun-if-changed={p}");
    }
    tonic_prost_build::configure()
        .build_client(false)
        .compile_protos(&protos, &["proto"])?;
    Ok(())
}
