//! Finding where a value starts in the (comment-stripped) text of a config file.
//!
//! serde_json only reports positions for syntax errors; once a file parsed, values carry no
//! position. Diagnostics are raised much later (after merging several files), so we keep the
//! text and re-scan it for the path instead. The scanner is deliberately tolerant and
//! iterative: it never panics and never recurses, whatever the input (it is also run on text
//! that serde_json accepted, but nothing relies on that).

use crate::path::Seg;

/// Byte offset where the value at `path` starts. When a segment does not exist (a missing
/// key, an index past the end, a key asked of an array), the offset of the deepest ancestor
/// that does exist is returned. Duplicate keys resolve to the last one, as serde_json does.
pub fn locate(text: &str, path: &[Seg]) -> usize {
    let bytes = text.as_bytes();
    let mut pos = skip_ws(bytes, 0);
    for seg in path {
        let found = match (seg, bytes.get(pos)) {
            (Seg::Key(key), Some(b'{')) => find_key(text, pos, key),
            (Seg::Index(index), Some(b'[')) => find_index(bytes, pos, *index),
            _ => None,
        };
        match found {
            Some(p) => pos = p,
            None => break,
        }
    }
    pos.min(bytes.len())
}

/// 1-based line and column of a byte offset. The column counts characters, so it matches what
/// editors show for non-ASCII lines.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let bytes = text.as_bytes();
    let offset = offset.min(bytes.len());
    let before = bytes.get(..offset).unwrap_or(bytes);
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let segment = bytes.get(line_start..offset).unwrap_or(&[]);
    // Count UTF-8 leading bytes (everything that is not a continuation byte 10xxxxxx).
    let column = 1 + segment.iter().filter(|&&b| b & 0xC0 != 0x80).count();
    (line, column)
}

fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while matches!(bytes.get(pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        pos += 1;
    }
    pos
}

/// Scans the members of the object starting at `open` (a `{`) for `key`; returns where the
/// value of its last occurrence starts.
fn find_key(text: &str, open: usize, key: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut pos = open + 1;
    let mut found = None;
    loop {
        pos = skip_ws(bytes, pos);
        match bytes.get(pos) {
            None | Some(b'}') | Some(b']') => break,
            Some(b',') => {
                pos += 1;
                continue;
            }
            Some(b'"') => {}
            // Not a key where one should be: give up on this object rather than guess.
            Some(_) => break,
        }
        let (name, after_key) = read_string(text, pos);
        pos = skip_ws(bytes, after_key);
        if bytes.get(pos) == Some(&b':') {
            pos = skip_ws(bytes, pos + 1);
        }
        if name == key {
            found = Some(pos);
        }
        let next = skip_value(bytes, pos);
        if next <= pos {
            break;
        }
        pos = next;
    }
    found
}

/// Where element `index` of the array starting at `open` (a `[`) starts.
fn find_index(bytes: &[u8], open: usize, index: usize) -> Option<usize> {
    let mut pos = open + 1;
    let mut n = 0;
    loop {
        pos = skip_ws(bytes, pos);
        match bytes.get(pos) {
            None | Some(b']') | Some(b'}') => return None,
            Some(b',') => {
                pos += 1;
                continue;
            }
            Some(_) => {}
        }
        if n == index {
            return Some(pos);
        }
        n += 1;
        let next = skip_value(bytes, pos);
        if next <= pos {
            return None;
        }
        pos = next;
    }
}

/// Decodes the JSON string starting at `open` (a `"`); returns it and the offset after the
/// closing quote (or the end of the text when unterminated).
fn read_string(text: &str, open: usize) -> (String, usize) {
    let Some(rest) = text.get(open + 1..) else {
        return (String::new(), text.len());
    };
    let mut out = String::new();
    let mut chars = rest.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, open + 1 + i + 1),
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, 'b')) => out.push('\u{8}'),
                Some((_, 'f')) => out.push('\u{c}'),
                Some((_, 'u')) => {
                    let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                    let unit = u32::from_str_radix(&hex, 16).unwrap_or(0xFFFD);
                    if (0xD800..0xDC00).contains(&unit) {
                        // A high surrogate: pair it with the `\uXXXX` low surrogate that follows.
                        let tail: String = chars.clone().take(6).map(|(_, c)| c).collect();
                        let low = tail
                            .strip_prefix("\\u")
                            .and_then(|h| u32::from_str_radix(h, 16).ok())
                            .filter(|l| (0xDC00..0xE000).contains(l));
                        if let Some(low) = low {
                            chars.by_ref().take(6).for_each(drop);
                            let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                            out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                        } else {
                            out.push('\u{FFFD}');
                        }
                    } else {
                        out.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
                    }
                }
                Some((_, other)) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    (out, text.len())
}

/// Offset just after the value starting at `pos`. Strings, objects and arrays are skipped as
/// a whole (brackets counted without recursion, strings honoured); anything else runs until a
/// delimiter. Always advances unless `pos` is already at the end.
fn skip_value(bytes: &[u8], pos: usize) -> usize {
    match bytes.get(pos) {
        None => pos,
        Some(b'"') => skip_string(bytes, pos),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut p = pos;
            while let Some(&b) = bytes.get(p) {
                match b {
                    b'"' => {
                        p = skip_string(bytes, p);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return p + 1;
                        }
                    }
                    _ => {}
                }
                p += 1;
            }
            p
        }
        Some(_) => {
            let mut p = pos + 1;
            while let Some(&b) = bytes.get(p) {
                if matches!(b, b',' | b'}' | b']' | b':' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                p += 1;
            }
            p
        }
    }
}

fn skip_string(bytes: &[u8], open: usize) -> usize {
    let mut p = open + 1;
    while let Some(&b) = bytes.get(p) {
        match b {
            b'\\' => p += 2,
            b'"' => return p + 1,
            _ => p += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::JsonPath;

    fn at(text: &str, path: &JsonPath) -> (usize, usize) {
        line_col(text, locate(text, &path.0))
    }

    const DOC: &str = r#"{
  "inbounds": [
    {
      "port": 1080,
      "settings": {
        "accounts": [
          {"user": "a", "pass": "b"},
          {
            "user": "c\"d",
            "pass": "e"
          }
        ]
      }
    }
  ],
  "k\u0065y": [1, [2, 3], {"x": "}]"}, 4]
}"#;

    #[test]
    fn nested_paths() {
        let root = JsonPath::root();
        let ib = root.key("inbounds").index(0);
        assert_eq!(at(DOC, &ib), (3, 5));
        assert_eq!(at(DOC, &ib.key("port")), (4, 15));
        let accounts = ib.key("settings").key("accounts");
        assert_eq!(at(DOC, &accounts.index(0).key("pass")), (7, 33));
        assert_eq!(at(DOC, &accounts.index(1).key("user")), (9, 21));
        assert_eq!(at(DOC, &accounts.index(1).key("pass")), (10, 21));
    }

    #[test]
    fn escaped_keys_and_skipping_tricky_values() {
        let key = JsonPath::root().key("key");
        assert_eq!(at(DOC, &key), (16, 15));
        assert_eq!(at(DOC, &key.index(3)), (16, 40));
        assert_eq!(at(DOC, &key.index(2).key("x")), (16, 33));
    }

    #[test]
    fn falls_back_to_nearest_ancestor() {
        let ib = JsonPath::root().key("inbounds").index(0);
        assert_eq!(at(DOC, &ib.key("listen")), at(DOC, &ib));
        assert_eq!(at(DOC, &ib.key("port").key("x")), at(DOC, &ib.key("port")));
        assert_eq!(at(DOC, &JsonPath::root().key("inbounds").index(7)), (2, 15));
        assert_eq!(at(DOC, &JsonPath::root().key("nope")), (1, 1));
    }

    #[test]
    fn last_duplicate_key_wins() {
        let text = "{\"a\": 1,\n \"a\": 2}";
        assert_eq!(at(text, &JsonPath::root().key("a")), (2, 7));
    }

    #[test]
    fn tolerates_garbage() {
        for text in [
            "",
            "{",
            "[",
            "{\"a\"",
            "{\"a\":",
            "[1,,2",
            "{\"\\u12",
            "\"\\",
            "{]}",
            "{\"a\":[}",
        ] {
            let p = JsonPath::root().key("a").index(2).key("b");
            let _ = at(text, &p);
            let _ = at(text, &JsonPath::root().index(1));
        }
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(line_col("é: x", 4), (1, 4));
        assert_eq!(line_col("a\nb", 2), (2, 1));
        assert_eq!(line_col("a", 99), (1, 2));
    }

    #[test]
    fn surrogate_pairs_in_keys() {
        let text = r#"{"\ud83d\ude00": 5}"#;
        assert_eq!(at(text, &JsonPath::root().key("😀")), (1, 18));
    }
}
