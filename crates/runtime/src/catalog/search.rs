//! Search instead of a wall of tools (`discovery = "search"` on a server): the two tools such a
//! server lists, `search_tools` and `call_tool`; the ranking that answers a search; and the
//! parsing of both tools' arguments.
//!
//! Invariants: ranking is a pure function of the query and the tools, so every replica gives
//! the same answer (ties by name); its work is bounded whatever the query (at most
//! [`MAX_QUERY_CHARS`] characters and [`MAX_QUERY_TOKENS`] distinct tokens of it count, and at
//! most `MAX_FIELD_BYTES` of each description); a search shows exactly the tools a filtered
//! `tools/list` would show the same caller. The two names are reserved: an upstream tool exposed
//! under either is hidden on a search server (never found, never called through `call_tool`).

use serde_json::{Value, json};

use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::tool::{CallToolResult, ListToolsResult, Tool as ToolInfo, ToolAnnotations};
use mcpgate_protocol::{Era, JsonObject};

use super::outcome::Failure;
use super::tool::ToolDescriptor;
use super::{Catalog, ListFilter, finish, tool_info};
use crate::error::RuntimeError;
use crate::principal::Principal;

/// The searching tool's name (reserved on a search server).
pub const SEARCH_TOOLS: &str = "search_tools";
/// The calling tool's name (reserved on a search server).
pub const CALL_TOOL: &str = "call_tool";
/// The longest query `search_tools` accepts, in characters (JSON Schema `maxLength` counts
/// characters); [`rank`] reads no further than this either.
pub const MAX_QUERY_CHARS: usize = 256;
/// How many distinct query tokens count; the rest are ignored, so a hostile query costs at most
/// this many passes over each tool.
pub const MAX_QUERY_TOKENS: usize = 16;
/// Results when the caller gives no `limit`.
pub const DEFAULT_LIMIT: usize = 10;
/// The most results one search returns.
pub const MAX_LIMIT: usize = 50;
/// How much of a description is read: upstreams write descriptions, and a huge one must not make
/// every search slow (what matters for matching is near the start).
const MAX_FIELD_BYTES: usize = 4096;

// Scores. An exact name beats any sum of token matches (at most 16 tokens × NAME_WHOLE); a name
// token beats a title token beats a description token; a prefix scores a bit under a whole token.
const EXACT_NAME: u32 = 1000;
const NAME_WHOLE: u32 = 30;
const NAME_PREFIX: u32 = 20;
const TITLE_WHOLE: u32 = 12;
const TITLE_PREFIX: u32 = 8;
const DESCRIPTION_WHOLE: u32 = 4;
const DESCRIPTION_PREFIX: u32 = 3;

/// Words that match nearly every description; dropped from a query that has other words.
const STOP_WORDS: &[&str] =
    &["a", "an", "and", "by", "for", "from", "in", "is", "it", "of", "on", "or", "the", "to", "with"];

/// Whether `name` is one of the two tools of a search server (an upstream tool exposed under it
/// is hidden there).
pub fn is_reserved(name: &str) -> bool {
    name == SEARCH_TOOLS || name == CALL_TOOL
}

/// The definition of `search_tools`.
pub fn search_tools_definition() -> ToolInfo {
    let input = json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "description": "Words to look for in tool names, titles and descriptions, e.g. \"create github issue\"."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": DEFAULT_LIMIT,
                "description": "The most tools to return, best match first."
            }
        },
        "required": ["query"]
    });
    let output = json!({
        "type": "object",
        "properties": {
            "tools": {
                "type": "array",
                "items": {"type": "object"},
                "description": "Full tool definitions (name, description, inputSchema, ...), best match first."
            }
        },
        "required": ["tools"]
    });
    definition(
        SEARCH_TOOLS,
        "Search tools",
        "Searches this server's tools by name, title and description and returns the best matches, \
         best first, with their full definitions (including inputSchema). Call a tool found this \
         way with call_tool, giving its name and arguments that match its inputSchema.",
        input,
        Some(output),
        Some(ToolAnnotations {
            read_only_hint: Some(true),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
            ..ToolAnnotations::default()
        }),
    )
}

/// The definition of `call_tool`. No behaviour hints: it does whatever the tool it calls does.
pub fn call_tool_definition() -> ToolInfo {
    let input = json!({
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "description": "The name of a tool that search_tools returned."
            },
            "arguments": {
                "type": "object",
                "description": "The tool's arguments, matching the inputSchema search_tools returned for it."
            }
        },
        "required": ["name"]
    });
    definition(
        CALL_TOOL,
        "Call a tool",
        "Calls one of this server's tools by name and returns its result as the tool gave it. \
         Find the tool and the arguments it takes with search_tools first.",
        input,
        None,
        None,
    )
}

/// Both tools of a search server, in the order its `tools/list` shows them.
pub fn definitions() -> [ToolInfo; 2] {
    [search_tools_definition(), call_tool_definition()]
}

fn definition(
    name: &str,
    title: &str,
    description: &str,
    input: Value,
    output: Option<Value>,
    annotations: Option<ToolAnnotations>,
) -> ToolInfo {
    let object = |v: Value| match v {
        Value::Object(map) => map,
        _ => unreachable!("schemas above are objects"),
    };
    ToolInfo {
        name: name.to_owned(),
        title: Some(title.to_owned()),
        description: Some(description.to_owned()),
        input_schema: object(input),
        output_schema: output.map(object),
        annotations,
        execution: None,
        icons: None,
        meta: None,
    }
}

/// The arguments of a `search_tools` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    /// What to look for (1 to [`MAX_QUERY_CHARS`] characters, not only blanks).
    pub query: String,
    /// The most results (1 to [`MAX_LIMIT`]; [`DEFAULT_LIMIT`] when not given).
    pub limit: usize,
}

impl SearchRequest {
    /// Reads `search_tools` arguments; other members are ignored.
    pub fn parse(arguments: Option<&JsonObject>) -> Result<Self, Failure> {
        let invalid = |problem: String| Failure::InvalidArguments(format!("{SEARCH_TOOLS}: {problem}"));
        let query = match arguments.and_then(|a| a.get("query")) {
            None => return Err(invalid("`query` is required".to_owned())),
            Some(Value::String(query)) => query,
            Some(other) => return Err(invalid(format!("`query` must be a string, not {}", kind(other)))),
        };
        if query.trim().is_empty() {
            return Err(invalid("`query` is empty".to_owned()));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(invalid(format!("`query` is longer than {MAX_QUERY_CHARS} characters")));
        }
        let limit = match arguments.and_then(|a| a.get("limit")) {
            None | Some(Value::Null) => DEFAULT_LIMIT,
            Some(value) => match value.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n) if (1..=MAX_LIMIT).contains(&n) => n,
                // A number is short and worth showing; anything else only by its kind (a string
                // or an object could be of any size).
                _ => {
                    let what = if value.is_number() { value.to_string() } else { kind(value).to_owned() };
                    return Err(invalid(format!("`limit` must be an integer from 1 to {MAX_LIMIT}, not {what}")));
                }
            },
        };
        Ok(Self { query: query.clone(), limit })
    }
}

/// The arguments of a `call_tool` call: which tool, with what.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    /// The tool to call (not empty, not one of the two reserved names).
    pub name: String,
    /// Its arguments (`None` when not given, or given as `null`).
    pub arguments: Option<JsonObject>,
}

impl CallRequest {
    /// Reads `call_tool` arguments, taking them over (a call's arguments may be large); other
    /// members are ignored.
    pub fn parse(arguments: Option<JsonObject>) -> Result<Self, Failure> {
        let invalid = |problem: String| Failure::InvalidParams(format!("{CALL_TOOL}: {problem}"));
        let mut arguments = arguments.unwrap_or_default();
        let name = match arguments.remove("name") {
            None => return Err(invalid("`name` is required".to_owned())),
            Some(Value::String(name)) => name,
            Some(other) => return Err(invalid(format!("`name` must be a string, not {}", kind(&other)))),
        };
        if name.is_empty() {
            return Err(invalid("`name` is empty".to_owned()));
        }
        if is_reserved(&name) {
            return Err(invalid(format!("`name` cannot be {name}: call {name} directly")));
        }
        let arguments = match arguments.remove("arguments") {
            None | Some(Value::Null) => None,
            Some(Value::Object(args)) => Some(args),
            Some(other) => return Err(invalid(format!("`arguments` must be an object, not {}", kind(&other)))),
        };
        Ok(Self { name, arguments })
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The result of a `search_tools` call: `structuredContent: {"tools": [...]}`, and the same JSON
/// as text for clients that do not read structured content.
pub fn search_result(tools: &[ToolInfo]) -> Result<CallToolResult, RuntimeError> {
    let rendering = |e| RuntimeError::Rendering { what: "search results", source: std::sync::Arc::new(e) };
    let structured = json!({ "tools": serde_json::to_value(tools).map_err(rendering)? });
    let text = serde_json::to_string(&structured).map_err(rendering)?;
    Ok(CallToolResult {
        content: vec![ContentBlock::text(text)],
        structured_content: Some(structured),
        ..CallToolResult::default()
    })
}

/// The tools of `tools` that match `query`, best first, at most `limit` of them.
///
/// Query and fields are split into lowercase tokens (on anything not a letter or digit, and
/// between camelCase words). Each query token scores its best match in the tool: a name token,
/// then a title token, then a description token, a prefix or a plural a bit less than a whole
/// token; the scores of all query tokens add up, and a query that is the tool's name (or its
/// tokens in order) comes before any other. Ties go by name; tools that score nothing are left
/// out.
pub fn rank<'a>(query: &str, tools: impl IntoIterator<Item = &'a ToolInfo>, limit: usize) -> Vec<&'a ToolInfo> {
    fn itself<'x>(tool: &'x &ToolInfo) -> &'x ToolInfo {
        tool
    }
    rank_by(query, tools, itself, limit)
}

fn rank_by<T>(query: &str, items: impl IntoIterator<Item = T>, info: impl Fn(&T) -> &ToolInfo, limit: usize) -> Vec<T> {
    let query = Query::new(query);
    if limit == 0 || query.tokens.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(u32, T)> = items
        .into_iter()
        .filter_map(|item| {
            let score = query.score(info(&item));
            (score > 0).then_some((score, item))
        })
        .collect();
    scored.sort_by(|(a_score, a), (b_score, b)| b_score.cmp(a_score).then_with(|| info(a).name.cmp(&info(b).name)));
    scored.truncate(limit);
    scored.into_iter().map(|(_, item)| item).collect()
}

/// A query, bounded and tokenised once per search.
struct Query {
    /// The (bounded) query lowercased and trimmed, compared with names as they are.
    whole: String,
    /// Every token of the bounded query in order, compared with a name's tokens.
    sequence: Vec<String>,
    /// The distinct tokens that score, at most [`MAX_QUERY_TOKENS`].
    tokens: Vec<String>,
}

impl Query {
    fn new(raw: &str) -> Self {
        let bounded = match raw.char_indices().nth(MAX_QUERY_CHARS) {
            Some((end, _)) => &raw[..end],
            None => raw,
        };
        let sequence = tokenize(bounded);
        let mut distinct: Vec<&String> = Vec::new();
        for token in &sequence {
            if !distinct.contains(&token) {
                distinct.push(token);
            }
        }
        let content: Vec<&String> = distinct.iter().copied().filter(|t| !STOP_WORDS.contains(&t.as_str())).collect();
        let chosen = if content.is_empty() { distinct } else { content };
        let tokens = chosen.into_iter().take(MAX_QUERY_TOKENS).cloned().collect();
        Self { whole: bounded.trim().to_lowercase(), sequence, tokens }
    }

    fn score(&self, tool: &ToolInfo) -> u32 {
        let name = tokenize(&tool.name);
        let mut title = tool.title.as_deref().map(tokenize).unwrap_or_default();
        if let Some(t) = tool.annotations.as_ref().and_then(|a| a.title.as_deref()) {
            title.extend(tokenize(t));
        }
        let description =
            tool.description.as_deref().map(|d| tokenize(prefix_of(d, MAX_FIELD_BYTES))).unwrap_or_default();
        let mut score = 0;
        if self.whole == tool.name.to_lowercase() || self.sequence == name {
            score += EXACT_NAME;
        }
        for token in &self.tokens {
            score += best(token, &name, NAME_WHOLE, NAME_PREFIX)
                .max(best(token, &title, TITLE_WHOLE, TITLE_PREFIX))
                .max(best(token, &description, DESCRIPTION_WHOLE, DESCRIPTION_PREFIX));
        }
        score
    }
}

/// The score of `query`'s best match among `field`'s tokens.
fn best(query: &str, field: &[String], whole: u32, prefix: u32) -> u32 {
    let mut found = 0;
    for token in field {
        if token == query {
            return whole;
        }
        if is_prefix_match(query, token) {
            found = prefix;
        }
    }
    found
}

/// `iss` finds `issues` (a query token of two characters or more that starts a longer token),
/// and `issues` finds `issue`, `repository` finds `repositories` (the same word once a plural
/// ending is taken off). A one-character query token matches whole tokens only, or it would find
/// nearly everything.
fn is_prefix_match(query: &str, token: &str) -> bool {
    (query.chars().count() >= 2 && token.len() > query.len() && token.starts_with(query)) || stem(query) == stem(token)
}

/// A word without its plural ending (`repositories` → `repository`, `issues` → `issue`); short
/// words and `-ss` words are kept whole.
fn stem(word: &str) -> std::borrow::Cow<'_, str> {
    if word.chars().count() > 4
        && let Some(base) = word.strip_suffix("ies")
    {
        return format!("{base}y").into();
    }
    match word.strip_suffix('s') {
        Some(base) if word.chars().count() > 3 && !base.ends_with('s') => base.into(),
        _ => word.into(),
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn prefix_of(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Lowercase tokens of `text`: split on anything not a letter or digit (`_`, `-`, `.`, blanks,
/// punctuation) and between camelCase words (`getTinyImage` → get, tiny, image; `HTTPServer` →
/// http, server).
fn tokenize(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
            continue;
        }
        if c.is_uppercase() && !current.is_empty() {
            let previous = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if previous.is_lowercase() || previous.is_numeric() || (previous.is_uppercase() && next_is_lower) {
                tokens.push(std::mem::take(&mut current));
            }
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

impl Catalog {
    /// `principal`'s `search_tools` answer in `era`: the tools a `tools/list` filtered by `shows`
    /// would show them (their own tools included, see [`super::ToolResolver`]), ranked by
    /// [`rank`], as full definitions; reserved names are left out.
    pub async fn search_where(
        &self,
        era: Era,
        principal: &Principal,
        query: &str,
        limit: usize,
        shows: ListFilter<'_>,
    ) -> Vec<ToolInfo> {
        let personal = match &self.resolver {
            Some(resolver) => Some(resolver.personal(principal).await),
            None => None,
        };
        let replaced = personal.as_ref().map_or(&[][..], |p| &p.replaced[..]);
        let mut candidates: Vec<&ToolDescriptor> = Vec::with_capacity(self.tools.len());
        for t in &self.tools {
            let descriptor = t.tool.descriptor();
            match replaced.iter().find(|(stand_in, _)| *stand_in == descriptor.info.name) {
                Some((_, own)) => candidates.extend(own.iter().map(|o| o.descriptor())),
                None => candidates.push(descriptor),
            }
        }
        candidates.retain(|d| !is_reserved(&d.info.name) && shows(&d.info.name, d.upstream.as_deref()));
        fn info<'x>(d: &'x &ToolDescriptor) -> &'x ToolInfo {
            &d.info
        }
        rank_by(query, candidates, info, limit).into_iter().map(|d| tool_info(d, era, &self.rendering)).collect()
    }

    /// The `tools/list` result of a search server: [`definitions`], rendered like this catalog's
    /// lists.
    pub fn search_tools_list(&self, era: Era) -> Result<bytes::Bytes, RuntimeError> {
        finish(ListToolsResult::new(definitions().to_vec()), era, &self.rendering)
    }
}

#[cfg(test)]
mod tests;
