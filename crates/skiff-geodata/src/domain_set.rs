//! The domain matcher one routing rule uses, for its own `domain` entries and the geosite
//! lists it names alike. Full names and suffixes are hash lookups (one per label of the
//! name, however many rules); keywords and regular expressions are checked one by one as in
//! Xray, the expressions as one `RegexSet` (a single pass over the name).

use std::collections::HashSet;

use regex::bytes::{RegexSet, RegexSetBuilder};

use crate::site::{Domain, DomainKind};

#[derive(Debug, Default)]
pub struct DomainSet {
    full: HashSet<Box<str>>,
    suffix: HashSet<Box<str>>,
    plain: Vec<Box<str>>,
    regex: Option<RegexSet>,
}

/// Whether `pattern` is a regular expression a [`DomainSet`] accepts; the error says why not.
pub fn check_regex(pattern: &str) -> Result<(), String> {
    build_set(&[pattern])
        .map(drop)
        .map_err(|e| format!("invalid regular expression `{pattern}`: {e}"))
}

/// Expressions as Go's regexp reads them for domain names: `\w`, `\d`, `\s` and `\b` are
/// ASCII classes (Go's are), matched over the name's bytes. Leaving out Unicode is also what
/// keeps the compiled set small: Unicode classes made one simple expression cost about
/// 600 KiB of memory, and geosite's `geolocation-!cn` holds some 160 of them.
fn build_set<S: AsRef<str>>(patterns: &[S]) -> Result<RegexSet, regex::Error> {
    RegexSetBuilder::new(patterns).unicode(false).build()
}

impl DomainSet {
    /// Builds the set. Plain, suffix and full values are lower-cased (Xray does the same);
    /// expressions are kept as written. Duplicates cost nothing.
    pub fn new(domains: impl IntoIterator<Item = Domain>) -> Result<DomainSet, String> {
        let mut set = DomainSet::default();
        let mut patterns = Vec::new();
        for Domain { kind, value } in domains {
            match kind {
                DomainKind::Regex => patterns.push(value),
                DomainKind::Full => {
                    set.full.insert(value.to_ascii_lowercase().into());
                }
                DomainKind::Suffix => {
                    set.suffix.insert(value.to_ascii_lowercase().into());
                }
                DomainKind::Plain => {
                    let v: Box<str> = value.to_ascii_lowercase().into();
                    if !set.plain.contains(&v) {
                        set.plain.push(v);
                    }
                }
            }
        }
        patterns.sort_unstable();
        patterns.dedup();
        if !patterns.is_empty() {
            match build_set(&patterns) {
                Ok(r) => set.regex = Some(r),
                Err(e) => {
                    for p in &patterns {
                        check_regex(p)?;
                    }
                    return Err(format!("invalid regular expressions: {e}"));
                }
            }
        }
        set.full.shrink_to_fit();
        set.suffix.shrink_to_fit();
        set.plain.shrink_to_fit();
        Ok(set)
    }

    /// Whether `name` (lower-case, as routing passes it) matches any entry.
    pub fn matches(&self, name: &str) -> bool {
        if self.full.contains(name) || self.suffix_matches(name) {
            return true;
        }
        if self.plain.iter().any(|p| name.contains(&**p)) {
            return true;
        }
        self.regex
            .as_ref()
            .is_some_and(|r| r.is_match(name.as_bytes()))
    }

    /// `domain:x` matches `x` and any name ending in `.x`: try the name and every suffix
    /// that starts after a dot.
    fn suffix_matches(&self, name: &str) -> bool {
        if self.suffix.is_empty() {
            return false;
        }
        if self.suffix.contains(name) {
            return true;
        }
        name.match_indices('.')
            .any(|(i, _)| self.suffix.contains(&name[i + 1..]))
    }

    /// How many entries of each kind: (full, suffix, plain, regex).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        (
            self.full.len(),
            self.suffix.len(),
            self.plain.len(),
            self.regex.as_ref().map_or(0, RegexSet::len),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.counts() == (0, 0, 0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(kind: DomainKind, value: &str) -> Domain {
        Domain {
            kind,
            value: value.into(),
        }
    }

    #[test]
    fn each_kind_as_xray() {
        let set = DomainSet::new([
            d(DomainKind::Suffix, "Example.COM"),
            d(DomainKind::Full, "www.full.org"),
            d(DomainKind::Plain, "ads"),
            d(DomainKind::Regex, r"^cdn\d+\.net$"),
        ])
        .unwrap();
        assert!(set.matches("example.com"));
        assert!(set.matches("a.b.example.com"));
        assert!(!set.matches("badexample.com"));
        assert!(!set.matches("example.com.evil"));
        assert!(set.matches("www.full.org"));
        assert!(!set.matches("full.org"));
        assert!(!set.matches("x.www.full.org"));
        assert!(set.matches("loads.of.things"));
        assert!(set.matches("cdn12.net"));
        assert!(!set.matches("cdn.net"));
        assert!(!set.matches(""));
        assert_eq!(set.counts(), (1, 1, 1, 1));
    }

    /// Go's regexp (Xray's) has ASCII `\w` and `\d`: a non-ASCII letter is not a word
    /// character there, and must not be here.
    #[test]
    fn classes_are_ascii_as_in_go() {
        let set = DomainSet::new([d(DomainKind::Regex, r"^\w+\.test$")]).unwrap();
        assert!(set.matches("a_b9.test"));
        assert!(!set.matches("é.test"));
        assert!(!set.matches("a-b.test"));
    }

    #[test]
    fn bad_regex_names_the_pattern() {
        let e =
            DomainSet::new([d(DomainKind::Regex, "ok"), d(DomainKind::Regex, "(x")]).unwrap_err();
        assert!(e.contains("`(x`"), "{e}");
        assert!(DomainSet::new([]).unwrap().is_empty());
    }
}
