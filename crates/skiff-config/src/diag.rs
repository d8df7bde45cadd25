//! Diagnostics: what `skiff check` and `skiff run` print about a config. Every one names the
//! file, the line:column and the JSON path, so a user can jump straight to the value.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The config cannot be used.
    Error,
    /// The config works, but something in it is ignored or deprecated.
    Warning,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The source name as given (a path for files).
    pub file: String,
    /// JSON path inside that file, such as `routing.rules[2].outboundTag`; empty for
    /// problems of the file as a whole (unreadable, not JSON).
    pub path: String,
    /// 1-based; 0 when the problem has no position (the file could not be read).
    pub line: usize,
    /// 1-based; 0 when `line` is 0.
    pub column: usize,
    pub message: String,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// A problem with a whole file rather than a value in it.
    pub fn file_error(file: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            file: file.to_owned(),
            path: String::new(),
            line: 0,
            column: 0,
            message: message.into(),
        }
    }
}

/// `error: FILE:LINE:COLUMN: PATH: MESSAGE`. The `PATH: ` part is left out when the path is
/// empty, `:LINE:COLUMN` when there is no position and `FILE:` when there is no file, so no
/// output has empty fields.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{severity}:")?;
        if !self.file.is_empty() {
            write!(f, " {}", self.file)?;
        }
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        if !self.file.is_empty() || !self.path.is_empty() {
            f.write_str(":")?;
        }
        write!(f, " {}", self.message)
    }
}

/// True when any diagnostic is an error.
pub fn has_errors(diags: &[Diagnostic]) -> bool {
    diags.iter().any(Diagnostic::is_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_formats() {
        let mut d = Diagnostic {
            severity: Severity::Error,
            file: "a.json".into(),
            path: "routing.rules[2].outboundTag".into(),
            line: 14,
            column: 22,
            message: "no outbound is tagged `proxy`".into(),
        };
        assert_eq!(
            d.to_string(),
            "error: a.json:14:22: routing.rules[2].outboundTag: no outbound is tagged `proxy`"
        );
        d.severity = Severity::Warning;
        d.path.clear();
        assert_eq!(
            d.to_string(),
            "warning: a.json:14:22: no outbound is tagged `proxy`"
        );
        let f = Diagnostic::file_error("b.json", "cannot read: gone");
        assert_eq!(f.to_string(), "error: b.json: cannot read: gone");
        assert_eq!(
            Diagnostic::file_error("", "nothing").to_string(),
            "error: nothing"
        );
    }
}
