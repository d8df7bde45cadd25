//! Parsing one file on its own: comments stripped, JSON syntax checked, then each top-level
//! section (and each inbound/outbound) decoded separately, so one mistake costs one item and
//! every other item is still checked in the same run.

pub mod bounds;
pub mod dns;
pub mod settings;
pub mod top;
pub mod values;

use std::collections::HashSet;
use std::rc::Rc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::comments;
use crate::decode::decode;
use crate::diag::{Diagnostic, Severity};
use crate::locate;
use crate::source::{Loc, SourceFile};
use bounds::{RawInbound, RawOutbound};
use dns::RawDns;
use top::{RawLog, RawPolicy, RawRouting, RawStats};

/// A decoded value and where it was written.
#[derive(Clone, Debug)]
pub struct Item<T> {
    pub loc: Loc,
    pub raw: T,
}

/// One file after parsing. `None` = the key was absent (or null) in this file, which matters
/// for merging: only present sections replace earlier ones.
#[derive(Debug)]
pub struct ParsedFile {
    pub file: Rc<SourceFile>,
    pub log: Option<Item<RawLog>>,
    pub inbounds: Option<Vec<Item<RawInbound>>>,
    pub outbounds: Option<Vec<Item<RawOutbound>>>,
    pub routing: Option<Item<RawRouting>>,
    pub policy: Option<Item<RawPolicy>>,
    pub dns: Option<Item<RawDns>>,
    pub api: Option<Item<top::RawApi>>,
    pub metrics: Option<Item<top::RawMetrics>>,
    pub damage: Damage,
}

/// What failed to decode (and was reported). Later checks consult it so that a rule naming
/// a broken outbound does not get a second, echoing "no outbound is tagged" error.
#[derive(Debug, Default)]
pub struct Damage {
    /// Tags of inbounds / outbounds whose object failed to decode.
    pub inbound_tags: HashSet<String>,
    pub outbound_tags: HashSet<String>,
    /// An `inbounds` / `outbounds` value that was not an array: any tag may have been in it.
    pub inbounds_lost: bool,
    pub outbounds_lost: bool,
}

impl Damage {
    pub fn absorb(&mut self, other: Damage) {
        self.inbound_tags.extend(other.inbound_tags);
        self.outbound_tags.extend(other.outbound_tags);
        self.inbounds_lost |= other.inbounds_lost;
        self.outbounds_lost |= other.outbounds_lost;
    }

    pub fn has_outbounds(&self) -> bool {
        self.outbounds_lost || !self.outbound_tags.is_empty()
    }

    /// Whether a reference to outbound `tag` may point at something that failed to decode.
    pub fn may_hide_outbound(&self, tag: &str) -> bool {
        self.outbounds_lost || self.outbound_tags.contains(tag)
    }

    pub fn may_hide_inbound(&self, tag: &str) -> bool {
        self.inbounds_lost || self.inbound_tags.contains(tag)
    }
}

/// Top-level sections of Xray configs that skiff does not implement yet. Setting one is an
/// error naming it; `null`, `{}` and `[]` configure nothing and are accepted.
const UNSUPPORTED_SECTIONS: &[&str] = &[
    "reverse",
    "fakedns",
    "fakeDns",
    "observatory",
    "burstObservatory",
    "transport",
];

/// Parses one source. Returns `None` when the text is not JSON (the syntax error is in
/// `diags`); otherwise every decodable section, with the problems of the others in `diags`.
pub fn parse_file(name: &str, text: &str, diags: &mut Vec<Diagnostic>) -> Option<ParsedFile> {
    // A UTF-8 byte order mark is not JSON whitespace; blank it (3 bytes → 3 spaces).
    let original = match text.strip_prefix('\u{feff}') {
        Some(rest) => format!("   {rest}"),
        None => text.to_owned(),
    };
    let (stripped, unterminated) = comments::strip(&original);
    if let Some(at) = unterminated {
        // Reported instead of the JSON error it usually causes (a value cut short at the
        // end of the file): this is the mistake to fix.
        let (line, column) = locate::line_col(&original, at);
        diags.push(Diagnostic {
            severity: Severity::Error,
            file: name.to_owned(),
            path: String::new(),
            line,
            column,
            message: "unterminated `/*` comment: it is never closed with `*/`, so it hides \
                      everything after it to the end of the file"
                .into(),
        });
        return None;
    }
    let value: Value = match serde_json::from_str(&stripped) {
        Ok(v) => v,
        Err(e) => {
            diags.push(syntax_error(name, &e));
            return None;
        }
    };
    let file = Rc::new(SourceFile {
        name: name.to_owned(),
        stripped,
        original,
    });
    let root = Loc::root(file.clone());
    let mut parsed = ParsedFile {
        file,
        log: None,
        inbounds: None,
        outbounds: None,
        routing: None,
        policy: None,
        api: None,
        metrics: None,
        dns: None,
        damage: Damage::default(),
    };
    let Value::Object(map) = value else {
        diags.push(root.error("a configuration must be a JSON object (`{ ... }`)"));
        return Some(parsed);
    };
    for (key, value) in &map {
        let loc = root.key(key);
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "log" => parsed.log = section(value, loc, diags),
            "routing" => parsed.routing = section(value, loc, diags),
            "policy" => parsed.policy = section(value, loc, diags),
            "api" => parsed.api = section(value, loc, diags),
            "metrics" => parsed.metrics = section(value, loc, diags),
            "dns" => parsed.dns = section(value, loc, diags),
            "stats" => {
                let _: Option<Item<RawStats>> = section(value, loc, diags);
            }
            "inbounds" => match list(value, &loc, diags) {
                Some((items, broken)) => {
                    parsed.inbounds = Some(items);
                    parsed.damage.inbound_tags.extend(broken);
                }
                None => parsed.damage.inbounds_lost = true,
            },
            "outbounds" => match list(value, &loc, diags) {
                Some((items, broken)) => {
                    parsed.outbounds = Some(items);
                    parsed.damage.outbound_tags.extend(broken);
                }
                None => parsed.damage.outbounds_lost = true,
            },
            k if UNSUPPORTED_SECTIONS.contains(&k) => {
                if !is_empty(value) {
                    diags.push(loc.error(format!(
                        "`{k}` is not supported by this version of skiff yet"
                    )));
                }
            }
            other => diags.push(loc.warning(format!("unknown key `{other}` is ignored"))),
        }
    }
    Some(parsed)
}

fn section<T: DeserializeOwned>(
    value: &Value,
    loc: Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<Item<T>> {
    decode(value, &loc, diags).map(|raw| Item { loc, raw })
}

/// Decodes an array of items one by one. Returns the good items and, for the items that
/// failed, their `tag` if one can still be read from the raw value.
fn list<T: DeserializeOwned>(
    value: &Value,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<(Vec<Item<T>>, Vec<String>)> {
    let Value::Array(elements) = value else {
        diags.push(loc.error(format!("invalid type: {}, expected an array", kind(value))));
        return None;
    };
    let mut items = Vec::new();
    let mut broken = Vec::new();
    for (i, element) in elements.iter().enumerate() {
        let item_loc = loc.index(i);
        if !element.is_object() {
            diags.push(item_loc.error(format!(
                "invalid type: {}, expected an object",
                kind(element)
            )));
            continue;
        }
        match decode(element, &item_loc, diags) {
            Some(raw) => items.push(Item { loc: item_loc, raw }),
            None => {
                if let Some(tag) = element.get("tag").and_then(Value::as_str) {
                    broken.push(tag.to_owned());
                }
            }
        }
    }
    Some((items, broken))
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// serde's wording for the type of a JSON value, for messages in its style.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// serde_json's syntax error, with its own line:column and without the "at line X column Y"
/// suffix it appends to its message (the position is printed in front instead).
fn syntax_error(name: &str, e: &serde_json::Error) -> Diagnostic {
    let mut message = e.to_string();
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    Diagnostic {
        severity: Severity::Error,
        file: name.to_owned(),
        path: String::new(),
        line: e.line().max(1),
        column: e.column().max(1),
        message: format!("invalid JSON: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Option<ParsedFile>, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let parsed = parse_file("t.json", text, &mut diags);
        (parsed, diags)
    }

    #[test]
    fn syntax_errors_carry_line_and_no_path() {
        let (parsed, diags) = parse("{\n  \"log\": {}\n  \"inbounds\": []\n}");
        assert!(parsed.is_none());
        assert_eq!(diags.len(), 1);
        assert_eq!((diags[0].path.as_str(), diags[0].line), ("", 3));
        assert!(
            diags[0].message.starts_with("invalid JSON: expected `,`"),
            "{}",
            diags[0].message
        );
    }

    #[test]
    fn an_unterminated_block_comment_is_the_one_error() {
        // Valid JSON once the comment is blanked: still an error, at the `/*`.
        let (parsed, diags) = parse("{\n  \"log\": {} /* note\n");
        assert!(parsed.is_none());
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert_eq!(
            (diags[0].path.as_str(), diags[0].line, diags[0].column),
            ("", 2, 13)
        );
        assert!(diags[0].message.starts_with("unterminated `/*` comment"));
        // When it also cuts the JSON short, the comment is reported, not "EOF while parsing".
        let (_, diags) = parse("{\n  /* \"log\": {}\n}");
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert_eq!((diags[0].line, diags[0].column), (2, 3));
        // Closed comments and `/*` inside strings are fine.
        let (parsed, diags) = parse("{\"log\": {\"access\": \"/*\"}} /* ok */");
        assert!(parsed.is_some() && diags.is_empty(), "{diags:?}");
    }

    #[test]
    fn one_bad_inbound_does_not_hide_the_next() {
        let text = r#"{
  "inbounds": [
    {"port": true, "protocol": "socks"},
    {"port": 1, "protocol": "socks", "tag": "ok", "colour": "red"}
  ]
}"#;
        let (parsed, diags) = parse(text);
        let parsed = parsed.unwrap();
        assert_eq!(parsed.inbounds.unwrap().len(), 1);
        assert_eq!(diags.len(), 2, "{diags:?}");
        assert_eq!(
            (diags[0].path.as_str(), diags[0].line),
            ("inbounds[0].port", 3)
        );
        assert_eq!(diags[1].severity, Severity::Warning);
        assert_eq!(diags[1].path, "inbounds[1].colour");
    }

    #[test]
    fn sections_and_unknown_keys() {
        let text = r#"{"reverse": {"bridges": [{}]}, "api": {}, "fakedns": null, "colour": 1, "stats": {}}"#;
        let (parsed, diags) = parse(text);
        assert!(parsed.is_some());
        let msgs: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
        assert_eq!(diags.len(), 2, "{msgs:?}");
        assert!(
            msgs.iter()
                .any(|m| m.contains("error") && m.contains("`reverse` is not supported"))
        );
        assert!(
            msgs.iter()
                .any(|m| m.contains("warning") && m.contains("colour"))
        );
    }

    #[test]
    fn non_object_root_and_bom() {
        let (_, diags) = parse("[1]");
        assert!(diags[0].message.contains("must be a JSON object"));
        let (parsed, diags) = parse("\u{feff}{}");
        assert!(parsed.is_some() && diags.is_empty());
    }
}
