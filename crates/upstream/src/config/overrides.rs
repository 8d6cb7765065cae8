//! `[upstream.overrides.<tool>]`: what the operator changes about one upstream tool before
//! anyone sees it (its exposed name, title, description, annotations, arguments fixed or
//! defaulted), and what that does to its definition and to each call.
//!
//! Invariants: a validated override renames to a valid tool name no other override of any
//! upstream takes, and no argument is both fixed and defaulted; a call sent upstream carries
//! every hidden argument with the operator's value, whatever the caller sent (a caller naming
//! a hidden argument is refused, never silently overwritten); the upstream's own definition is
//! never changed in place (pinning hashes it as sent).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use mcpgate_protocol::tool::{Tool as ToolInfo, ToolAnnotations};

/// One upstream tool's override (key: the upstream's own tool name).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolOverride {
    /// The exposed name as written (no upstream prefix); unset: `<upstream><separator><name>`.
    pub rename: Option<String>,
    /// Replaces the upstream's title.
    pub title: Option<String>,
    /// Replaces the upstream's description (what the model reads).
    pub description: Option<String>,
    /// Merged over the upstream's annotations, hint by hint.
    pub annotations: AnnotationOverride,
    /// Arguments the operator fixes: gone from the advertised schema, sent on every call.
    pub hidden: BTreeMap<String, Value>,
    /// Values for arguments the caller leaves out: advertised as the schema's `default`.
    pub defaults: BTreeMap<String, Value>,
}

/// `annotations` of an override: each set hint replaces the upstream's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct AnnotationOverride {
    /// Display name.
    pub title: Option<String>,
    /// Does not modify its environment.
    pub read_only_hint: Option<bool>,
    /// May perform destructive updates.
    pub destructive_hint: Option<bool>,
    /// Repeating a call has no further effect (also makes it safe to rerun after a replica died).
    pub idempotent_hint: Option<bool>,
    /// Interacts with an open world.
    pub open_world_hint: Option<bool>,
}

impl AnnotationOverride {
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    fn merge_over(&self, base: Option<&ToolAnnotations>) -> ToolAnnotations {
        let mut merged = base.cloned().unwrap_or_default();
        if let Some(title) = &self.title {
            merged.title = Some(title.clone());
        }
        for (hint, value) in [
            (&mut merged.read_only_hint, self.read_only_hint),
            (&mut merged.destructive_hint, self.destructive_hint),
            (&mut merged.idempotent_hint, self.idempotent_hint),
            (&mut merged.open_world_hint, self.open_world_hint),
        ] {
            if value.is_some() {
                *hint = value;
            }
        }
        merged
    }
}

impl ToolOverride {
    /// What the types alone cannot check: `Err((key under the override, problem))`.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        if let Some(rename) = &self.rename
            && !is_valid_tool_name(rename)
        {
            return Err((
                "rename".to_owned(),
                format!("{rename:?} breaks the tool name rules (1-128 of A-Z a-z 0-9 _ - .)"),
            ));
        }
        if let Some(both) = self.hidden.keys().find(|k| self.defaults.contains_key(*k)) {
            return Err((
                format!("defaults.{both}"),
                "also in hidden: a hidden argument's value is fixed, it has no default".to_owned(),
            ));
        }
        for (section, map) in [("hidden", &self.hidden), ("defaults", &self.defaults)] {
            if map.contains_key("") {
                return Err((section.to_owned(), "an empty argument name".to_owned()));
            }
        }
        Ok(())
    }

    /// The definition callers see in place of the upstream's `info` (named `exposed`): title,
    /// description and annotations replaced, hidden arguments gone from the schema, defaults
    /// advertised (a defaulted argument is no longer required: the gateway fills it in). The
    /// second value names each hidden or default argument the upstream's schema lacks.
    pub fn advertise(&self, info: &ToolInfo, exposed: String) -> (ToolInfo, Vec<String>) {
        let mut out = info.clone();
        out.name = exposed;
        if let Some(title) = &self.title {
            out.title = Some(title.clone());
        }
        if let Some(description) = &self.description {
            out.description = Some(description.clone());
        }
        if !self.annotations.is_empty() {
            out.annotations = Some(self.annotations.merge_over(info.annotations.as_ref()));
        }
        let mut missing = Vec::new();
        let schema = &mut out.input_schema;
        let has = |schema: &Map<String, Value>, arg: &str| {
            schema.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(arg))
        };
        for arg in self.hidden.keys().chain(self.defaults.keys()) {
            if !has(schema, arg) {
                missing.push(arg.clone());
            }
        }
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            for arg in self.hidden.keys() {
                properties.remove(arg);
            }
            for (arg, value) in &self.defaults {
                match properties.get_mut(arg) {
                    Some(Value::Object(property)) => {
                        property.insert("default".to_owned(), value.clone());
                    }
                    // `true` (anything goes) takes the default as a schema of its own.
                    Some(property @ Value::Bool(true)) => {
                        *property = serde_json::json!({ "default": value });
                    }
                    _ => {}
                }
            }
        }
        if let Some(Value::Array(required)) = schema.get_mut("required") {
            required
                .retain(|r| r.as_str().is_none_or(|r| !self.hidden.contains_key(r) && !self.defaults.contains_key(r)));
        }
        (out, missing)
    }

    /// Refuses a call naming a hidden argument: its value is the operator's, and it is not in
    /// the schema the caller was given. `Err` names the argument.
    pub fn check(&self, arguments: &Value) -> Result<(), String> {
        match arguments.as_object().and_then(|args| self.hidden.keys().find(|h| args.contains_key(*h))) {
            Some(arg) => {
                Err(format!("argument {arg:?} is not accepted: its value is fixed by the gateway's configuration"))
            }
            None => Ok(()),
        }
    }

    /// The arguments sent upstream for the caller's `arguments` (which `check` accepted):
    /// defaults fill what the caller left out, then hidden values are put in, last.
    pub fn arguments(&self, arguments: &Value) -> Value {
        if self.hidden.is_empty() && self.defaults.is_empty() {
            return arguments.clone();
        }
        let mut args = arguments.as_object().cloned().unwrap_or_default();
        for (arg, value) in &self.defaults {
            args.entry(arg.clone()).or_insert_with(|| value.clone());
        }
        for (arg, value) in &self.hidden {
            args.insert(arg.clone(), value.clone());
        }
        Value::Object(args)
    }
}

/// MCP tool names: 1 to 128 of `A-Z a-z 0-9 _ - .`.
pub(crate) fn is_valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn echo() -> ToolInfo {
        serde_json::from_value(json!({
            "name": "echo",
            "title": "Echo Tool",
            "description": "Echoes back the input string",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "message": {"type": "string"},
                    "loud": {"type": "boolean"},
                    "times": {"type": "integer"},
                },
                "required": ["message", "times"],
                "additionalProperties": false,
            },
            "annotations": {"readOnlyHint": true, "idempotentHint": true},
        }))
        .expect("a tool")
    }

    /// An override as the config would hold it (JSON here; the TOML table maps the same).
    fn parsed(value: Value) -> ToolOverride {
        serde_json::from_value(value).expect("an override")
    }

    #[test]
    fn the_schema_loses_hidden_arguments_and_advertises_defaults() {
        let o = parsed(json!({
            "rename": "shout",
            "title": "Shout",
            "description": "Says it loudly",
            "annotations": {"destructiveHint": false, "title": "Loud"},
            "hidden": {"loud": true},
            "defaults": {"times": 2},
        }));
        let (info, missing) = o.advertise(&echo(), "shout".to_owned());
        assert!(missing.is_empty(), "{missing:?}");
        assert_eq!((info.name.as_str(), info.title.as_deref()), ("shout", Some("Shout")));
        assert_eq!(info.description.as_deref(), Some("Says it loudly"));
        let annotations = info.annotations.expect("merged");
        assert_eq!(annotations.title.as_deref(), Some("Loud"));
        assert_eq!(
            (annotations.read_only_hint, annotations.idempotent_hint, annotations.destructive_hint),
            (Some(true), Some(true), Some(false)),
            "the upstream's hints stay unless overridden"
        );
        let schema = Value::Object(info.input_schema);
        assert_eq!(
            schema["properties"],
            json!({"message": {"type": "string"}, "times": {"type": "integer", "default": 2}})
        );
        assert_eq!(schema["required"], json!(["message"]), "a defaulted argument is filled in, so optional");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(echo().input_schema["required"], json!(["message", "times"]), "the original is untouched");
    }

    #[test]
    fn arguments_the_upstream_lacks_are_reported() {
        let o = parsed(json!({"hidden": {"nope": 1}, "defaults": {"missing": 2, "times": 3}}));
        let (_, missing) = o.advertise(&echo(), "up_echo".to_owned());
        assert_eq!(missing, ["nope", "missing"]);
    }

    #[test]
    fn an_empty_override_changes_only_the_name() {
        let (info, _) = ToolOverride::default().advertise(&echo(), "up_echo".to_owned());
        assert_eq!(info, ToolInfo { name: "up_echo".to_owned(), ..echo() });
    }

    #[test]
    fn defaults_fill_what_is_missing_and_hidden_values_go_in_last() {
        let o = parsed(json!({"hidden": {"loud": true}, "defaults": {"times": 2, "message": "hi"}}));
        assert_eq!(o.arguments(&json!({"message": "yo"})), json!({"message": "yo", "times": 2, "loud": true}));
        assert_eq!(o.arguments(&json!({"times": null})), json!({"message": "hi", "times": null, "loud": true}));
        assert_eq!(o.arguments(&json!({})), json!({"message": "hi", "times": 2, "loud": true}));
        assert_eq!(ToolOverride::default().arguments(&json!({"a": 1})), json!({"a": 1}));
    }

    #[test]
    fn a_caller_naming_a_hidden_argument_is_refused_naming_it() {
        let o = parsed(json!({"hidden": {"loud": true}}));
        let refused = o.check(&json!({"message": "yo", "loud": false})).expect_err("refused");
        assert!(refused.contains("\"loud\""), "{refused}");
        assert!(o.check(&json!({"message": "yo"})).is_ok());
    }

    #[test]
    fn validation_names_the_key() {
        assert_eq!(parsed(json!({"rename": "no spaces"})).validate().expect_err("bad").0, "rename");
        assert_eq!(parsed(json!({"rename": ""})).validate().expect_err("empty").0, "rename");
        let both = parsed(json!({"hidden": {"a": 1}, "defaults": {"a": 2}})).validate().expect_err("both");
        assert_eq!(both.0, "defaults.a");
        assert!(parsed(json!({"rename": "a.b-c_D", "hidden": {"a": 1}})).validate().is_ok());
        for unknown in [json!({"renamed": "x"}), json!({"annotations": {"readonlyhint": true}})] {
            assert!(serde_json::from_value::<ToolOverride>(unknown.clone()).is_err(), "{unknown} refused");
        }
    }
}
