//! The resource URI a `resources/read` is judged, routed and forwarded by: the caller's URI in
//! its RFC 3986 §6.2.2 normal form, or refused.
//!
//! Threat model: a caller who may not read `docs://secret/plan` asks for a spelling of it that
//! a rule comparing strings does not recognise but the upstream decodes to the same resource
//! (`docs://%73ecret/plan`, `DOCS://Secret/plan`, `docs://public/../secret/plan`), or hides a
//! separator in an escape (`docs://public%2F..%2Fsecret`) that a template would take as one
//! segment and the upstream as a path. Invariant: policy, the endpoint's selection, the
//! handler lookup and the upstream all see one and the same normal form, in which
//!
//! - escapes of unreserved characters (`A-Z a-z 0-9 - . _ ~`) are decoded, and the other
//!   escapes' hex digits are uppercase;
//! - the scheme and the host are lowercase;
//! - `.` and `..` segments of a path are removed (in a URI with an authority or an absolute
//!   path);
//!
//! and a URI that still holds an escaped separator (`%2F`, `%5C`, `%3F`, `%23`, `%3A`, `%40`,
//! `%5B`, `%5D`), an escaped control character (`%00`-`%1F`, `%7F`), a malformed escape, a
//! raw control character or a raw backslash is refused (-32602) before anything reads it. Not
//! covered: an upstream that decodes twice (`%252F` reaches it as `%2F`, which it may decode
//! again), and meanings a scheme gives to other characters (sub-delimiters such as `;` are
//! kept as sent).

use std::fmt::Write as _;

use crate::error::GatewayError;

/// Characters that stay escaped: decoded, they would split the URI differently (RFC 3986
/// gen-delims and the backslash some servers take as `/`).
const SEPARATORS: &[u8] = b"/\\?#:@[]";

/// The normal form of `uri`, or -32602 naming why it is refused.
pub(crate) fn normalize(uri: &str) -> Result<String, GatewayError> {
    let refuse = |why: &str| GatewayError::invalid_params(format!("Invalid resource URI: {why}"));
    if uri.chars().any(char::is_control) {
        return Err(refuse("it holds a control character"));
    }
    // Not a URI character at all (RFC 3986 §2), and a separator to servers that take it as `/`.
    if uri.contains('\\') {
        return Err(refuse("it holds a backslash"));
    }
    let decoded = decode_unreserved(uri).map_err(refuse)?;
    Ok(case_and_dots(&decoded))
}

/// Decodes the escapes of unreserved characters and uppercases the rest; refuses escaped
/// separators, escaped control characters and malformed escapes.
fn decode_unreserved(uri: &str) -> Result<String, &'static str> {
    let bytes = uri.as_bytes();
    let mut out = String::with_capacity(uri.len());
    let mut i = 0;
    while let Some(offset) = uri[i..].find('%') {
        out.push_str(&uri[i..i + offset]);
        let at = i + offset;
        let (Some(hi), Some(lo)) = (bytes.get(at + 1).and_then(hex), bytes.get(at + 2).and_then(hex)) else {
            return Err("a % is not followed by two hex digits");
        };
        let byte = (hi << 4) | lo;
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else if SEPARATORS.contains(&byte) {
            return Err("it holds an escaped separator");
        } else if byte.is_ascii_control() {
            return Err("it holds an escaped control character");
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
        i = at + 3;
    }
    out.push_str(&uri[i..]);
    Ok(out)
}

fn hex(b: &u8) -> Option<u8> {
    char::from(*b).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// Lowercases the scheme and host and removes dot segments from the path. `uri` holds no
/// escaped separator, so its components are where its raw separators put them.
fn case_and_dots(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once(':').filter(|(s, _)| is_scheme(s)) else {
        return uri.to_owned();
    };
    let mut out = scheme.to_ascii_lowercase();
    out.push(':');
    // The path ends at the query or fragment, which are kept as they are.
    let split = rest.find(['?', '#']).unwrap_or(rest.len());
    let (hier, tail) = rest.split_at(split);
    let path = match hier.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            let (authority, path) = after.split_at(end);
            // Userinfo is case-sensitive; the host (and the port's digits) are not.
            let (userinfo, host) = match authority.rfind('@') {
                Some(at) => authority.split_at(at + 1),
                None => ("", authority),
            };
            out.push_str("//");
            out.push_str(userinfo);
            out.push_str(&host.to_ascii_lowercase());
            remove_dot_segments(path)
        }
        None if hier.starts_with('/') => remove_dot_segments(hier),
        None => hier.to_owned(),
    };
    out.push_str(&path);
    out.push_str(tail);
    out
}

/// RFC 3986 §3.1: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// RFC 3986 §5.2.4 for an empty or absolute path: `.` segments go, `..` removes the segment
/// before it (never above the root).
fn remove_dot_segments(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing_slash = false;
    for (n, segment) in segments.iter().enumerate() {
        match *segment {
            "." => trailing_slash = n == last,
            ".." => {
                kept.pop();
                trailing_slash = n == last;
            }
            s => {
                kept.push(s);
                trailing_slash = false;
            }
        }
    }
    let mut out = String::with_capacity(path.len());
    for segment in &kept {
        out.push('/');
        out.push_str(segment);
    }
    if trailing_slash || out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::normalize;

    fn ok(uri: &str) -> String {
        normalize(uri).unwrap_or_else(|e| panic!("{uri} refused: {e}"))
    }

    #[test]
    fn spellings_of_one_resource_have_one_normal_form() {
        for uri in [
            "docs://secret/plan",
            "docs://%73ecret/plan",
            "docs://%73%65%63%72%65%74/%70lan",
            "DOCS://SECRET/plan",
            "Docs://Secret/./plan",
            "docs://secret/public/../plan",
            "docs://secret/a/b/../../plan",
            "docs://secret/../../plan",
        ] {
            assert_eq!(ok(uri), "docs://secret/plan", "{uri}");
        }
        assert_eq!(ok("file:///tmp/%7euser/x"), "file:///tmp/~user/x");
        assert_eq!(ok("file:///a/b/.."), "file:///a/");
        assert_eq!(ok("docs://h"), "docs://h");
    }

    #[test]
    fn what_is_case_sensitive_keeps_its_case_and_other_escapes_are_uppercased() {
        assert_eq!(ok("docs://Alice@Host/Plan?Q=A#F"), "docs://Alice@host/Plan?Q=A#F");
        assert_eq!(ok("docs://h/a%2ab%c3%a9"), "docs://h/a%2Ab%C3%A9");
        assert_eq!(ok("docs://h/100%25"), "docs://h/100%25");
        assert_eq!(ok("urn:ISBN:0-486"), "urn:ISBN:0-486");
        assert_eq!(ok("no scheme at all"), "no scheme at all");
        // A query keeps its dots.
        assert_eq!(ok("docs://h/p?x=../y"), "docs://h/p?x=../y");
    }

    #[test]
    fn escaped_separators_control_characters_and_bad_escapes_are_refused() {
        for uri in [
            "docs://public%2F..%2Fsecret/plan",
            "docs://public/..%2fsecret",
            "docs://public%5C..%5Csecret",
            "docs://public/..\\secret/plan",
            "docs://secret/plan%3Fx",
            "docs://secret/plan%23x",
            "docs://evil%40secret/plan",
            "docs://secret/plan%00.txt",
            "docs://secret/plan%0a",
            "docs://secret/plan\nforged",
            "docs://secret/plan%",
            "docs://secret/plan%2",
            "docs://secret/plan%zz",
        ] {
            let refused = normalize(uri).expect_err(uri);
            assert!(refused.to_string().contains("Invalid resource URI"), "{uri}: {refused}");
        }
    }
}
