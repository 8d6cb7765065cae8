//! A virtual server's selection: which tools, prompts and resources of the federated catalog
//! it serves, as globs over their exposed names and resource URIs (or URI templates).
//!
//! Invariant: an empty list selects nothing of its kind and `["*"]` everything; what is not
//! selected does not exist on that server (lists leave it out, a use of it is "unknown").

use mcpgate_upstream::glob::Glob;

/// The globs of one server.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    tools: Vec<String>,
    prompts: Vec<String>,
    resources: Vec<String>,
}

impl Selection {
    /// A selection of these globs.
    pub fn new(tools: &[String], prompts: &[String], resources: &[String]) -> Self {
        Self { tools: tools.to_vec(), prompts: prompts.to_vec(), resources: resources.to_vec() }
    }

    /// Whether the tool exposed as `name` is selected.
    pub fn tool(&self, name: &str) -> bool {
        any(&self.tools, name)
    }

    /// Whether the prompt `name` is selected.
    pub fn prompt(&self, name: &str) -> bool {
        any(&self.prompts, name)
    }

    /// Whether the resource `uri` (or the URI template `uri`) is selected.
    pub fn resource(&self, uri: &str) -> bool {
        any(&self.resources, uri)
    }

    /// Whether it may select any tool, prompt, resource (for the capabilities it announces).
    pub fn kinds(&self) -> (bool, bool, bool) {
        (!self.tools.is_empty(), !self.prompts.is_empty(), !self.resources.is_empty())
    }
}

fn any(globs: &[String], name: &str) -> bool {
    globs.iter().any(|g| g == "*" || g == name || Glob::new(g).matches(name))
}

#[cfg(test)]
mod tests {
    use super::Selection;

    #[test]
    fn absent_is_none_and_star_is_all() {
        let s = Selection::new(&["gh_*".to_owned(), "echo".to_owned()], &[], &["*".to_owned()]);
        assert!(s.tool("gh_create_issue") && s.tool("echo"));
        assert!(!s.tool("echo2") && !s.tool("db_query"));
        assert!(!s.prompt("greet"), "no prompts listed: none selected");
        assert!(s.resource("file:///x") && s.resource("demo://{id}"));
        assert_eq!(s.kinds(), (true, false, true));
    }
}
