//! The DNS module as routing and freedom see it: hosts first, then the servers in Xray's
//! order (those whose `domains` match, then the rest unless fallback is off), each answer
//! filtered by the server's `expectIPs`, answers cached for their TTL.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use skiff_core::{BoxFuture, Family, Resolve};
use skiff_geodata::{DomainSet, IpMatcher};

use crate::cache::{Cache, DEFAULT_CAPACITY};
use crate::config::{DnsConfig, HostValue, IpFilter, QueryStrategy, ServerConfig};
use crate::error::DnsError;
use crate::hosts::{Hosts, MAX_ALIAS_DEPTH};
use crate::upstream::Upstream;
use crate::upstream::tls::TlsRoots;

struct Server {
    /// For logs: the configured address, never a query or an answer.
    label: String,
    upstream: Upstream,
    domains: Option<Arc<DomainSet>>,
    expect: Option<IpFilter>,
    unexpected: Option<IpFilter>,
    skip_fallback: bool,
    strategy: QueryStrategy,
    client_ip: Option<IpAddr>,
    timeout: Duration,
    cached: bool,
    final_query: bool,
}

pub struct Resolver {
    hosts: Hosts,
    servers: Vec<Server>,
    cache: Option<Cache>,
    strategy: QueryStrategy,
    disable_fallback: bool,
    disable_fallback_if_match: bool,
}

impl Resolver {
    /// Builds the resolver; fails only when a DoH/DoT server has no CA to check it against.
    pub fn new(config: DnsConfig, roots: &TlsRoots) -> Result<Resolver, String> {
        let servers = config
            .servers
            .into_iter()
            .map(|s| server(s, config.client_ip, roots))
            .collect::<Result<_, _>>()?;
        Ok(Resolver {
            hosts: Hosts::new(config.hosts),
            servers,
            cache: (!config.disable_cache).then(|| Cache::new(DEFAULT_CAPACITY)),
            strategy: config.query_strategy,
            disable_fallback: config.disable_fallback,
            disable_fallback_if_match: config.disable_fallback_if_match,
        })
    }

    /// The addresses of `name` of the wanted family.
    pub async fn lookup(&self, name: &str, family: Family) -> Result<Vec<IpAddr>, DnsError> {
        let mut name = name.trim_end_matches('.').to_ascii_lowercase();
        if name.is_empty() {
            return Err(DnsError::BadName(name));
        }
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let family = self.strategy.narrow(family).ok_or(DnsError::Empty)?;
        for _ in 0..=MAX_ALIAS_DEPTH {
            match self.hosts.lookup(&name) {
                Some(HostValue::Ips(ips)) => {
                    let ips: Vec<IpAddr> = ips.into_iter().filter(|ip| family.admits(ip)).collect();
                    tracing::debug!(%name, count = ips.len(), "DNS: answered from hosts");
                    return if ips.is_empty() {
                        Err(DnsError::Empty)
                    } else {
                        Ok(ips)
                    };
                }
                Some(HostValue::Alias(alias)) => {
                    tracing::debug!(%name, %alias, "DNS: hosts alias");
                    name = alias;
                }
                None => break,
            }
        }
        if self.servers.is_empty() {
            return system_lookup(&name, family).await;
        }
        let mut last = DnsError::Empty;
        for index in self.order(&name) {
            let server = &self.servers[index];
            let Some(family) = server.strategy.narrow(family) else {
                continue;
            };
            match self
                .ask(index, &name, family)
                .await
                .and_then(|ips| filter(server, ips))
            {
                Ok(ips) => return Ok(ips),
                Err(e) => {
                    tracing::debug!(%name, server = %server.label, "DNS: {e}");
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// Xray's server order: servers whose `domains` match the name first (in config order),
    /// then every other server without `skipFallback`, unless fallback is disabled; a
    /// `finalQuery` server ends the list. With nothing in it, the first server.
    fn order(&self, name: &str) -> Vec<usize> {
        let mut order = Vec::new();
        for (i, s) in self.servers.iter().enumerate() {
            if s.domains.as_ref().is_some_and(|d| d.matches(name)) {
                order.push(i);
                if s.final_query {
                    return order;
                }
            }
        }
        let matched = !order.is_empty();
        if !(self.disable_fallback || self.disable_fallback_if_match && matched) {
            for (i, s) in self.servers.iter().enumerate() {
                if !s.skip_fallback && !order.contains(&i) {
                    order.push(i);
                    if s.final_query {
                        return order;
                    }
                }
            }
        }
        if order.is_empty() {
            order.push(0);
        }
        order
    }

    /// One server's answer for the family: A and AAAA asked at once when both are wanted.
    async fn ask(&self, index: usize, name: &str, family: Family) -> Result<Vec<IpAddr>, DnsError> {
        match family {
            Family::V4 => self.ask_type(index, name, false).await,
            Family::V6 => self.ask_type(index, name, true).await,
            Family::Any => {
                let (v4, v6) = tokio::join!(
                    self.ask_type(index, name, false),
                    self.ask_type(index, name, true)
                );
                match (v4, v6) {
                    (Ok(mut a), Ok(b)) => {
                        a.extend(b);
                        Ok(a)
                    }
                    (Ok(a), Err(_)) | (Err(_), Ok(a)) => Ok(a),
                    (Err(e), Err(_)) => Err(e),
                }
            }
        }
    }

    async fn ask_type(&self, index: usize, name: &str, v6: bool) -> Result<Vec<IpAddr>, DnsError> {
        let server = &self.servers[index];
        let cache = self.cache.as_ref().filter(|_| server.cached);
        if let Some(cache) = cache
            && let Some(ips) = cache.get(index, name, v6, Instant::now())
        {
            return Ok(ips);
        }
        let answer = tokio::time::timeout(
            server.timeout,
            server
                .upstream
                .exchange(name, v6, server.client_ip, server.timeout),
        )
        .await
        .map_err(|_| DnsError::Timeout {
            after: server.timeout,
            wrong_ids: 0,
        })??;
        if let Some(cache) = cache {
            cache.insert(index, name, v6, &answer.ips, answer.ttl, Instant::now());
        }
        Ok(answer.ips)
    }
}

fn server(
    config: ServerConfig,
    client_ip: Option<IpAddr>,
    roots: &TlsRoots,
) -> Result<Server, String> {
    Ok(Server {
        label: format!("{:?}", config.endpoint),
        upstream: Upstream::new(&config.endpoint, roots)?,
        domains: config.domains,
        expect: config.expect_ips,
        unexpected: config.unexpected_ips,
        skip_fallback: config.skip_fallback,
        strategy: config.query_strategy,
        client_ip: config.client_ip.or(client_ip),
        timeout: config.timeout,
        cached: !config.disable_cache,
        final_query: config.final_query,
    })
}

/// `expectIPs` keeps the matching addresses, `unexpectedIPs` drops them; with Xray's `"*"`
/// (prefer) a filter that would leave nothing is not applied. Nothing left is a failure, so
/// the next server is asked.
fn filter(server: &Server, ips: Vec<IpAddr>) -> Result<Vec<IpAddr>, DnsError> {
    if ips.is_empty() {
        return Err(DnsError::Empty);
    }
    let mut ips = ips;
    for (f, keep) in [(&server.expect, true), (&server.unexpected, false)] {
        if let Some(f) = f {
            ips = apply(&f.set, ips, keep, f.prefer);
        }
    }
    if ips.is_empty() {
        Err(DnsError::Empty)
    } else {
        Ok(ips)
    }
}

fn apply(set: &IpMatcher, ips: Vec<IpAddr>, keep: bool, prefer: bool) -> Vec<IpAddr> {
    let kept: Vec<IpAddr> = ips
        .iter()
        .copied()
        .filter(|ip| set.matches(*ip) == keep)
        .collect();
    if prefer && kept.is_empty() { ips } else { kept }
}

async fn system_lookup(name: &str, family: Family) -> Result<Vec<IpAddr>, DnsError> {
    let lookup = tokio::net::lookup_host((name, 0));
    let found = tokio::time::timeout(crate::config::DEFAULT_TIMEOUT, lookup)
        .await
        .map_err(|_| DnsError::Timeout {
            after: crate::config::DEFAULT_TIMEOUT,
            wrong_ids: 0,
        })??;
    let ips: Vec<IpAddr> = found
        .map(|sa| sa.ip())
        .filter(|ip| family.admits(ip))
        .collect();
    if ips.is_empty() {
        Err(DnsError::Empty)
    } else {
        Ok(ips)
    }
}

impl Resolve for Resolver {
    fn lookup<'a>(
        &'a self,
        name: &'a str,
        family: Family,
    ) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            Resolver::lookup(self, name, family)
                .await
                .map_err(io::Error::from)
        })
    }
}
