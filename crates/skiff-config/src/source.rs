//! Where a parsed value came from. Every raw item keeps a [`Loc`] (its file and JSON path), so
//! a diagnostic raised after merging still names the file and line the user wrote it on.

use std::rc::Rc;

use crate::diag::{Diagnostic, Severity};
use crate::locate;
use crate::path::JsonPath;

/// One config file's text, kept for locating diagnostics.
#[derive(Debug)]
pub struct SourceFile {
    pub name: String,
    /// The text with comments blanked out: what the JSON scanner reads. Same byte offsets as
    /// `original`.
    pub stripped: String,
    /// The text as written: what line/column are counted in.
    pub original: String,
}

/// A value's address: its file and its path inside that file.
#[derive(Clone, Debug)]
pub struct Loc {
    pub file: Rc<SourceFile>,
    pub path: JsonPath,
}

impl Loc {
    pub fn root(file: Rc<SourceFile>) -> Loc {
        Loc {
            file,
            path: JsonPath::root(),
        }
    }

    pub fn key(&self, key: &str) -> Loc {
        Loc {
            file: self.file.clone(),
            path: self.path.key(key),
        }
    }

    pub fn index(&self, index: usize) -> Loc {
        Loc {
            file: self.file.clone(),
            path: self.path.index(index),
        }
    }

    pub fn join(&self, tail: &JsonPath) -> Loc {
        Loc {
            file: self.file.clone(),
            path: self.path.join(tail),
        }
    }

    pub fn diag(&self, severity: Severity, message: impl Into<String>) -> Diagnostic {
        let offset = locate::locate(&self.file.stripped, &self.path.0);
        let (line, column) = locate::line_col(&self.file.original, offset);
        Diagnostic {
            severity,
            file: self.file.name.clone(),
            path: self.path.to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    pub fn error(&self, message: impl Into<String>) -> Diagnostic {
        self.diag(Severity::Error, message)
    }

    pub fn warning(&self, message: impl Into<String>) -> Diagnostic {
        self.diag(Severity::Warning, message)
    }

    /// `FILE:LINE` of this value, for messages that point at a second place.
    pub fn position(&self) -> String {
        let d = self.diag(Severity::Warning, "");
        format!("{}:{}", d.file, d.line)
    }
}
