//! What a rule sees: the caller (`principal`, `server`) and the use it is about (`method`,
//! `tool` / `prompt` / `resource`, `upstream`, `arguments`), handed to CEL through a resolver.
//!
//! Invariants: nothing is converted before a rule reads it, and only what the policy's rules
//! can read ([`Reads`]) is. Names and JSON strings are lent to CEL without a copy; the
//! principal becomes a CEL value at most once per [`Caller`] (a request, or a whole list) for
//! the policy it serves, the arguments at most once per evaluation.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use cel::common::types::CelString;
use cel::common::value::CowVal;
use cel::context::VariableResolver;
use serde_json::{Map, Value as Json};

use mcpgate_runtime::Principal;

use super::conversion::{self, Converted};
use super::reads::Reads;

/// Who is asking, and through which server (`""`: the root endpoint).
pub struct Caller<'a> {
    principal: &'a Principal,
    server: &'a str,
    /// The principal as converted for the policy with this id: a caller serves one policy in
    /// practice; were it handed to another, that one converts for itself per evaluation.
    value: OnceLock<(u64, Converted<'a>)>,
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

    /// The principal.
    pub(super) fn principal(&self) -> &'a Principal {
        self.principal
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
pub(super) struct Variables<'c, 'p, 'u> {
    caller: &'c Caller<'p>,
    used: Use<'u>,
    /// What the policy's rules read, and the policy's id (for the caller's cache).
    reads: &'c Reads,
    policy: u64,
    /// The principal, when the caller's cache holds another policy's.
    principal: OnceLock<Converted<'p>>,
    arguments: OnceLock<Converted<'u>>,
}

impl<'c, 'p, 'u> Variables<'c, 'p, 'u> {
    pub(super) fn new(caller: &'c Caller<'p>, used: Use<'u>, reads: &'c Reads, policy: u64) -> Self {
        Self { caller, used, reads, policy, principal: OnceLock::new(), arguments: OnceLock::new() }
    }

    fn principal_value(&self) -> &Converted<'p> {
        let convert = || conversion::principal(self.caller.principal, &self.reads.principal);
        match self.caller.value.get_or_init(|| (self.policy, convert())) {
            (policy, value) if *policy == self.policy => value,
            _ => self.principal.get_or_init(convert),
        }
    }

    fn arguments_value(&self) -> &Converted<'u> {
        self.arguments.get_or_init(|| match self.used.arguments {
            Arguments::None => conversion::object(NO_ARGUMENTS.get_or_init(Map::new), &self.reads.arguments),
            Arguments::Json(map) => conversion::object(map, &self.reads.arguments),
            Arguments::Strings(map) => conversion::strings(map, &self.reads.arguments),
        })
    }
}

/// The arguments of a list entry.
static NO_ARGUMENTS: OnceLock<Map<String, Json>> = OnceLock::new();

/// The value of a variable that is a name (`tool`, `server`, ...): `""` where the use has none.
pub(super) fn text_of<'r>(caller: &'r Caller<'_>, used: &'r Use<'_>, variable: &str) -> Option<&'r str> {
    let item = used.target;
    Some(match variable {
        "server" => caller.server,
        "method" => item.method(),
        "tool" => {
            if let Item::Tool(name) = item {
                name
            } else {
                ""
            }
        }
        "prompt" => {
            if let Item::Prompt(name) = item {
                name
            } else {
                ""
            }
        }
        "resource" => {
            if let Item::Resource(uri) = item {
                uri
            } else {
                ""
            }
        }
        "upstream" => used.upstream.unwrap_or(""),
        _ => return None,
    })
}

impl VariableResolver for Variables<'_, '_, '_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        match variable {
            "principal" => Some(CowVal::Borrowed(self.principal_value().as_ref())),
            "arguments" => Some(CowVal::Borrowed(self.arguments_value().as_ref())),
            _ => text_of(self.caller, &self.used, variable).map(|text| CowVal::owned(CelString::from(text))),
        }
    }
}
