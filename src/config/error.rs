//! Config errors: each names the file, the key and the reason; a load reports all of them.
//!
//! This file owns only the error types and their rendering; it never decides what is an error.
//! A reason may name a key, a value that is not secret or an environment variable's *name*,
//! never a secret's value.

use std::fmt;

/// One problem in a config file, rendered `file: key: reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as the operator named it (or a label such as `<embedded>`).
    pub file: String,
    /// A dotted path such as `connections[2].weight` or `combos.team.targets[1].connection`;
    /// empty when the problem is the whole file, `line L, column C` for a syntax error.
    pub key: String,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(formatter, "{}: {}", self.file, self.reason)
        } else {
            write!(formatter, "{}: {}: {}", self.file, self.key, self.reason)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Every error found in one load, in the order found (never empty when returned as `Err`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_lines(.errors))]
pub struct ConfigErrors {
    pub errors: Vec<ConfigError>,
}

fn render_lines(errors: &[ConfigError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Collects errors for one file; keeps only the first error per key so that one mistake
/// (say a key of the wrong type) is not reported again as "missing".
#[derive(Debug)]
pub(crate) struct ErrorSink {
    file: String,
    errors: Vec<ConfigError>,
}

impl ErrorSink {
    pub(crate) fn new(file: &str) -> Self {
        Self {
            file: file.to_owned(),
            errors: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, key: impl Into<String>, reason: impl Into<String>) {
        let key = key.into();
        if !key.is_empty() && self.has_error_at(&key) {
            return;
        }
        self.errors.push(ConfigError {
            file: self.file.clone(),
            key,
            reason: reason.into(),
        });
    }

    pub(crate) fn has_error_at(&self, key: &str) -> bool {
        self.errors.iter().any(|error| error.key == key)
    }

    pub(crate) fn len(&self) -> usize {
        self.errors.len()
    }

    pub(crate) fn into_errors(self) -> ConfigErrors {
        ConfigErrors {
            errors: self.errors,
        }
    }

    pub(crate) fn finish(self) -> Result<(), ConfigErrors> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors {
                errors: self.errors,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_file_key_reason_one_per_line() {
        let mut sink = ErrorSink::new("q.toml");
        sink.push("connections[0].weight", "must be at least 1");
        sink.push("connections[0].weight", "again");
        sink.push("", "whole file");
        let errors = sink.finish().unwrap_err();
        assert_eq!(
            errors.to_string(),
            "q.toml: connections[0].weight: must be at least 1\nq.toml: whole file"
        );
    }
}
