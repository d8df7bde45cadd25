//! Comment stripping. Xray's JSON reader accepts `//` line comments, `/* */` block comments and
//! `#` line comments outside strings, so configs written for Xray carry them. We blank them out
//! with spaces instead of deleting them: every byte offset, line and column in the stripped text
//! is then the same as in the file the user edits, so diagnostics point at the right place.

/// Returns `text` with every comment byte replaced by a space. Newlines (`\n`, `\r`) inside
/// block comments are kept, and the result has exactly the length of the input.
pub fn strip_comments(text: &str) -> String {
    strip(text).0
}

/// [`strip_comments`], and the byte offset of the `/*` of a block comment that is never closed.
/// Such a comment runs to the end of the file and silently hides whatever follows it, so the
/// loader refuses it rather than guess what was meant.
pub(crate) fn strip(text: &str) -> (String, Option<usize>) {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Code,
        Str,
        StrEscape,
        Line,
        Block,
    }

    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut state = State::Code;
    let mut block_start = 0;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let next = bytes.get(i + 1).copied();
        match state {
            State::Code => match (b, next) {
                (b'"', _) => {
                    state = State::Str;
                    out.push(b);
                }
                (b'/', Some(b'/')) => {
                    state = State::Line;
                    out.extend_from_slice(b"  ");
                    i += 1;
                }
                (b'/', Some(b'*')) => {
                    state = State::Block;
                    block_start = i;
                    out.extend_from_slice(b"  ");
                    i += 1;
                }
                (b'#', _) => {
                    state = State::Line;
                    out.push(b' ');
                }
                _ => out.push(b),
            },
            State::Str => {
                match b {
                    b'\\' => state = State::StrEscape,
                    b'"' => state = State::Code,
                    _ => {}
                }
                out.push(b);
            }
            State::StrEscape => {
                state = State::Str;
                out.push(b);
            }
            State::Line => {
                if b == b'\n' || b == b'\r' {
                    // `\r\n` ends the comment at `\r`; the `\n` is then ordinary code whitespace.
                    state = State::Code;
                    out.push(b);
                } else {
                    out.push(b' ');
                }
            }
            State::Block => match (b, next) {
                (b'*', Some(b'/')) => {
                    state = State::Code;
                    out.extend_from_slice(b"  ");
                    i += 1;
                }
                (b'\n' | b'\r', _) => out.push(b),
                _ => out.push(b' '),
            },
        }
        i += 1;
    }
    let unterminated = (state == State::Block).then_some(block_start);
    // Comments start and end at ASCII bytes, so whole UTF-8 sequences are blanked and the
    // output stays valid UTF-8; the lossy fallback is unreachable but keeps this panic-free.
    let out = String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    (out, unterminated)
}

#[cfg(test)]
mod tests {
    use super::{strip, strip_comments};

    #[test]
    fn strips_all_three_styles() {
        let text = "{ // line\n  \"a\": 1, /* block\n still */ \"b\": 2 # hash\n}";
        let out = strip_comments(text);
        assert_eq!(out.len(), text.len());
        assert_eq!(
            out,
            "{        \n  \"a\": 1,         \n          \"b\": 2       \n}"
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["b"], 2);
    }

    #[test]
    fn keeps_comment_markers_inside_strings() {
        let text = r#"{"url": "http://example.com/#x", "s": "a /* b */ c", "e": "q\"//", "k": 1}"#;
        assert_eq!(strip_comments(text), text);
    }

    #[test]
    fn escaped_backslash_ends_string() {
        // `"\\"` is a complete string; the `//` after it is a real comment.
        let text = "[\"\\\\\" // c\n]";
        assert_eq!(strip_comments(text), "[\"\\\\\"     \n]");
    }

    #[test]
    fn unterminated_block_and_non_ascii() {
        let text = "1 /* é\n ü";
        let out = strip_comments(text);
        assert_eq!(out.len(), text.len());
        assert_eq!(out.matches('\n').count(), 1);
        assert!(out.trim() == "1");
        assert_eq!(strip(text).1, Some(2));
    }

    #[test]
    fn reports_only_a_block_left_open() {
        assert_eq!(strip("1 /* a */ /* b */").1, None);
        assert_eq!(strip("1 /* a */ /* b").1, Some(10));
        assert_eq!(strip("1 /* a /* b").1, Some(2));
        // Not comments: inside a string, or after a line comment.
        assert_eq!(strip(r#"["/*"]"#).1, None);
        assert_eq!(strip("1 // /*\n").1, None);
        assert_eq!(strip("1 /*/").1, Some(2));
    }

    #[test]
    fn crlf_line_endings() {
        let text = "{ // c\r\n\"a\": 1 }";
        let out = strip_comments(text);
        assert_eq!(out, "{     \r\n\"a\": 1 }");
    }

    #[test]
    fn lone_slash_is_kept() {
        assert_eq!(strip_comments("1 / 2"), "1 / 2");
        assert_eq!(strip_comments("/"), "/");
    }
}
