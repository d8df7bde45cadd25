//! JSON paths such as `inbounds[0].settings.accounts[1].user`: the address of a value inside
//! one config file, printed in diagnostics and resolved to a line:column by [`crate::locate`].

use std::fmt;

/// One step into a JSON value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A path from the top of a file; empty = the whole document.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsonPath(pub Vec<Seg>);

impl JsonPath {
    pub fn root() -> JsonPath {
        JsonPath(Vec::new())
    }

    pub fn key(&self, key: &str) -> JsonPath {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_owned()));
        JsonPath(segs)
    }

    pub fn index(&self, index: usize) -> JsonPath {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        JsonPath(segs)
    }

    pub fn join(&self, tail: &JsonPath) -> JsonPath {
        let mut segs = self.0.clone();
        segs.extend(tail.0.iter().cloned());
        JsonPath(segs)
    }

    /// The last key of the path, for messages such as "unknown key `udpp`".
    pub fn last_key(&self) -> Option<&str> {
        self.0.iter().rev().find_map(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            Seg::Index(_) => None,
        })
    }

    /// Converts serde_ignored's path (relative to where deserialization started). Option and
    /// newtype wrappers are not part of the JSON document, so they leave no segment.
    pub fn from_ignored(path: &serde_ignored::Path<'_>) -> JsonPath {
        fn walk(path: &serde_ignored::Path<'_>, out: &mut Vec<Seg>) {
            use serde_ignored::Path as P;
            match path {
                P::Root => {}
                P::Seq { parent, index } => {
                    walk(parent, out);
                    out.push(Seg::Index(*index));
                }
                P::Map { parent, key } => {
                    walk(parent, out);
                    out.push(Seg::Key(key.clone()));
                }
                P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => {
                    walk(parent, out)
                }
            }
        }
        let mut segs = Vec::new();
        walk(path, &mut segs);
        JsonPath(segs)
    }

    /// Converts serde_path_to_error's path of a failed deserialization.
    pub fn from_tracked(path: &serde_path_to_error::Path) -> JsonPath {
        use serde_path_to_error::Segment;
        JsonPath(
            path.iter()
                .filter_map(|seg| match seg {
                    Segment::Seq { index } => Some(Seg::Index(*index)),
                    Segment::Map { key } => Some(Seg::Key(key.clone())),
                    Segment::Enum { .. } | Segment::Unknown => None,
                })
                .collect(),
        )
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_xray_users_expect() {
        let p = JsonPath::root()
            .key("inbounds")
            .index(0)
            .key("settings")
            .key("accounts")
            .index(1)
            .key("user");
        assert_eq!(p.to_string(), "inbounds[0].settings.accounts[1].user");
        assert_eq!(JsonPath::root().to_string(), "");
        assert_eq!(
            JsonPath::root()
                .key("policy")
                .key("levels")
                .key("0")
                .to_string(),
            "policy.levels.0"
        );
        assert_eq!(p.last_key(), Some("user"));
    }
}
