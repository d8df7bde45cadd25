//! A routing rule's domain and IP matchers built outside a config file: Xray's routing API
//! (skiff-app's `routing_api.rs`) adds rules at run time whose geoip/geosite entries name
//! lists by file and code, as a config's do. The lists are found and combined exactly as for
//! the config's own rules (`build/routing.rs`), so an added rule matches what the same rule in
//! the config file would.

use std::sync::Arc;

use crate::build::assets::process_asset_dirs;
use crate::build::geo_load::GeoLoader;
use crate::build::routing::combine_ips;
use crate::plan::{DomainEntry, DomainSet, IpEntry, IpMatcher};

/// The geoip/geosite files, found where the config's are (`SKIFF_LOCATION_ASSET`,
/// `XRAY_LOCATION_ASSET`, the executable's directory…) and read on first use; drop it to free
/// the files' bytes (the matchers built keep only what they need).
pub struct GeoLists(GeoLoader);

impl GeoLists {
    /// The process's asset directories, as the config used.
    pub fn new() -> GeoLists {
        GeoLists(GeoLoader::new(process_asset_dirs()))
    }

    /// Only `dirs` (tests).
    pub fn in_dirs(dirs: Vec<std::path::PathBuf>) -> GeoLists {
        GeoLists(GeoLoader::new(dirs))
    }
}

impl Default for GeoLists {
    fn default() -> GeoLists {
        GeoLists::new()
    }
}

/// The domains of `entries`, the lists they name loaded, in one matcher. An error names the
/// list that cannot be loaded or the expression that does not compile.
pub fn domain_set(entries: &[DomainEntry], geo: &mut GeoLists) -> Result<Arc<DomainSet>, String> {
    let mut domains = Vec::new();
    for entry in entries {
        match entry {
            DomainEntry::Custom(d) => domains.push(d.clone()),
            DomainEntry::Geosite { file, code, attrs } => {
                domains.extend(geo.0.site(file, code, attrs)?);
            }
        }
    }
    DomainSet::new(domains).map(Arc::new)
}

/// The IPs of `entries` (CIDRs and lists, each possibly negated) combined as Xray does.
pub fn ip_matcher(entries: &[IpEntry], geo: &mut GeoLists) -> Result<Arc<IpMatcher>, String> {
    let (mut plain, mut neg_cidrs, mut neg_lists) = (Vec::new(), None, None);
    for entry in entries {
        match entry {
            IpEntry::Cidr { cidr, negated } => {
                let to = if *negated {
                    neg_cidrs.get_or_insert_with(Vec::new)
                } else {
                    &mut plain
                };
                to.push((cidr.addr, cidr.prefix));
            }
            IpEntry::Geoip {
                file,
                code,
                negated,
            } => {
                let found = geo.0.ip(file, code)?;
                if *negated {
                    neg_lists.get_or_insert_with(Vec::new).extend(found);
                } else {
                    plain.extend(found);
                }
            }
        }
    }
    Ok(Arc::new(combine_ips(plain, neg_cidrs, neg_lists)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::routing::ip_entry;
    use crate::plan::{Domain, DomainKind};

    #[test]
    fn negated_cidrs_and_lists_combine_as_in_a_config() {
        let entries: Vec<IpEntry> = ["10.0.0.0/8", "!10.1.0.0/16"]
            .iter()
            .map(|t| ip_entry(t).unwrap())
            .collect();
        let m = ip_matcher(&entries, &mut GeoLists::in_dirs(vec![])).unwrap();
        assert_eq!(m.negated.len(), 1);
        assert!(m.plain.contains("10.2.0.1".parse().unwrap()));
    }

    #[test]
    fn a_missing_list_is_an_error_naming_it() {
        let entries = [DomainEntry::Geosite {
            file: "geosite.dat".into(),
            code: "GOOGLE".into(),
            attrs: vec![],
        }];
        let e = domain_set(&entries, &mut GeoLists::in_dirs(vec![])).unwrap_err();
        assert!(e.contains("geosite.dat"), "{e}");
        let ok = domain_set(
            &[DomainEntry::Custom(Domain {
                kind: DomainKind::Full,
                value: "a.test".into(),
            })],
            &mut GeoLists::in_dirs(vec![]),
        )
        .unwrap();
        assert!(ok.matches("a.test"));
    }
}
