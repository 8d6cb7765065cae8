//! Quoting text from outside (a client's input, an upstream's message) in errors and logs.
//!
//! Invariant: a quote is at most the given number of characters plus one `…` marking the cut,
//! never split inside a character, so no outside party can make a message or a log line grow
//! with what it sends.

/// `text` cut to at most `max_chars` characters; a cut is marked with a trailing `…`.
pub fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn quotes_are_bounded_and_cut_between_characters() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("exactly10!", 10), "exactly10!");
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("ééééé", 2), "éé…");
        assert_eq!(clip("", 0), "");
        assert_eq!(clip("x", 0), "…");
    }
}
