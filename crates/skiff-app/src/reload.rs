//! Reloading the config into a running instance (`SIGHUP`): the new plan has been validated
//! whole by the time it gets here, and this applies it inbound by inbound without touching
//! what did not change.
//!
//! - An inbound whose settings are the same apart from its users keeps its listeners (and its
//!   connections); its user table is brought to the new list in place, the way the API's
//!   AlterInbound does it, so a removed user's connections close and nobody else notices.
//! - An inbound that is new is started; one that is gone stops listening (its connections
//!   finish, as with the API's RemoveInbound); one whose settings changed is both.
//! - Counters are found by name, so every counter of a kept or restarted inbound keeps
//!   counting from where it was.
//! - Outbounds are compared by tag: a new one is added, a gone one removed (connections routed
//!   to it are closed, as the API's RemoveOutbound does), a changed one replaced (connections
//!   it carries finish on the old one); an unchanged one is kept with its pools and sessions.
//!   Outbounds added through the API give way to the file.
//! - Routing rules and balancers are replaced whole (as the API's AddRule does) when they or
//!   the outbounds changed; connections already routed keep their outbound.
//! - Other sections that live in every connection's shared state (routing's domainStrategy,
//!   policy, dns, log, api, metrics) are compared, and a change to one of them is reported as
//!   needing a restart instead of being half applied.
//!
//! The new inbounds are built (every handler, certificates and keys parsed) and bound before
//! anything running is stopped: a failure there changes nothing. What can still fail after
//! that point is re-binding the address of a changed inbound, which then gets its old
//! settings back.

use std::collections::HashMap;
use std::fmt::{self, Debug, Write as _};
use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use skiff_config::{InboundPlan, InboundProtocol, Plan};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::inbound::InboundHandler;
use crate::instance::{BoundListener, Running, start_inbound};
use crate::users::InboundUsers;

/// How long a changed inbound waits for its old listening socket to close before giving up
/// on its address.
const REBIND_PATIENCE: Duration = Duration::from_secs(2);

/// What the instance runs now, in the form a reload compares.
pub(crate) struct Applied {
    /// By tag: the inbound's plan and the fingerprint of everything but its users.
    inbounds: HashMap<String, (InboundPlan, u64)>,
    /// The fingerprint of each section, by its config key.
    sections: Vec<(&'static str, u64)>,
    /// By tag: each outbound's fingerprint.
    outbounds: HashMap<String, u64>,
}

impl Applied {
    pub(crate) fn of(plan: &Plan) -> Applied {
        Applied {
            inbounds: plan
                .inbounds
                .iter()
                .map(|i| (i.tag.clone(), (i.clone(), listener_fingerprint(i))))
                .collect(),
            sections: sections(plan),
            outbounds: plan
                .outbounds
                .iter()
                .map(|o| (o.tag.clone(), fingerprint(o)))
                .collect(),
        }
    }
}

/// What a reload did to the outbounds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OutboundChanges {
    pub kept: usize,
    pub added: usize,
    pub replaced: usize,
    pub removed: usize,
}

/// What a reload did, for the log line that reports it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReloadSummary {
    pub inbounds_kept: usize,
    pub inbounds_added: usize,
    pub inbounds_restarted: usize,
    pub inbounds_removed: usize,
    pub users_added: usize,
    pub users_removed: usize,
    /// The number of routing rules now in force, when the reload replaced them.
    pub routing_rules: Option<usize>,
    /// When the outbounds changed and the reload applied them.
    pub outbounds: Option<OutboundChanges>,
    /// Config keys whose change needs a restart (`routing`, `outbounds`, …).
    pub not_applied: Vec<&'static str>,
}

impl fmt::Display for ReloadSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "inbounds: {} kept, {} added, {} restarted, {} removed; users: {} added, {} removed",
            self.inbounds_kept,
            self.inbounds_added,
            self.inbounds_restarted,
            self.inbounds_removed,
            self.users_added,
            self.users_removed
        )?;
        if let Some(o) = &self.outbounds {
            write!(
                f,
                "; outbounds: {} kept, {} added, {} replaced, {} removed",
                o.kept, o.added, o.replaced, o.removed
            )?;
        }
        if let Some(rules) = self.routing_rules {
            write!(f, "; routing: {rules} rules")?;
        }
        Ok(())
    }
}

/// An inbound whose listeners are bound and served.
struct StartedInbound {
    handler: Arc<InboundHandler>,
    listeners: Vec<BoundListener>,
    tasks: Vec<JoinHandle<()>>,
}

/// One inbound of the new plan and what happens to it.
enum Step<'p> {
    /// Same settings: its users are synced.
    Keep(&'p InboundPlan, Arc<InboundHandler>),
    /// New tag: started (already bound when the step is made).
    Add(StartedInbound),
    /// Same tag, other settings: stopped, then started with the new handler.
    Restart(&'p InboundPlan, Arc<InboundHandler>),
}

impl Running {
    /// Applies `plan` (already validated). On `Err` nothing changed, except as the message
    /// says when a changed inbound could not get its address back.
    pub async fn reload(&mut self, plan: &Plan) -> Result<ReloadSummary, String> {
        let mut summary = ReloadSummary::default();
        let system = &plan.policy.system;
        // Build and bind everything new first: a bad certificate or a port in use stops the
        // reload here, with nothing running changed.
        let mut steps = Vec::new();
        let undo = |steps: Vec<Step>| {
            for step in steps {
                if let Step::Add(started) = step {
                    started.tasks.iter().for_each(JoinHandle::abort);
                }
            }
        };
        for inbound in &plan.inbounds {
            let running = self.registry.handler(&inbound.tag);
            let same = self
                .applied
                .inbounds
                .get(&inbound.tag)
                .is_some_and(|(_, fp)| *fp == listener_fingerprint(inbound));
            match running {
                Some(handler) if same && can_sync_users(&handler, inbound) => {
                    steps.push(Step::Keep(inbound, handler));
                    continue;
                }
                _ => {}
            }
            let handler = match InboundHandler::build(inbound, &self.shared.stats, system) {
                Ok(h) => Arc::new(h),
                Err(e) => {
                    undo(steps);
                    return Err(format!("inbound `{}`: {e}", inbound.tag));
                }
            };
            if running.is_some() {
                steps.push(Step::Restart(inbound, handler));
                continue;
            }
            match self.start_one(inbound, handler) {
                Ok(started) => steps.push(Step::Add(started)),
                Err(e) => {
                    undo(steps);
                    return Err(e.to_string());
                }
            }
        }
        // From here on the new config is being applied.
        let wanted: Vec<&str> = plan.inbounds.iter().map(|i| i.tag.as_str()).collect();
        for tag in self.registry.tags() {
            if !wanted.contains(&tag.as_str()) {
                self.stop_inbound(&tag);
                summary.inbounds_removed += 1;
            }
        }
        let mut failures = Vec::new();
        for step in steps {
            match step {
                Step::Keep(inbound, handler) => {
                    let (added, removed) = sync_users(&handler, inbound);
                    summary.users_added += added;
                    summary.users_removed += removed;
                    summary.inbounds_kept += 1;
                }
                Step::Add(started) => {
                    summary.inbounds_added += 1;
                    self.register(plan_of(plan, &started), started);
                }
                Step::Restart(inbound, handler) => {
                    self.stop_inbound(&inbound.tag);
                    match self.rebind(inbound, handler, system).await {
                        Ok(started) => {
                            summary.inbounds_restarted += 1;
                            self.register(inbound, started);
                        }
                        Err(e) => failures.push(e),
                    }
                }
            }
        }
        let mut old_sections = std::mem::take(&mut self.applied.sections);
        let new_sections = sections(plan);
        let changed = |key: &str| {
            let find = |list: &[(&'static str, u64)]| list.iter().find(|s| s.0 == key).map(|s| s.1);
            find(&new_sections) != find(&old_sections)
        };
        let (outbounds_changed, routing_changed) = (changed("outbounds"), changed("routing"));
        // Outbounds first: the rules below are resolved against their tags.
        let mut outbounds_failure = None;
        if outbounds_changed {
            match self.reload_outbounds(plan) {
                Ok(changes) => {
                    info!(
                        kept = changes.kept,
                        added = changes.added,
                        replaced = changes.replaced,
                        removed = changes.removed,
                        "reload: outbounds changed"
                    );
                    summary.outbounds = Some(changes);
                    for (key, fp) in &mut old_sections {
                        if *key == "outbounds" {
                            *fp = fingerprint(&plan.outbounds);
                        }
                    }
                }
                Err(e) => outbounds_failure = Some(format!("outbounds are kept: {e}")),
            }
        }
        // Routing rules and balancers are swapped in whole, as the API's AddRule without
        // `append` does, when they or the outbounds they name changed (a balancer's selector
        // may take in a new outbound).
        let mut routing_failure = None;
        if (routing_changed || outbounds_changed) && outbounds_failure.is_none() {
            let routing = &plan.routing;
            match self
                .shared
                .router
                .add_rules(routing.rules.clone(), &routing.balancers, false)
            {
                Ok(()) => {
                    summary.routing_rules = Some(routing.rules.len());
                    info!(
                        rules = routing.rules.len(),
                        balancers = routing.balancers.len(),
                        "reload: routing rules replaced"
                    );
                    for (key, fp) in &mut old_sections {
                        if *key == "routing" {
                            *fp = fingerprint(&(&routing.rules, &routing.balancers));
                        }
                    }
                }
                Err(e) => routing_failure = Some(format!("routing keeps its rules: {e}")),
            }
        }
        summary.not_applied = new_sections
            .iter()
            .zip(&old_sections)
            .filter(|(new, old)| new.1 != old.1)
            .map(|(new, _)| new.0)
            .collect();
        // What runs is what the next reload compares against; sections not applied keep
        // their old fingerprints, so they are reported again until a restart.
        let mut applied = Applied::of(plan);
        applied.sections = old_sections;
        if summary.outbounds.is_none() {
            applied.outbounds = std::mem::take(&mut self.applied.outbounds);
        }
        for failed in &failures {
            // The inbound runs its old settings again (or nothing): compare against those.
            if let Some(old) = self.applied.inbounds.remove(&failed.0) {
                applied.inbounds.insert(failed.0.clone(), old);
            } else {
                applied.inbounds.remove(&failed.0);
            }
        }
        self.applied = applied;
        crate::memory::trim();
        crate::code_pages::release_startup_pages();
        let messages: Vec<String> = failures
            .into_iter()
            .map(|(_, message)| message)
            .chain(outbounds_failure)
            .chain(routing_failure)
            .collect();
        if messages.is_empty() {
            Ok(summary)
        } else {
            Err(messages.join("; "))
        }
    }

    /// Brings the outbounds table to `plan`'s outbounds, by tag: every new or changed one
    /// (and every one chained through another) is built first, so a failure changes nothing.
    fn reload_outbounds(&mut self, plan: &Plan) -> Result<OutboundChanges, String> {
        if plan.outbounds.iter().any(|o| o.tag.is_empty())
            || self.applied.outbounds.keys().any(String::is_empty)
        {
            return Err(
                "an outbound without a tag cannot be followed across a reload; \
                 the outbounds take effect at the next restart"
                    .into(),
            );
        }
        let shared = self.shared.clone();
        let wanted: Vec<&skiff_config::OutboundPlan> = plan
            .outbounds
            .iter()
            .filter(|o| {
                o.via.is_some() || self.applied.outbounds.get(&o.tag) != Some(&fingerprint(*o))
            })
            .collect();
        // Built from the whole list, so that a chain finds the outbound it goes through.
        let all = crate::outbounds::build(
            &plan.outbounds,
            &shared.stats,
            &shared.policy.system,
            shared.resolver.as_ref(),
        )?;
        let mut changes = OutboundChanges::default();
        // The file is the truth: outbounds it no longer has go, the API's included.
        for (tag, _) in shared.outbounds.listed() {
            if !plan.outbounds.iter().any(|o| *o.tag == *tag) && shared.outbounds.remove(&tag) {
                info!(outbound = %tag, "reload: outbound removed; connections routed to it are closed");
                changes.removed += 1;
            }
        }
        for handler in all {
            let Some(plan_of) = wanted.iter().find(|o| *o.tag == *handler.tag) else {
                changes.kept += 1;
                continue;
            };
            let listed_as = crate::handlers::xray_config_type(&plan_of.protocol);
            let tag = handler.tag.clone();
            if shared.outbounds.remove(&tag) {
                changes.replaced += 1;
            } else {
                changes.added += 1;
            }
            match shared.outbounds.add(handler, listed_as) {
                Ok(index) => shared.router.set_outbound_tag(index, &tag),
                Err(()) => warn!(outbound = %tag, "reload: the outbound could not be added"),
            }
        }
        if let Some(first) = plan.outbounds.first() {
            shared.outbounds.set_default(&first.tag);
        }
        Ok(changes)
    }

    fn start_one(
        &self,
        plan: &InboundPlan,
        handler: Arc<InboundHandler>,
    ) -> std::io::Result<StartedInbound> {
        let (listeners, tasks) = start_inbound(self.registry.context(), plan, &handler)?;
        Ok(StartedInbound {
            handler,
            listeners,
            tasks,
        })
    }

    /// Stops inbound `tag`'s listeners; its connections go on.
    fn stop_inbound(&mut self, tag: &str) {
        // Not registered (removed through the API since): nothing listens.
        self.registry.stop_inbound(tag);
        self.listeners.retain(|l| l.tag != tag);
        info!(inbound = %tag, "reload: stopped listening");
    }

    fn register(&mut self, plan: &InboundPlan, started: StartedInbound) {
        let aborts = started.tasks.iter().map(JoinHandle::abort_handle).collect();
        for l in &started.listeners {
            info!(inbound = %l.tag, protocol = l.protocol, "reload: listening on {}/{}", l.address, l.network);
        }
        self.registry.add_inbound(plan, started.handler, aborts);
        self.listeners.extend(started.listeners);
        self.tasks.extend(started.tasks);
    }

    /// Binds a changed inbound on the address its old listeners just gave up (their tasks
    /// close the sockets as they are dropped, on the runtime's time), or gives it its old
    /// settings back. The error carries the inbound's tag.
    async fn rebind(
        &mut self,
        inbound: &InboundPlan,
        handler: Arc<InboundHandler>,
        system: &skiff_config::SystemPolicy,
    ) -> Result<StartedInbound, (String, String)> {
        let deadline = tokio::time::Instant::now() + REBIND_PATIENCE;
        let error = loop {
            match self.start_one(inbound, handler.clone()) {
                Ok(started) => return Ok(started),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    if tokio::time::Instant::now() >= deadline {
                        break e;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => break e,
            }
        };
        let tag = inbound.tag.clone();
        let Some((old, _)) = self.applied.inbounds.get(&tag).cloned() else {
            return Err((tag.clone(), format!("inbound `{tag}` is stopped: {error}")));
        };
        let restored = match InboundHandler::build(&old, &self.shared.stats, system) {
            Ok(h) => self.start_one(&old, Arc::new(h)).ok(),
            Err(_) => None,
        };
        match restored {
            Some(started) => {
                self.register(&old, started);
                Err((
                    tag.clone(),
                    format!("inbound `{tag}` keeps its old settings: {error}"),
                ))
            }
            None => Err((tag.clone(), format!("inbound `{tag}` is stopped: {error}"))),
        }
    }
}

fn plan_of<'p>(plan: &'p Plan, started: &StartedInbound) -> &'p InboundPlan {
    plan.inbounds
        .iter()
        .find(|i| *i.tag == *started.handler.tag)
        .expect("a started inbound comes from the plan")
}

/// Whether `handler`'s users can be brought to `plan`'s in place: every user that would go
/// has an email to remove it by (Xray's rule for removal, which the close signal keys on).
fn can_sync_users(handler: &InboundHandler, plan: &InboundPlan) -> bool {
    let Some(users) = &handler.users else {
        return true;
    };
    let wanted = wanted_users(plan);
    users
        .list(None)
        .iter()
        .all(|u| !u.email.is_empty() || wanted.contains(u))
}

fn wanted_users(plan: &InboundPlan) -> Vec<skiff_api::handler_service::ApiUser> {
    InboundUsers::from_plan(&plan.protocol)
        .map(|u| u.list(None))
        .unwrap_or_default()
}

/// Removes the users `plan` no longer has (closing their connections) and adds the new
/// ones; a user whose account changed is both. Returns (added, removed).
fn sync_users(handler: &InboundHandler, plan: &InboundPlan) -> (usize, usize) {
    let Some(users) = &handler.users else {
        return (0, 0);
    };
    let wanted = wanted_users(plan);
    let current = users.list(None);
    let mut removed = 0;
    for user in current.iter().filter(|u| !wanted.contains(u)) {
        match users.remove(&handler.kind, &user.email) {
            Ok(()) => removed += 1,
            Err(e) => {
                warn!(inbound = %handler.tag, error = ?e, "reload: a user could not be removed")
            }
        }
    }
    let mut added = 0;
    for user in wanted.into_iter().filter(|u| !current.contains(u)) {
        match users.add(&handler.kind, user) {
            Ok(()) => added += 1,
            Err(e) => {
                warn!(inbound = %handler.tag, error = ?e, "reload: a user could not be added")
            }
        }
    }
    if added + removed > 0 {
        info!(inbound = %handler.tag, added, removed, "reload: users changed; removed users' connections are closed");
    }
    (added, removed)
}

/// A hash of an inbound's plan without its users: equal when the listeners, layers and
/// protocol settings would be built the same. Certificates and keys are hashed whole (the
/// plan's `Debug` shows only their lengths), so a renewed certificate restarts the inbound.
fn listener_fingerprint(plan: &InboundPlan) -> u64 {
    let mut without_users = plan.clone();
    let mut methods = Vec::new();
    match &mut without_users.protocol {
        InboundProtocol::Vless(v) => v.clients.clear(),
        InboundProtocol::Vmess(v) => v.clients.clear(),
        InboundProtocol::Trojan(t) => t.clients.clear(),
        InboundProtocol::Shadowsocks(ss) if ss.identity_key.is_some() => {
            methods = ss.users.iter().map(|u| u.method.name()).collect();
            methods.dedup();
            ss.users.clear();
        }
        // AEAD-2017: users of any 2017 method come and go in place.
        InboundProtocol::Shadowsocks(ss) if !ss.users.iter().any(|u| u.method.is_2022()) => {
            ss.users.clear();
        }
        _ => {}
    }
    let mut hash = FingerprintWriter(DefaultHasher::new());
    let _ = write!(hash, "{without_users:?}{methods:?}");
    if let skiff_config::StreamSecurity::Tls(tls) = &plan.stream.security {
        for cert in &tls.certificates {
            hash.0.write(cert.certificate_pem.as_bytes());
            hash.0.write(cert.key_pem.as_bytes());
        }
    }
    hash.0.finish()
}

/// The sections a reload compares but does not apply, each with its fingerprint, in a
/// fixed order.
fn sections(plan: &Plan) -> Vec<(&'static str, u64)> {
    let mut levels: Vec<_> = plan.policy.levels.iter().collect();
    levels.sort_by_key(|(level, _)| **level);
    vec![
        ("outbounds", fingerprint(&plan.outbounds)),
        (
            "routing.domainStrategy",
            fingerprint(&plan.routing.domain_strategy),
        ),
        (
            "routing",
            fingerprint(&(&plan.routing.rules, &plan.routing.balancers)),
        ),
        ("policy", fingerprint(&(levels, &plan.policy.system))),
        ("dns", fingerprint(&plan.dns)),
        ("log", fingerprint(&plan.log)),
        ("api", fingerprint(&plan.api)),
        ("metrics", fingerprint(&plan.metrics)),
    ]
}

/// A hash of a value's `Debug` text, fed to the hasher as it is written (a routing plan's
/// geosite lists would make a string of megabytes).
fn fingerprint(value: &impl Debug) -> u64 {
    let mut hash = FingerprintWriter(DefaultHasher::new());
    let _ = write!(hash, "{value:?}");
    hash.0.finish()
}

struct FingerprintWriter(DefaultHasher);

impl fmt::Write for FingerprintWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Plan {
        skiff_config::load_sources(&[skiff_config::Source {
            name: "test.json".into(),
            text: text.into(),
        }])
        .expect("valid config")
        .plan
    }

    const BASE: &str = r#"{"inbounds":[{"tag":"v","port":1,"protocol":"vless",
        "settings":{"clients":[{"id":"b831381d-6324-4d53-ad4f-8cda48b30811","email":"a@x"}],
        "decryption":"none"}}]}"#;

    #[test]
    fn users_do_not_change_the_listener_fingerprint() {
        let one = plan(BASE);
        let two = plan(&BASE.replace("a@x", "b@x"));
        assert_eq!(
            listener_fingerprint(&one.inbounds[0]),
            listener_fingerprint(&two.inbounds[0])
        );
    }

    #[test]
    fn the_port_changes_the_listener_fingerprint() {
        let one = plan(BASE);
        let two = plan(&BASE.replace("\"port\":1", "\"port\":2"));
        assert_ne!(
            listener_fingerprint(&one.inbounds[0]),
            listener_fingerprint(&two.inbounds[0])
        );
    }

    #[test]
    fn sections_are_stable_for_one_config() {
        let text = r#"{"policy":{"levels":{"0":{"handshake":4},"1":{"handshake":5},
            "2":{"handshake":6}}},"routing":{"rules":[{"type":"field","port":"53",
            "outboundTag":"direct"}]},"outbounds":[{"tag":"direct","protocol":"freedom"}]}"#;
        // The levels live in a HashMap: each plan orders them its own way.
        for _ in 0..8 {
            assert_eq!(sections(&plan(text)), sections(&plan(text)));
        }
        let other = text.replace("\"53\"", "\"54\"");
        let changed: Vec<_> = sections(&plan(text))
            .into_iter()
            .zip(sections(&plan(&other)))
            .filter(|(a, b)| a != b)
            .map(|(a, _)| a.0)
            .collect();
        assert_eq!(changed, ["routing"]);
    }
}
