//! The API's gRPC server: one router over the services, served on a TCP listener (the `api`
//! object's `listen`) or on connections the app hands in (Xray's older form: a
//! dokodemo-door inbound routed to the `api` tag).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use skiff_core::Stats;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::codegen::http::{Request, Response};
use tonic::server::NamedService;
use tonic::transport::server::{Connected, TcpIncoming};

use crate::handler_service::{HandlerApi, Handlers};
use crate::logger_service::{LoggerApi, RestartLogger};
use crate::proto::handler::handler_service_server::HandlerServiceServer;
use crate::proto::log::logger_service_server::LoggerServiceServer;
use crate::proto::routing::routing_service_server::RoutingServiceServer;
use crate::proto::stats::stats_service_server::StatsServiceServer;
use crate::routing_service::{Routing, RoutingApi};
use crate::stats_service::StatsApi;

/// What the services work on.
pub struct ApiContext {
    pub stats: Arc<Stats>,
    pub restart_logger: RestartLogger,
    pub handlers: Arc<dyn Handlers>,
    pub routing: Arc<dyn Routing>,
}

/// The services the config's `api.services` names (Xray's names: `StatsService`,
/// `LoggerService`, …), routed by their gRPC path.
#[derive(Clone)]
pub struct ApiRouter {
    stats: Option<StatsServiceServer<StatsApi>>,
    logger: Option<LoggerServiceServer<LoggerApi>>,
    handler: Option<HandlerServiceServer<HandlerApi>>,
    routing: Option<RoutingServiceServer<RoutingApi>>,
}

/// The services Skiff has, by the names `api.services` uses.
pub const SERVICES: &[&str] = &[
    "StatsService",
    "LoggerService",
    "HandlerService",
    "RoutingService",
];

impl ApiRouter {
    pub fn new(context: ApiContext, services: &[String]) -> ApiRouter {
        let wants = |name: &str| services.iter().any(|s| s == name);
        ApiRouter {
            stats: wants("StatsService")
                .then(|| StatsServiceServer::new(StatsApi::new(context.stats))),
            logger: wants("LoggerService").then(|| {
                LoggerServiceServer::new(LoggerApi {
                    restart: context.restart_logger,
                })
            }),
            handler: wants("HandlerService")
                .then(|| HandlerServiceServer::new(HandlerApi::new(context.handlers))),
            routing: wants("RoutingService")
                .then(|| RoutingServiceServer::new(RoutingApi::new(context.routing))),
        }
    }
}

type BoxResponse = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

/// `/PACKAGE.SERVICE/METHOD` belongs to `S` when it starts with `/S::NAME/`.
fn routes_to<S: NamedService>(path: &str) -> bool {
    path.strip_prefix('/')
        .and_then(|p| p.strip_prefix(S::NAME))
        .is_some_and(|rest| rest.starts_with('/'))
}

impl Service<Request<Body>> for ApiRouter {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxResponse;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Each generated service is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> BoxResponse {
        let path = request.uri().path().to_owned();
        if let Some(svc) = self.stats.as_mut()
            && routes_to::<StatsServiceServer<StatsApi>>(&path)
        {
            return Box::pin(svc.call(request));
        }
        if let Some(svc) = self.logger.as_mut()
            && routes_to::<LoggerServiceServer<LoggerApi>>(&path)
        {
            return Box::pin(svc.call(request));
        }
        if let Some(svc) = self.handler.as_mut()
            && routes_to::<HandlerServiceServer<HandlerApi>>(&path)
        {
            return Box::pin(svc.call(request));
        }
        if let Some(svc) = self.routing.as_mut()
            && routes_to::<RoutingServiceServer<RoutingApi>>(&path)
        {
            return Box::pin(svc.call(request));
        }
        // What grpc-go answers for a service it does not have.
        let status = tonic::Status::unimplemented(format!("unknown service or method {path}"));
        Box::pin(async move { Ok(status.into_http()) })
    }
}

/// Serves the API on `listener` until the task is dropped.
pub async fn serve_tcp(router: ApiRouter, listener: TcpListener) -> io::Result<()> {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .serve_with_incoming(router, incoming)
        .await
        .map_err(io::Error::other)
}

/// Connections the app routes to the API (the dokodemo-door form).
pub struct ApiConnections(mpsc::Receiver<DuplexStream>);

/// Where the app hands connections routed to the API tag: each is one end of a pipe whose
/// other end the server speaks gRPC on.
#[derive(Clone)]
pub struct ApiDoor(mpsc::Sender<DuplexStream>);

impl ApiDoor {
    /// A new in-memory connection to the API, or None once the server is gone.
    pub async fn open(&self) -> Option<DuplexStream> {
        let (ours, theirs) = tokio::io::duplex(64 << 10);
        self.0.send(theirs).await.ok()?;
        Some(ours)
    }
}

/// A door and the connections coming through it.
pub fn door() -> (ApiDoor, ApiConnections) {
    let (tx, rx) = mpsc::channel(64);
    (ApiDoor(tx), ApiConnections(rx))
}

/// Serves the API on connections from the door until every door is dropped.
pub async fn serve_door(router: ApiRouter, connections: ApiConnections) -> io::Result<()> {
    tonic::transport::Server::builder()
        .serve_with_incoming(router, connections)
        .await
        .map_err(io::Error::other)
}

impl tonic::codegen::tokio_stream::Stream for ApiConnections {
    type Item = Result<PipeEnd, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|end| end.map(|e| Ok(PipeEnd(e))))
    }
}

/// The server's end of an in-memory API connection.
pub struct PipeEnd(DuplexStream);

impl Connected for PipeEnd {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for PipeEnd {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for PipeEnd {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
