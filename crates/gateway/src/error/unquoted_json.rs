//! A JSON decoding error that keeps where the input broke and not what it quotes: the cause
//! kept for the log when the input was sealed plaintext (a stored task's result or error),
//! whose `serde_json` error would quote a value of it (`invalid type: string "…"`).

use std::fmt;

use serde_json::error::Category;

/// What `serde_json` said, without the input it quoted.
#[derive(Debug, Clone, Copy)]
pub struct UnquotedJsonError {
    category: Category,
    line: usize,
    column: usize,
}

impl From<serde_json::Error> for UnquotedJsonError {
    fn from(e: serde_json::Error) -> Self {
        Self { category: e.classify(), line: e.line(), column: e.column() }
    }
}

impl fmt::Display for UnquotedJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.category {
            Category::Io => "an I/O error",
            Category::Syntax => "not JSON",
            Category::Data => "JSON of another shape",
            Category::Eof => "JSON that ends early",
        };
        write!(f, "{what} at line {} column {}", self.line, self.column)
    }
}

impl std::error::Error for UnquotedJsonError {}

#[cfg(test)]
mod tests {
    use super::UnquotedJsonError;

    #[test]
    fn the_input_is_not_quoted() {
        let e = serde_json::from_str::<u64>(r#""sealed secret""#).expect_err("a string is no number");
        assert!(e.to_string().contains("sealed secret"), "serde_json quotes it: {e}");
        let quiet = UnquotedJsonError::from(e).to_string();
        assert_eq!(quiet, "JSON of another shape at line 1 column 15");
    }
}
