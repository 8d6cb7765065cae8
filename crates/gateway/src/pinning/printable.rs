//! Upstream-supplied text made safe for an operator's terminal and for log lines: a pinned
//! upstream may be hostile, and a tool name, description or schema could otherwise carry ANSI
//! escapes (hiding lines of a diff), bidirectional overrides, or shell metacharacters into a
//! command an operator copies.
//!
//! Invariant: the output holds no control or other non-printing character (each is written
//! as its `\u{..}`-style escape), and a shell word is either made only of characters a shell
//! never interprets or is single-quoted.

/// `text` with every non-printing character escaped as Rust's `{:?}` would (quotes and
/// backslashes are left as they are: this is for reading, not for parsing back).
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '"' | '\'' | '\\') || c.escape_debug().nth(1).is_none() {
            out.push(c);
        } else {
            out.extend(c.escape_debug());
        }
    }
    out
}

/// The start of `text` (at most `chars` characters), printable and on one line.
pub(crate) fn clipped(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", printable(&text[..at])),
        None => printable(text),
    }
}

/// `word` as one shell word an operator can paste: as is when it holds only characters no
/// shell interprets, otherwise single-quoted (and printable).
pub(crate) fn shell_word(word: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"_-.:/@+=,".contains(&b);
    if !word.is_empty() && word.bytes().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", printable(&word.replace('\'', r"'\''")))
    }
}

#[cfg(test)]
mod tests {
    use super::{clipped, printable, shell_word};

    #[test]
    fn no_control_or_invisible_character_gets_through() {
        let hostile = "look\u{1b}[2K\u{1b}[1A\r\u{9b}31m\u{202e}up\u{7f}\n\tdone";
        let shown = printable(hostile);
        assert!(shown.chars().all(|c| !c.is_control() && c != '\u{202e}'), "{shown:?}");
        assert_eq!(shown, r"look\u{1b}[2K\u{1b}[1A\r\u{9b}31m\u{202e}up\u{7f}\n\tdone");
        assert_eq!(printable(r#"say "hi" \ it's Ålice"#), r#"say "hi" \ it's Ålice"#, "printable text is kept");
        assert_eq!(clipped("abc\ndef", 4), r"abc\n…");
        assert_eq!(clipped("short", 80), "short");
    }

    #[test]
    fn shell_words_are_plain_or_quoted() {
        assert_eq!(shell_word("pinned.lookup-2"), "pinned.lookup-2");
        assert_eq!(shell_word("x; rm -rf ~"), "'x; rm -rf ~'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("$(id)\u{1b}"), r"'$(id)\u{1b}'");
        assert_eq!(shell_word(""), "''");
    }
}
