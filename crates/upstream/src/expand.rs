//! `${VAR}` expansion of configuration values (secrets such as upstream headers and a child's
//! environment come only this way).
//!
//! Invariant: an error names the variable, never a value, so a secret cannot reach a log or
//! an error message through a failed expansion.

/// Expands `${VAR}` (and `$$` to `$`); the error names the variable, never a value.
pub(crate) fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body.find('}').ok_or_else(|| "unclosed ${ in the value".to_owned())?;
            let var = &body[..end];
            if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(format!("${{{var}}} is not a variable name"));
            }
            let found = lookup(var).ok_or_else(|| format!("environment variable {var} is not set"))?;
            out.push_str(&found);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(var: &str) -> Option<String> {
        (var == "TOKEN").then(|| "s3cret".to_owned())
    }

    #[test]
    fn expands_variables_and_names_missing_ones_without_values() {
        assert_eq!(expand("Bearer ${TOKEN}", &env).unwrap(), "Bearer s3cret");
        assert_eq!(expand("$$5 and $x", &env).unwrap(), "$5 and $x");
        let err = expand("${NOPE}", &env).unwrap_err();
        assert!(err.contains("NOPE") && !err.contains("s3cret"), "{err}");
        assert!(expand("${TOKEN", &env).is_err());
    }
}
