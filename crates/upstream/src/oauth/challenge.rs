//! The `Bearer` challenge of a protected upstream's 401 or 403 (RFC 6750 §3, in RFC 9110's
//! `WWW-Authenticate` syntax): where its protected resource metadata is (RFC 9728), the scope
//! the operation needs, and why the token failed.
//!
//! Threat model: the header comes from the upstream, which may be hostile or broken. Parsing
//! never panics, reads each parameter once (the first of a repeated name wins), takes quoted
//! strings with their escapes, and never mistakes text inside a quoted value for a parameter
//! (a `scope=` inside an `error_description` is not the scope). Other schemes' challenges in
//! the same header are skipped.

/// What a `Bearer` challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    /// `resource_metadata`: the upstream's protected resource metadata URL (RFC 9728 §5.1).
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the operation needs (space-separated).
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
}

impl BearerChallenge {
    /// The first `Bearer` challenge among the header values, if any.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        values.into_iter().flat_map(challenges).find(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer")).map(
            |(_, params)| {
                let mut challenge = Self::default();
                for (name, value) in params {
                    let slot = match name.to_ascii_lowercase().as_str() {
                        "resource_metadata" => &mut challenge.resource_metadata,
                        "scope" => &mut challenge.scope,
                        "error" => &mut challenge.error,
                        "error_description" => &mut challenge.error_description,
                        _ => continue,
                    };
                    slot.get_or_insert(value);
                }
                challenge
            },
        )
    }

    /// Whether the upstream refused for want of scope (a 403 step-up).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The challenges of one header value: each scheme with its auth-params, in order. A
/// challenge is `scheme [token68 | param *("," param)]`; an element without `=` after its first
/// token starts the next challenge.
fn challenges(value: &str) -> Vec<(&str, Vec<(&str, String)>)> {
    let mut out: Vec<(&str, Vec<(&str, String)>)> = Vec::new();
    for element in elements(value) {
        let element = element.trim_matches([' ', '\t']);
        if element.is_empty() {
            continue;
        }
        let first_end = element.find(|c: char| !is_token_char(c)).unwrap_or(element.len());
        if first_end == 0 {
            continue;
        }
        let after_first = element[first_end..].trim_start_matches([' ', '\t']);
        if let Some(value) = after_first.strip_prefix('=') {
            // `name=value` of the challenge in progress.
            if let Some((_, params)) = out.last_mut() {
                params.push((&element[..first_end], param_value(value)));
            }
            continue;
        }
        // A new challenge: its scheme, then maybe its first parameter (or a token68, dropped).
        let mut params = Vec::new();
        let name_end = after_first.find(|c: char| !is_token_char(c)).unwrap_or(after_first.len());
        let after_name = after_first[name_end..].trim_start_matches([' ', '\t']);
        if name_end > 0 && after_name.starts_with('=') && !after_name.starts_with("==") {
            params.push((&after_first[..name_end], param_value(&after_name[1..])));
        }
        out.push((&element[..first_end], params));
    }
    out
}

/// The value after a parameter's `=`: a quoted string (escapes resolved) or a token.
fn param_value(s: &str) -> String {
    let s = s.trim_start_matches([' ', '\t']);
    match s.strip_prefix('"') {
        Some(quoted) => {
            let mut out = String::new();
            let mut chars = quoted.chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => out.extend(chars.next()),
                    c => out.push(c),
                }
            }
            out
        }
        None => s.trim_end_matches([' ', '\t']).to_owned(),
    }
}

/// The header value split at commas outside quoted strings.
fn elements(value: &str) -> Vec<&str> {
    let (mut out, mut start, mut quoted, mut escaped) = (Vec::new(), 0, false, false);
    for (i, c) in value.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&value[start..]);
    out
}

/// RFC 9110 `tchar`.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

#[cfg(test)]
mod tests {
    use super::BearerChallenge;

    fn parse(value: &str) -> Option<BearerChallenge> {
        BearerChallenge::parse([value])
    }

    #[test]
    fn reads_the_parameters_of_a_bearer_challenge() {
        let c = parse(r#"Bearer scope="mcp:basic", resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp""#)
            .expect("a bearer challenge");
        assert_eq!(c.scope.as_deref(), Some("mcp:basic"));
        assert_eq!(c.resource_metadata.as_deref(), Some("https://a.example/.well-known/oauth-protected-resource/mcp"));
        assert_eq!(c.error, None);
        let c = parse(r#"bearer error="insufficient_scope", scope="mcp:write mcp:basic""#).expect("case-insensitive");
        assert!(c.insufficient_scope());
        assert_eq!(c.scope.as_deref(), Some("mcp:write mcp:basic"));
        let c = parse("Bearer error=invalid_token, resource_metadata=\"x\"").expect("token values");
        assert_eq!((c.error.as_deref(), c.resource_metadata.as_deref()), (Some("invalid_token"), Some("x")));
    }

    #[test]
    fn text_inside_a_quoted_value_is_not_a_parameter() {
        let c = parse(r#"Bearer error_description="bad scope=\"admin\", resource_metadata=evil", scope="read""#)
            .expect("a bearer challenge");
        assert_eq!(c.scope.as_deref(), Some("read"));
        assert_eq!(c.resource_metadata, None);
        assert_eq!(c.error_description.as_deref(), Some(r#"bad scope="admin", resource_metadata=evil"#));
    }

    #[test]
    fn other_schemes_are_skipped_and_the_first_value_wins() {
        let c = parse(r#"Basic realm="x", Bearer scope="a""#).expect("the bearer challenge after Basic");
        assert_eq!(c.scope.as_deref(), Some("a"));
        let c = BearerChallenge::parse([r#"Basic realm="x""#, r#"Bearer scope="b", scope="c""#]).expect("second value");
        assert_eq!(c.scope.as_deref(), Some("b"), "a repeated parameter: the first wins");
        assert_eq!(parse(r#"Basic realm="x""#), None);
        assert_eq!(parse("Bearer").map(|c| c.scope), Some(None), "a bare scheme is a challenge without parameters");
    }

    #[test]
    fn hostile_headers_do_not_panic() {
        for value in [
            "",
            ",,,",
            "Bearer =",
            "Bearer scope=\"unterminated",
            "Bearer scope=\"a\\",
            "==",
            "Bearer a b c",
            "Bearer ,scope=x",
            "\u{1F600}=\"\"",
        ] {
            let _ = parse(value);
        }
        assert_eq!(parse("Bearer scope=\"unterminated").and_then(|c| c.scope).as_deref(), Some("unterminated"));
    }
}
