//! What a rule sees: the caller (`principal`, `server`) and the use it is about (`method`,
//! `tool` / `prompt` / `resource`, `upstream`, `arguments`), handed to CEL through a resolver.
//!
//! Invariant: nothing is converted before a rule reads it. Names are lent to CEL without a
//! copy; the principal and the arguments become CEL values at most once per evaluation (the
//! principal at most once per request, when one [`Caller`] serves a whole list), and only when
//! some rule reads them.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use cel::Value;
use cel::common::types::CelString;
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use serde::Serialize;
use serde_json::{Map, Value as Json};

use mcpgate_runtime::Principal;

/// Who is asking, and through which server (`""`: the root endpoint).
pub struct Caller<'a> {
    principal: &'a Principal,
    server: &'a str,
    value: OnceLock<Box<dyn Val>>,
}

impl<'a> Caller<'a> {
    /// `principal` at the root endpoint.
    pub fn root(principal: &'a Principal) -> Self {
        Self::at(principal, "")
    }

    /// `principal` through the virtual server named `server`.
    pub fn at(principal: &'a Principal, server: &'a str) -> Self {
        Self { principal, server, value: OnceLock::new() }
    }

    /// The principal's log id (never its subject in clear text).
    pub(super) fn log_id(&self) -> String {
        self.principal.log_id()
    }

    fn principal_value(&self) -> &dyn Val {
        #[derive(Serialize)]
        struct View<'p> {
            sub: &'p str,
            iss: &'p str,
            scopes: &'p [String],
            claims: &'p Map<String, Json>,
        }
        static NO_CLAIMS: OnceLock<Map<String, Json>> = OnceLock::new();
        let boxed = self.value.get_or_init(|| {
            let p = self.principal;
            let claims = p.claims().unwrap_or_else(|| NO_CLAIMS.get_or_init(Map::new));
            let view = View { sub: p.subject(), iss: p.issuer(), scopes: p.scopes(), claims };
            to_val(cel::to_value(view).unwrap_or(Value::Null))
        });
        boxed.as_ref()
    }
}

/// What is used.
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    /// A tool, by name.
    Tool(&'a str),
    /// A prompt, by name.
    Prompt(&'a str),
    /// A resource, by URI (or URI template, for a template in a list).
    Resource(&'a str),
}

impl<'a> Item<'a> {
    /// The name or URI.
    pub fn name(self) -> &'a str {
        match self {
            Self::Tool(n) | Self::Prompt(n) | Self::Resource(n) => n,
        }
    }

    /// The method that uses it (for a list entry too: a rule on `method == "tools/call"`
    /// governs both the call and the tool's place in `tools/list`).
    pub fn method(self) -> &'static str {
        match self {
            Self::Tool(_) => "tools/call",
            Self::Prompt(_) => "prompts/get",
            Self::Resource(_) => "resources/read",
        }
    }
}

/// The arguments of a use.
#[derive(Debug, Clone, Copy)]
pub enum Arguments<'a> {
    /// A list entry: no arguments (`{}`).
    None,
    /// A tool call's.
    Json(&'a Map<String, Json>),
    /// A prompt's (string values).
    Strings(&'a BTreeMap<String, String>),
}

/// One use of a tool, prompt or resource.
#[derive(Debug, Clone, Copy)]
pub struct Use<'a> {
    /// What is used.
    pub target: Item<'a>,
    /// The upstream serving it (`None` for the gateway's own).
    pub upstream: Option<&'a str>,
    /// Its arguments.
    pub arguments: Arguments<'a>,
}

/// The resolver of one evaluation.
pub(super) struct Variables<'c, 'a> {
    caller: &'c Caller<'a>,
    used: Use<'a>,
    arguments: OnceLock<Box<dyn Val>>,
}

impl<'c, 'a> Variables<'c, 'a> {
    pub(super) fn new(caller: &'c Caller<'a>, used: Use<'a>) -> Self {
        Self { caller, used, arguments: OnceLock::new() }
    }

    fn arguments_value(&self) -> &dyn Val {
        let boxed = self.arguments.get_or_init(|| {
            let value = match self.used.arguments {
                Arguments::None => Ok(Value::from(std::collections::HashMap::<String, Value>::new())),
                Arguments::Json(map) => cel::to_value(map),
                Arguments::Strings(map) => cel::to_value(map),
            };
            to_val(value.unwrap_or(Value::Null))
        });
        boxed.as_ref()
    }
}

impl VariableResolver for Variables<'_, '_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        let text = |s: &'b str| Some(CowVal::owned(CelString::from(s)));
        let item = self.used.target;
        match variable {
            "principal" => Some(CowVal::Borrowed(self.caller.principal_value())),
            "server" => text(self.caller.server),
            "method" => text(self.used.target.method()),
            "tool" => text(if let Item::Tool(name) = item { name } else { "" }),
            "prompt" => text(if let Item::Prompt(name) = item { name } else { "" }),
            "resource" => text(if let Item::Resource(uri) = item { uri } else { "" }),
            "upstream" => text(self.used.upstream.unwrap_or("")),
            "arguments" => Some(CowVal::Borrowed(self.arguments_value())),
            _ => None,
        }
    }
}

fn to_val(value: Value) -> Box<dyn Val> {
    Box::<dyn Val>::try_from(value).unwrap_or_else(|_| Box::new(cel::common::types::CelNull))
}
