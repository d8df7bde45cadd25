//! Writing SVG elements as text: escaping, and the few shapes the chart draws.

use std::fmt::Write;

/// Text made safe for XML character data and for attribute values in either quote style.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters other than tab and newline are not allowed in XML 1.0 at all.
            c if c.is_control() && c != '\t' && c != '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// An SVG document being written. Coordinates are rounded to 0.1 px: finer is invisible and
/// only makes the file bigger.
pub(super) struct Doc {
    pub out: String,
}

impl Doc {
    pub(super) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, extra: &str) {
        let _ = writeln!(
            self.out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{fill}"{extra}/>"#,
            w.max(0.0)
        );
    }

    pub(super) fn line(
        &mut self,
        (x1, y1): (f64, f64),
        (x2, y2): (f64, f64),
        stroke: &str,
        width: f64,
    ) {
        let _ = writeln!(
            self.out,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}" stroke-width="{width}"/>"#
        );
    }

    /// Text at (x, y) (y is the baseline). `attrs` are further attributes, written as given.
    pub(super) fn text(&mut self, x: f64, y: f64, attrs: &str, content: &str) {
        let _ = writeln!(
            self.out,
            r#"<text x="{x:.1}" y="{y:.1}"{attrs}>{}</text>"#,
            esc(content)
        );
    }
}

/// About how wide `s` is in a sans-serif font of `size` px: the chart sizes its gutters and
/// axis headroom with it. Errs wide, so labels do not collide.
pub(super) fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.6
}

/// A minimal well-formedness check for the tests: balanced and properly nested tags, quoted
/// attributes without duplicates, one root element, and every `&` starting an entity.
#[cfg(test)]
pub(super) fn check_well_formed(doc: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut roots = 0;
    let mut rest = doc;
    loop {
        let Some(lt) = rest.find('<') else {
            check_text(rest)?;
            if !rest.trim().is_empty() && stack.is_empty() {
                return Err(format!("text after the root element: {rest:?}"));
            }
            break;
        };
        check_text(&rest[..lt])?;
        if stack.is_empty() && !rest[..lt].trim().is_empty() {
            return Err(format!("text outside the root element: {:?}", &rest[..lt]));
        }
        rest = &rest[lt..];
        let (end, skip) = if rest.starts_with("<?") {
            (rest.find("?>").ok_or("unterminated <?")?, 2)
        } else if rest.starts_with("<!--") {
            (rest.find("-->").ok_or("unterminated comment")?, 3)
        } else {
            (
                tag_end(rest).ok_or_else(|| format!("unterminated tag at {:?}", head(rest)))?,
                1,
            )
        };
        let tag = &rest[..end + skip];
        rest = &rest[end + skip..];
        if tag.starts_with("<?") || tag.starts_with("<!--") {
            continue;
        }
        if let Some(name) = tag.strip_prefix("</") {
            let name = name.trim_end_matches('>').trim();
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
            continue;
        }
        let self_closing = tag.ends_with("/>");
        let inner = tag[1..tag.len() - if self_closing { 2 } else { 1 }].trim_end();
        let name_end = inner.find(char::is_whitespace).unwrap_or(inner.len());
        let name = &inner[..name_end];
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_alphanumeric() || "-_:.".contains(c))
        {
            return Err(format!("bad element name in {tag:?}"));
        }
        check_attributes(&inner[name_end..]).map_err(|e| format!("{e} in {tag:?}"))?;
        if stack.is_empty() {
            roots += 1;
        }
        if !self_closing {
            stack.push(name);
        }
    }
    match (stack.last(), roots) {
        (Some(open), _) => Err(format!("<{open}> is never closed")),
        (None, 1) => Ok(()),
        (None, n) => Err(format!("{n} root elements")),
    }
}

/// Where a tag's `>` is, skipping any inside quoted attribute values.
#[cfg(test)]
fn tag_end(s: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(i),
            (None, '<') if i > 0 => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
fn check_attributes(mut s: &str) -> Result<(), String> {
    let mut seen = Vec::new();
    loop {
        s = s.trim_start();
        if s.is_empty() {
            return Ok(());
        }
        let eq = s.find('=').ok_or("attribute without a value")?;
        let name = s[..eq].trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("bad attribute name {name:?}"));
        }
        if seen.contains(&name) {
            return Err(format!("duplicate attribute {name}"));
        }
        seen.push(name);
        let after = s[eq + 1..].trim_start();
        let quote = after
            .chars()
            .next()
            .filter(|c| *c == '"' || *c == '\'')
            .ok_or("unquoted value")?;
        let close = after[1..].find(quote).ok_or("unterminated value")?;
        let value = &after[1..1 + close];
        if value.contains('<') {
            return Err("'<' in an attribute value".into());
        }
        check_text(value)?;
        s = &after[close + 2..];
    }
}

/// Every `&` must start `&name;` or `&#…;`.
#[cfg(test)]
fn check_text(s: &str) -> Result<(), String> {
    for (i, _) in s.match_indices('&') {
        let entity = &s[i + 1..];
        let semi = entity
            .find(';')
            .ok_or_else(|| format!("bare & in {:?}", head(&s[i..])))?;
        let name = &entity[..semi];
        let ok = match name.strip_prefix('#') {
            Some(num) => {
                num.strip_prefix('x')
                    .map_or(num.chars().all(|c| c.is_ascii_digit()), |h| {
                        h.chars().all(|c| c.is_ascii_hexdigit())
                    })
                    && !num.is_empty()
            }
            None => matches!(name, "amp" | "lt" | "gt" | "quot" | "apos"),
        };
        if !ok {
            return Err(format!("bad entity &{name};"));
        }
    }
    Ok(())
}

#[cfg(test)]
fn head(s: &str) -> &str {
    let end = s.char_indices().nth(40).map_or(s.len(), |(i, _)| i);
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(esc(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(esc("bell\u{7}"), "bell ");
    }

    #[test]
    fn checker_accepts_well_formed_documents() {
        let ok = r#"<?xml version="1.0"?>
<!-- a comment with <tags> -->
<svg a="1" b='x > y'><g><text>1 &lt; 2 &amp; &#x2013;</text><rect/></g></svg>
"#;
        assert_eq!(check_well_formed(ok), Ok(()));
    }

    #[test]
    fn checker_rejects_what_is_not() {
        for bad in [
            "<svg><g></svg>",
            "<svg></g>",
            "<svg><g>",
            "<svg a=1/>",
            r#"<svg a="1" a="2"/>"#,
            "<svg>1 & 2</svg>",
            "<svg>&nbsp;</svg>",
            "<svg/><svg/>",
            "<svg/>text",
            r#"<svg a="<"/>"#,
            "<svg",
        ] {
            assert!(check_well_formed(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn escaped_text_passes_the_checker() {
        let nasty = "<b> & \"q\" 'a' ]]> \u{1}";
        let doc = format!(r#"<svg title="{}">{}</svg>"#, esc(nasty), esc(nasty));
        assert_eq!(check_well_formed(&doc), Ok(()));
    }
}
