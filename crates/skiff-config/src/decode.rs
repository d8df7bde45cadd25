//! Typed decoding of one JSON value with full paths in every message.
//!
//! The value is deserialized through two wrappers: serde_ignored reports every key our types
//! do not know (a warning, since Xray ignores them too, but a typo such as `udpp` silently
//! changes behaviour), and serde_path_to_error tells where a type error happened. Both report
//! paths relative to the value, so they are joined to the value's own [`Loc`].

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::diag::Diagnostic;
use crate::path::JsonPath;
use crate::source::Loc;

/// Decodes `value` (found at `loc`) as `T`. Unknown keys become warnings; a type error becomes
/// one error at the failing path and `None`.
pub fn decode<T: DeserializeOwned>(
    value: &Value,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<T> {
    let mut unknown: Vec<JsonPath> = Vec::new();
    let result = {
        let mut on_ignored =
            |path: serde_ignored::Path<'_>| unknown.push(JsonPath::from_ignored(&path));
        let de = serde_ignored::Deserializer::new(value, &mut on_ignored);
        serde_path_to_error::deserialize::<_, T>(de)
    };
    for path in unknown {
        let name = path.last_key().unwrap_or_default().to_owned();
        diags.push(
            loc.join(&path)
                .warning(format!("unknown key `{name}` is ignored")),
        );
    }
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            let path = JsonPath::from_tracked(e.path());
            diags.push(
                loc.join(&path)
                    .error(json_words(&e.into_inner().to_string())),
            );
            None
        }
    }
}

/// serde describes expectations in Rust terms ("expected struct SocksSettings", "expected
/// i64"); users write JSON, so say "object", "integer", "array" instead.
fn json_words(message: &str) -> String {
    let Some(at) = message.find("expected ") else {
        return message.to_owned();
    };
    let (head, expected) = message.split_at(at + "expected ".len());
    let word = match expected {
        e if e.starts_with("struct ") || e == "a map" => "an object",
        "i64" | "u64" | "u32" | "u16" | "i32" => "an integer",
        "a sequence" => "an array",
        e => e,
    };
    format!("{head}{word}")
}

#[cfg(test)]
mod tests {
    use super::json_words;

    #[test]
    fn rust_words_become_json_words() {
        assert_eq!(
            json_words("invalid type: sequence, expected struct SocksSettings"),
            "invalid type: sequence, expected an object"
        );
        assert_eq!(
            json_words("invalid type: string \"4\", expected i64"),
            "invalid type: string \"4\", expected an integer"
        );
        assert_eq!(
            json_words("invalid type: string \"a\", expected a sequence"),
            "invalid type: string \"a\", expected an array"
        );
        assert_eq!(
            json_words("invalid type: null, expected a string"),
            "invalid type: null, expected a string"
        );
    }
}
