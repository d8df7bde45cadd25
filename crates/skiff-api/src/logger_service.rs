//! `xray.app.log.command.LoggerService`: RestartLogger reopens the log files (what a
//! logrotate `postrotate` asks for), through the hook the app gives.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::proto::log::logger_service_server::LoggerService;
use crate::proto::log::{RestartLoggerRequest, RestartLoggerResponse};

/// Reopens the log outputs; an error is reported to the caller as Xray does.
pub type RestartLogger = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

pub struct LoggerApi {
    pub restart: RestartLogger,
}

#[tonic::async_trait]
impl LoggerService for LoggerApi {
    async fn restart_logger(
        &self,
        _request: Request<RestartLoggerRequest>,
    ) -> Result<Response<RestartLoggerResponse>, Status> {
        (self.restart)().map_err(Status::internal)?;
        Ok(Response::new(RestartLoggerResponse {}))
    }
}
