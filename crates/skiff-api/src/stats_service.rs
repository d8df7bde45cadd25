//! `xray.app.stats.command.StatsService` over Skiff's live counters
//! (`skiff_core::stats::Stats`), with Xray's semantics: a name not counted yet is NotFound,
//! `QueryStats` matches by substring, `reset` reads and zeroes in one step; the online calls
//! read the users' online maps (`skiff_core::online`).

use std::sync::Arc;
use std::time::Instant;

use skiff_core::Stats;
use tonic::{Request, Response, Status};

use crate::proto::stats::stats_service_server::StatsService;
use crate::proto::stats::{
    GetAllOnlineUsersRequest, GetAllOnlineUsersResponse, GetStatsOnlineIpListResponse,
    GetStatsRequest, GetStatsResponse, GetUsersStatsRequest, GetUsersStatsResponse, OnlineIpEntry,
    QueryStatsRequest, QueryStatsResponse, Stat, SysStatsRequest, SysStatsResponse,
    TrafficUserStat, UserStat,
};

pub struct StatsApi {
    stats: Arc<Stats>,
    started: Instant,
}

impl StatsApi {
    pub fn new(stats: Arc<Stats>) -> StatsApi {
        StatsApi {
            stats,
            started: Instant::now(),
        }
    }
}

fn value(counter: &skiff_core::Counter, reset: bool) -> i64 {
    let v = if reset { counter.take() } else { counter.get() };
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Xray's answer for a counter or online map that does not exist.
fn not_found(name: &str) -> Status {
    Status::not_found(format!("{name} not found."))
}

#[tonic::async_trait]
impl StatsService for StatsApi {
    async fn get_stats(
        &self,
        request: Request<GetStatsRequest>,
    ) -> Result<Response<GetStatsResponse>, Status> {
        let r = request.into_inner();
        let counter = self.stats.find(&r.name).ok_or_else(|| not_found(&r.name))?;
        Ok(Response::new(GetStatsResponse {
            stat: Some(Stat {
                value: value(&counter, r.reset),
                name: r.name,
            }),
        }))
    }

    /// How many distinct IPs the user is connected from; NotFound until a connection of the
    /// user has created the map (so always when `statsUserOnline` is off), as in Xray.
    async fn get_stats_online(
        &self,
        request: Request<GetStatsRequest>,
    ) -> Result<Response<GetStatsResponse>, Status> {
        let r = request.into_inner();
        let map = self
            .stats
            .online()
            .find(&r.name)
            .ok_or_else(|| not_found(&r.name))?;
        Ok(Response::new(GetStatsResponse {
            stat: Some(Stat {
                value: i64::try_from(map.count()).unwrap_or(i64::MAX),
                name: r.name,
            }),
        }))
    }

    async fn query_stats(
        &self,
        request: Request<QueryStatsRequest>,
    ) -> Result<Response<QueryStatsResponse>, Status> {
        let r = request.into_inner();
        let stat = self
            .stats
            .matching(&r.pattern)
            .into_iter()
            .map(|(name, counter)| Stat {
                value: value(&counter, r.reset),
                name,
            })
            .collect();
        Ok(Response::new(QueryStatsResponse { stat }))
    }

    /// Go's runtime figures have no Rust counterpart; Skiff reports its uptime, its tasks
    /// in place of goroutines, and the process's resident memory in place of the heap.
    async fn get_sys_stats(
        &self,
        _request: Request<SysStatsRequest>,
    ) -> Result<Response<SysStatsResponse>, Status> {
        let resident = resident_bytes();
        let tasks = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        Ok(Response::new(SysStatsResponse {
            num_goroutine: u32::try_from(tasks).unwrap_or(u32::MAX),
            alloc: resident,
            sys: resident,
            uptime: u32::try_from(self.started.elapsed().as_secs()).unwrap_or(u32::MAX),
            ..SysStatsResponse::default()
        }))
    }

    /// The user's online IPs, each with the Unix second a connection from it last arrived.
    async fn get_stats_online_ip_list(
        &self,
        request: Request<GetStatsRequest>,
    ) -> Result<Response<GetStatsOnlineIpListResponse>, Status> {
        let r = request.into_inner();
        let map = self
            .stats
            .online()
            .find(&r.name)
            .ok_or_else(|| not_found(&r.name))?;
        Ok(Response::new(GetStatsOnlineIpListResponse {
            ips: map.ips().into_iter().collect(),
            name: r.name,
        }))
    }

    /// The names (`user>>>EMAIL>>>online`) of the maps with at least one IP, sorted (Xray's
    /// order is its map's, which varies).
    async fn get_all_online_users(
        &self,
        _request: Request<GetAllOnlineUsersRequest>,
    ) -> Result<Response<GetAllOnlineUsersResponse>, Status> {
        let users = self
            .stats
            .online()
            .all()
            .into_iter()
            .filter(|(_, map)| map.count() > 0)
            .map(|(name, _)| name)
            .collect();
        Ok(Response::new(GetAllOnlineUsersResponse { users }))
    }

    /// Each user with online IPs, with its traffic counters when asked (read, and zeroed on
    /// `reset`, only for the users listed), sorted by email.
    async fn get_users_stats(
        &self,
        request: Request<GetUsersStatsRequest>,
    ) -> Result<Response<GetUsersStatsResponse>, Status> {
        let r = request.into_inner();
        let mut users = Vec::new();
        for (name, map) in self.stats.online().all() {
            let ips = map.ips();
            if ips.is_empty() {
                continue;
            }
            // user>>>EMAIL>>>online: the text between the first two separators.
            let rest = name.split_once(">>>").map_or("", |(_, rest)| rest);
            let email = rest.split_once(">>>").map_or(rest, |(email, _)| email);
            let traffic = r.include_traffic.then(|| {
                let read = |dir: &str| {
                    self.stats
                        .find(&format!("user>>>{email}>>>traffic>>>{dir}"))
                        .map_or(0, |c| value(&c, r.reset))
                };
                TrafficUserStat {
                    uplink: read("uplink"),
                    downlink: read("downlink"),
                }
            });
            users.push(UserStat {
                email: email.to_owned(),
                ips: ips
                    .into_iter()
                    .map(|(ip, last_seen)| OnlineIpEntry { ip, last_seen })
                    .collect(),
                traffic,
            });
        }
        Ok(Response::new(GetUsersStatsResponse { users }))
    }
}

/// The process's resident set size in bytes (Linux `/proc/self/statm`), 0 where unknown.
fn resident_bytes() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}
