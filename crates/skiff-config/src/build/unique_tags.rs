//! Tag uniqueness for inbounds and for outbounds: routing selects both by tag, so a repeated
//! non-empty tag is an error pointing at both places.

use std::collections::HashMap;

use crate::diag::Diagnostic;
use crate::source::Loc;

pub struct UniqueTags<'a> {
    kind: &'static str,
    first_use: HashMap<&'a str, &'a Loc>,
}

impl<'a> UniqueTags<'a> {
    /// `kind` names the list in messages: "inbound" or "outbound".
    pub fn new(kind: &'static str) -> UniqueTags<'a> {
        UniqueTags {
            kind,
            first_use: HashMap::new(),
        }
    }

    /// Records `tag` (empty tags are allowed any number of times, as in Xray) or reports it as
    /// a duplicate of its first use.
    pub fn check(&mut self, tag: Option<&'a str>, loc: &'a Loc, diags: &mut Vec<Diagnostic>) {
        let Some(tag) = tag.filter(|t| !t.is_empty()) else {
            return;
        };
        match self.first_use.get(tag) {
            Some(first) => diags.push(loc.key("tag").error(format!(
                "duplicate {} tag `{tag}` (first used at {})",
                self.kind,
                first.position()
            ))),
            None => {
                self.first_use.insert(tag, loc);
            }
        }
    }
}
