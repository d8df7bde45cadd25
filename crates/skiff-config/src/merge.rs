//! Merging several config files the way Xray does for `-c a.json -c b.json` and `-confdir`.
//!
//! Each file is parsed on its own first, so every item keeps its own file and path for
//! diagnostics; merging then works on those typed items. The rules, from Xray's
//! "Multiple configuration files" document (config/features/multiple.md) and its loader
//! (`Config.Override` in infra/conf/xray.go, the JSON loader in main/json):
//!
//! - The first file is taken as it is. Each later file is merged into the result so far.
//! - Top-level objects (`log`, `routing`, `policy`, `stats`, ...): a later file that has the
//!   key replaces the earlier value *as a whole*; nothing is merged inside. In particular
//!   routing rules of two files are not concatenated: the last file with a `routing` wins,
//!   rules, domainStrategy and all. A key that is absent (or `null`) changes nothing.
//! - `inbounds` of a later file, element by element: an inbound whose `tag` equals the tag of
//!   an inbound already in the result replaces it in place; otherwise it is appended. (Tags
//!   are compared as written, so an untagged inbound replaces the first untagged one — Xray
//!   does the same. An empty `inbounds: []` changes nothing.)
//! - `outbounds` of a later file, element by element: same-tag replaces in place; otherwise
//!   the outbound is *prepended* (the first outbound is the default route, and a later file
//!   usually means "use this one"), keeping the file's own order among the prepended ones —
//!   unless the file name contains `tail` (any case), in which case it is appended.
//!   Following Xray's document, "file name" is the last component of the path; Xray's code
//!   looks at the whole argument, which differs only when a directory name contains "tail".
//! - Within the first file nothing is replaced, so duplicate tags there are reported by the
//!   build step, as Xray reports them at startup.
//!
//! Load order (see `load_paths`): the `-c` files in command-line order, then the `*.json` /
//! `*.jsonc` files of `-confdir` sorted by name (Xray reads the directory after the flags and
//! `os.ReadDir` sorts by file name).

use std::path::Path;

use crate::diag::Diagnostic;
use crate::raw::bounds::{RawInbound, RawOutbound};
use crate::raw::dns::RawDns;
use crate::raw::top::{RawLog, RawPolicy, RawRouting};
use crate::raw::{Damage, Item, ParsedFile};

/// The effective config: what the build step validates.
#[derive(Debug, Default)]
pub struct Merged {
    pub log: Option<Item<RawLog>>,
    pub inbounds: Vec<Item<RawInbound>>,
    pub outbounds: Vec<Item<RawOutbound>>,
    pub routing: Option<Item<RawRouting>>,
    pub policy: Option<Item<RawPolicy>>,
    pub api: Option<Item<crate::raw::top::RawApi>>,
    pub metrics: Option<Item<crate::raw::top::RawMetrics>>,
    pub dns: Option<Item<RawDns>>,
    /// What failed to decode in any file.
    pub damage: Damage,
}

/// Merges files in load order. Replacing an item that came from the same file (possible only
/// in a later file that repeats a tag) is legal in Xray but almost surely a mistake, so it
/// gets a warning.
pub fn merge(files: Vec<ParsedFile>, diags: &mut Vec<Diagnostic>) -> Merged {
    let mut merged = Merged::default();
    for (i, file) in files.into_iter().enumerate() {
        merged.damage.absorb(file.damage);
        if file.log.is_some() {
            merged.log = file.log;
        }
        if file.routing.is_some() {
            merged.routing = file.routing;
        }
        if file.policy.is_some() {
            merged.policy = file.policy;
        }
        if file.api.is_some() {
            merged.api = file.api;
        }
        if file.metrics.is_some() {
            merged.metrics = file.metrics;
        }
        if file.dns.is_some() {
            merged.dns = file.dns;
        }
        if i == 0 {
            merged.inbounds = file.inbounds.unwrap_or_default();
            merged.outbounds = file.outbounds.unwrap_or_default();
            continue;
        }
        for inbound in file.inbounds.unwrap_or_default() {
            let tag = inbound.raw.tag.clone().unwrap_or_default();
            match merged
                .inbounds
                .iter_mut()
                .find(|x| x.raw.tag.clone().unwrap_or_default() == tag)
            {
                Some(slot) => {
                    warn_same_file(&slot.loc, &inbound.loc, "inbound", &tag, diags);
                    *slot = inbound;
                }
                None => merged.inbounds.push(inbound),
            }
        }
        let tail = is_tail(&file.file.name);
        let mut prepend = Vec::new();
        for outbound in file.outbounds.unwrap_or_default() {
            let tag = outbound.raw.tag.clone().unwrap_or_default();
            match merged
                .outbounds
                .iter_mut()
                .find(|x| x.raw.tag.clone().unwrap_or_default() == tag)
            {
                Some(slot) => {
                    warn_same_file(&slot.loc, &outbound.loc, "outbound", &tag, diags);
                    *slot = outbound;
                }
                None if tail => merged.outbounds.push(outbound),
                None => prepend.push(outbound),
            }
        }
        prepend.append(&mut merged.outbounds);
        merged.outbounds = prepend;
    }
    merged
}

/// Xray's rule: a file whose name contains "tail" appends new outbounds instead of
/// prepending them.
pub fn is_tail(name: &str) -> bool {
    let file_name = Path::new(name)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    file_name
        .unwrap_or_else(|| name.to_owned())
        .to_lowercase()
        .contains("tail")
}

fn warn_same_file(
    old: &crate::source::Loc,
    new: &crate::source::Loc,
    what: &str,
    tag: &str,
    diags: &mut Vec<Diagnostic>,
) {
    if std::rc::Rc::ptr_eq(&old.file, &new.file) {
        diags.push(new.warning(format!(
            "this {what} replaces the {what} tagged `{tag}` defined at {} (same tag in the same file)",
            old.position()
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::parse_file;

    fn merged(files: &[(&str, &str)]) -> (Merged, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let parsed = files
            .iter()
            .filter_map(|(name, text)| parse_file(name, text, &mut diags))
            .collect();
        let m = merge(parsed, &mut diags);
        (m, diags)
    }

    fn tags<T>(items: &[Item<T>], tag: impl Fn(&T) -> Option<String>) -> Vec<String> {
        items
            .iter()
            .map(|i| tag(&i.raw).unwrap_or_default())
            .collect()
    }

    fn out_tags(m: &Merged) -> Vec<String> {
        tags(&m.outbounds, |o| o.tag.clone())
    }

    fn in_tags(m: &Merged) -> Vec<String> {
        tags(&m.inbounds, |o| o.tag.clone())
    }

    #[test]
    fn inbounds_replace_by_tag_or_append() {
        let (m, diags) = merged(&[
            (
                "000.json",
                r#"{"inbounds": [{"tag": "socks", "port": 1234}, {"tag": "x", "port": 1}]}"#,
            ),
            ("001.json", r#"{"inbounds": [{"tag": "http", "port": 2}]}"#),
            (
                "002.json",
                r#"{"inbounds": [{"tag": "socks", "port": 4321}]}"#,
            ),
        ]);
        assert!(diags.is_empty());
        assert_eq!(in_tags(&m), ["socks", "x", "http"]);
        assert_eq!(
            m.inbounds[0].raw.port,
            Some(crate::raw::values::PortSpec::Number(4321.into()))
        );
        assert_eq!(m.inbounds[0].loc.file.name, "002.json");
    }

    #[test]
    fn outbounds_prepend_unless_tail() {
        let (m, _) = merged(&[
            ("01.json", r#"{"outbounds": [{"tag": "direct"}]}"#),
            ("02.json", r#"{"outbounds": [{"tag": "a"}, {"tag": "b"}]}"#),
            ("dir/03_TAIL.json", r#"{"outbounds": [{"tag": "z"}]}"#),
            (
                "04.json",
                r#"{"outbounds": [{"tag": "direct", "protocol": "blackhole"}]}"#,
            ),
        ]);
        assert_eq!(out_tags(&m), ["a", "b", "direct", "z"]);
        assert_eq!(m.outbounds[2].raw.protocol.as_deref(), Some("blackhole"));
    }

    #[test]
    fn top_level_objects_are_replaced_whole() {
        let (m, _) = merged(&[
            (
                "a.json",
                r#"{"log": {"loglevel": "debug", "access": "/tmp/a"},
                   "routing": {"domainStrategy": "IPOnDemand", "rules": [{"port": 1, "outboundTag": "x"}]}}"#,
            ),
            (
                "b.json",
                r#"{"log": {"loglevel": "error"}, "routing": {"rules": []}}"#,
            ),
            ("c.json", r#"{"log": null}"#),
        ]);
        let log = m.log.unwrap().raw;
        assert_eq!(log.loglevel.as_deref(), Some("error"));
        assert_eq!(
            log.access, None,
            "log is replaced, not merged field by field"
        );
        let routing = m.routing.unwrap().raw;
        assert_eq!(routing.domain_strategy, None);
        assert_eq!(
            routing.rules.map(|r| r.len()),
            Some(0),
            "rules are not concatenated"
        );
    }

    #[test]
    fn first_file_keeps_duplicates_and_later_same_file_duplicates_warn() {
        let (m, diags) = merged(&[
            ("a.json", r#"{"inbounds": [{"tag": "d"}, {"tag": "d"}]}"#),
            ("b.json", r#"{"inbounds": [{"tag": "n"}, {"tag": "n"}]}"#),
        ]);
        assert_eq!(in_tags(&m), ["d", "d", "n"]);
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].path, "inbounds[1]");
        assert!(diags[0].message.contains("b.json:1"));
    }

    #[test]
    fn tail_is_about_the_file_name() {
        assert!(is_tail("/etc/skiff/99-Tail.json"));
        assert!(is_tail("tail.json"));
        assert!(!is_tail("/home/tailor/01.json"));
    }
}
