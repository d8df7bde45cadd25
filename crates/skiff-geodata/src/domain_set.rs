//! The domain matcher one routing rule uses, for its own `domain` entries and the geosite
//! lists it names alike. Full names and suffixes are hash lookups (one per label of the
//! name, however many rules); keywords and regular expressions are checked one by one as in
//! Xray, the expressions as one `RegexSet` (a single pass over the name).

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;
use regex::bytes::{RegexSet, RegexSetBuilder};

use crate::site::{Domain, DomainKind};

#[derive(Debug, Default)]
pub struct DomainSet {
    full: NameTable,
    suffix: NameTable,
    plain: Vec<Box<str>>,
    regex: Option<RegexSet>,
}

/// A set of names kept in one buffer and found through a hash table of their offsets. A
/// geosite list holds tens of thousands of names (`geolocation-!cn` about 25 000): as a
/// `HashSet<Box<str>>` each costs a heap block of its own plus a 16-byte slot, about 2 MiB
/// for a typical config's five lists, which on a router is most of Skiff's memory. Here a
/// name costs its bytes, a 2-byte length and about 5 bytes of table.
///
/// The hash is std's keyed SipHash (a random key per set): lookups are names a client chose,
/// and a fixed hash would let one aim for long probe sequences.
#[derive(Default)]
struct NameTable {
    /// Each name as a little-endian u16 length, then its bytes.
    names: Vec<u8>,
    /// Offsets into `names`.
    index: HashTable<u32>,
    hasher: RandomState,
}

impl std::fmt::Debug for NameTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NameTable({} names)", self.index.len())
    }
}

fn name_at(names: &[u8], offset: u32) -> &[u8] {
    let at = offset as usize;
    let len = u16::from_le_bytes([names[at], names[at + 1]]) as usize;
    &names[at + 2..at + 2 + len]
}

impl NameTable {
    /// Adds `name` unless present. Names longer than a DNS name can be (253 bytes) can never
    /// match one and are left out, which also keeps every length within the u16 prefix.
    fn insert(&mut self, name: &[u8]) {
        if name.len() > 253 || self.contains(name) {
            return;
        }
        let Ok(offset) = u32::try_from(self.names.len()) else {
            return; // 4 GiB of names: far beyond any geosite file.
        };
        self.names
            .extend_from_slice(&(name.len() as u16).to_le_bytes());
        self.names.extend_from_slice(name);
        let (names, hasher) = (&self.names, &self.hasher);
        self.index
            .insert_unique(hasher.hash_one(name), offset, |&o| {
                hasher.hash_one(name_at(names, o))
            });
    }

    fn contains(&self, name: &[u8]) -> bool {
        let hash = self.hasher.hash_one(name);
        self.index
            .find(hash, |&o| name_at(&self.names, o) == name)
            .is_some()
    }

    fn shrink_to_fit(&mut self) {
        self.names.shrink_to_fit();
        let (names, hasher) = (&self.names, &self.hasher);
        self.index
            .shrink_to_fit(|&o| hasher.hash_one(name_at(names, o)));
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
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
                DomainKind::Full => set.full.insert(value.to_ascii_lowercase().as_bytes()),
                DomainKind::Suffix => set.suffix.insert(value.to_ascii_lowercase().as_bytes()),
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
        if self.full.contains(name.as_bytes()) || self.suffix_matches(name) {
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
        let name = name.as_bytes();
        if self.suffix.contains(name) {
            return true;
        }
        (0..name.len())
            .filter(|&i| name[i] == b'.')
            .any(|i| self.suffix.contains(&name[i + 1..]))
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
