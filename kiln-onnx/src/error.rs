//! The error of a graph that does not follow the rules or does not match its Kiln files.

use std::fmt;

/// A graph refused: what is wrong, the initializer at fault and the Kiln
/// file concerned, where there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphError {
    /// The message, naming the rule broken.
    pub message: String,
    /// The initializer (or Constant output) at fault.
    pub initializer: Option<String>,
    /// The Kiln file concerned (a plain file name in the graph's folder).
    pub file: Option<String>,
}

impl GraphError {
    /// An error not tied to one initializer or file.
    pub fn new(message: impl Into<String>) -> Self {
        GraphError { message: message.into(), initializer: None, file: None }
    }

    /// An error about initializer `name`.
    pub fn at(name: &str, message: impl Into<String>) -> Self {
        GraphError { message: message.into(), initializer: Some(name.to_string()), file: None }
    }

    /// The same error, naming Kiln file `file`.
    #[must_use]
    pub fn in_file(mut self, file: &str) -> Self {
        self.file = Some(file.to_string());
        self
    }
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GraphError {}
