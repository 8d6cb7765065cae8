//! Resources: the `ResourceHandler` trait for fixed resources and URI templates, and RFC 6570
//! level-1 template matching (`{var}` matches one or more characters other than `/`).

use std::collections::BTreeMap;

use mcpgate_protocol::resource::{ReadResourceResult, Resource, ResourceTemplate};

use super::context::ToolContext;
use super::outcome::Outcome;
use super::tool::BoxFuture;

/// One resource, or one family of resources behind a URI template.
pub trait ResourceHandler: Send + Sync + 'static {
    /// The listed resource, for fixed resources.
    fn resource(&self) -> Option<&Resource> {
        None
    }

    /// The template, for template families.
    fn template(&self) -> Option<&ResourceTemplate> {
        None
    }

    /// Reads `uri` if this handler serves it; `None` when it does not.
    fn read<'a>(&'a self, uri: &'a str, cx: &'a ToolContext) -> Option<BoxFuture<'a, Outcome<ReadResourceResult>>>;

    /// The upstream server the resources come from (`None` for resources of this gateway):
    /// reading one counts against that upstream's rate limits.
    fn upstream(&self) -> Option<&str> {
        None
    }

    /// Completion values for a template variable.
    fn complete(&self, _variable: &str, _value: &str) -> Vec<String> {
        Vec::new()
    }
}

/// A parsed level-1 URI template.
#[derive(Debug, Clone)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone)]
enum Part {
    Literal(String),
    Var(String),
}

impl UriTemplate {
    /// Parses `a{b}c{d}`; `None` for unbalanced braces, empty or adjacent variables.
    pub fn parse(template: &str) -> Option<Self> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            } else if matches!(parts.last(), Some(Part::Var(_))) {
                return None;
            }
            let close = rest[open..].find('}')? + open;
            let name = &rest[open + 1..close];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return None;
            }
            parts.push(Part::Var(name.to_owned()));
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return None;
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Some(Self { parts })
    }

    /// Matches a URI, returning the variables.
    pub fn matches(&self, uri: &str) -> Option<BTreeMap<String, String>> {
        let mut vars = BTreeMap::new();
        let mut rest = uri;
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
                Part::Var(name) => {
                    let end = match self.parts.get(i + 1) {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    if value.is_empty() || value.contains('/') {
                        return None;
                    }
                    vars.insert(name.clone(), value.to_owned());
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(vars)
    }
}

#[cfg(test)]
mod tests {
    use super::UriTemplate;

    #[test]
    fn matches_level_one_templates() {
        let t = UriTemplate::parse("test://template/{id}/data").expect("valid");
        assert_eq!(t.matches("test://template/123/data").expect("match")["id"], "123");
        assert!(t.matches("test://template//data").is_none());
        assert!(t.matches("test://template/1/2/data").is_none());
        assert!(t.matches("test://template/123/data/x").is_none());
        let t = UriTemplate::parse("x://{a}-{b}").expect("valid");
        let v = t.matches("x://one-two").expect("match");
        assert_eq!((v["a"].as_str(), v["b"].as_str()), ("one", "two"));
        assert!(UriTemplate::parse("x://{a}{b}").is_none());
        assert!(UriTemplate::parse("x://{a").is_none());
        assert!(UriTemplate::parse("x://a}").is_none());
        assert!(UriTemplate::parse("x://{}").is_none());
    }
}
