//! Where a REALITY inbound sends what is not its own: `realitySettings.target` dialed the
//! way fallbacks dial (TCP, unix path, abstract socket), with the PROXY protocol header
//! first when `xver` asks for one.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use skiff_config::{RealityServerPlan, RealityTarget};
use skiff_core::{BoxFuture, BoxStream};
use skiff_proto::fallback::Destination;
use skiff_proto::proxy_protocol;
use skiff_transport::reality::{RealityServer, RealityServerOptions, TargetDialer};
use tokio::io::AsyncWriteExt;

struct Target {
    dest: Destination,
    xver: u8,
}

impl TargetDialer for Target {
    fn dial<'a>(
        &'a self,
        source: Option<SocketAddr>,
        local: Option<SocketAddr>,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let mut stream = crate::fallback::dial(&self.dest).await?;
            if self.xver > 0 {
                let mut header = Vec::with_capacity(64);
                proxy_protocol::encode_xver(self.xver, source.zip(local), &mut header);
                stream.write_all(&header).await?;
            }
            Ok(stream)
        })
    }
}

/// The inbound's REALITY layer from its plan.
pub fn server(plan: &RealityServerPlan, show: bool) -> Result<RealityServer, String> {
    let dest = match &plan.target {
        RealityTarget::Tcp { host, port } => Destination::Addr(host.clone(), *port),
        RealityTarget::Unix(path) if path.starts_with('@') => {
            Destination::AbstractUnix(path.clone())
        }
        RealityTarget::Unix(path) => Destination::Unix(PathBuf::from(path)),
    };
    let options = RealityServerOptions {
        server_names: plan.server_names.clone(),
        private_key: plan.private_key,
        min_client_ver: Some(plan.min_client_ver),
        max_client_ver: plan.max_client_ver,
        max_time_diff: (plan.max_time_diff_ms > 0)
            .then(|| std::time::Duration::from_millis(plan.max_time_diff_ms)),
        short_ids: plan.short_ids.clone(),
        show,
    };
    RealityServer::new(
        options,
        Arc::new(Target {
            dest,
            xver: plan.xver,
        }),
    )
}
