//! Xray's gRPC API, served over a running Skiff: the services panels (3x-ui, Marzban,
//! Remnawave…) and `xray api` drive a core with, under Xray's package and service names so
//! that their clients need no change. The messages come from our .proto files in `proto/`,
//! written from Xray's published definitions (field numbers are the contract).

pub mod handler_config;
pub mod handler_service;
pub mod logger_service;
pub mod routing_service;
pub mod server;
pub mod stats_service;

/// The generated messages and service traits, by Xray's package names.
pub mod proto {
    pub mod stats {
        tonic::include_proto!("xray.app.stats.command");
    }
    pub mod log {
        tonic::include_proto!("xray.app.log.command");
    }

    /// Packages that refer to each other, nested by package name as prost's paths expect.
    pub mod xray {
        pub mod app {
            pub mod proxyman {
                tonic::include_proto!("xray.app.proxyman");
                pub mod command {
                    tonic::include_proto!("xray.app.proxyman.command");
                }
            }
            pub mod router {
                tonic::include_proto!("xray.app.router");
                pub mod command {
                    tonic::include_proto!("xray.app.router.command");
                }
            }
        }
        pub mod core {
            tonic::include_proto!("xray.core");
        }
        pub mod common {
            pub mod protocol {
                tonic::include_proto!("xray.common.protocol");
            }
            pub mod serial {
                tonic::include_proto!("xray.common.serial");
            }
            pub mod net {
                tonic::include_proto!("xray.common.net");
            }
            pub mod geodata {
                tonic::include_proto!("xray.common.geodata");
            }
        }
        pub mod proxy {
            tonic::include_proto!("xray.proxy");
        }
        pub mod transport {
            pub mod internet {
                tonic::include_proto!("xray.transport.internet");
                pub mod tls {
                    tonic::include_proto!("xray.transport.internet.tls");
                }
                pub mod websocket {
                    tonic::include_proto!("xray.transport.internet.websocket");
                }
                pub mod tcp {
                    tonic::include_proto!("xray.transport.internet.tcp");
                }
                pub mod httpupgrade {
                    tonic::include_proto!("xray.transport.internet.httpupgrade");
                }
                pub mod grpc {
                    pub mod encoding {
                        tonic::include_proto!("xray.transport.internet.grpc.encoding");
                    }
                }
                pub mod reality {
                    tonic::include_proto!("xray.transport.internet.reality");
                }
                pub mod headers {
                    pub mod http {
                        tonic::include_proto!("xray.transport.internet.headers.http");
                    }
                }
            }
        }
    }

    pub use xray::app::proxyman as receiver;
    pub use xray::app::proxyman::command as handler;
    pub use xray::app::router;
    pub use xray::app::router::command as routing;
    pub use xray::common::{geodata, net, protocol, serial};
    pub use xray::transport::internet as stream;
    pub use xray::{core, proxy};
}
