//! Policy: who may use which tool, prompt or resource. Rules from `[[policy]]`, written in
//! CEL, are compiled once at start-up and evaluated per use; the first rule (in file order)
//! whose `when` holds decides, else `policy_default` does.
//!
//! Invariants: every call, prompt get and resource read, and every entry of a list, goes
//! through [`Policy::decide`] of the root's rules and then of its virtual server's (see
//! `servers::Endpoint`), and its outcome is a [`Decision`] naming the
//! rule (or the default) that decided. An error never grants and never lifts a denial: on a
//! use, a rule whose evaluation fails counts as holding if it denies and as not holding if it
//! allows; in a list (no arguments) a failing rule counts as not holding. Arguments are never
//! logged.

mod conversion;
mod decision;
mod guard;
mod reads;
mod references;
mod rule;
#[cfg(test)]
mod tests;
mod variables;

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cel::{Context, Env, ExecutionError, Program, Value};

pub use decision::Decision;
pub use rule::{Effect, PolicyRule};
pub use variables::{Arguments, Caller, Item, Use};

use crate::error::{GatewayError, StartupError, clip};
use guard::Guard;
use reads::Reads;
use variables::Variables;

/// The metric label of denials by the default.
const DEFAULT_LABEL: &str = "default";

/// The compiled rules of one endpoint, with their denial counters.
pub struct Policy {
    /// Tells this policy's conversion of a principal, cached on a [`Caller`], from another's.
    id: u64,
    /// The root scope every evaluation opens its own scope under (its resolver): one `Env`
    /// handle for the policy's life rather than one per evaluation.
    root: Context<'static, 'static>,
    /// What the rules can read of `principal` and `arguments`: all that is converted.
    reads: Reads,
    rules: Vec<Compiled>,
    default: Effect,
    hide_denied: bool,
    /// `mcpgate_policy_denials_total`, one per rule, then the default's.
    denials: Vec<AtomicU64>,
}

struct Compiled {
    name: Arc<str>,
    /// Decides the rule without running it where its name tests alone can.
    guard: Guard,
    program: Program,
    effect: Effect,
    message: String,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("rules", &self.rules.iter().map(|r| &*r.name).collect::<Vec<_>>())
            .field("default", &self.default)
            .field("hide_denied", &self.hide_denied)
            .finish()
    }
}

impl Policy {
    /// Compiles `rules` (the root's `[[policy]]`, or a virtual server's): a rule that does not
    /// parse, names an unknown variable or function, or yields something other than a boolean
    /// stops start-up, named.
    pub fn from_rules(rules: &[PolicyRule], default: Effect, hide_denied: bool) -> Result<Self, StartupError> {
        let env = Arc::new(Env::stdlib());
        let mut compiled: Vec<Compiled> = Vec::with_capacity(rules.len());
        for rule in rules {
            let setting = || format!("policy rule {:?}", rule.name);
            if !valid_name(&rule.name) {
                return Err(StartupError::config(
                    setting(),
                    "a rule name is 1-64 letters, digits, '_', '-' or '.', and not \"default\"",
                ));
            }
            if compiled.iter().any(|c| *c.name == *rule.name) {
                return Err(StartupError::config(setting(), "two rules have this name"));
            }
            let program = env
                .compile(&rule.when)
                .map_err(|e| StartupError::config_caused(setting(), "`when` does not parse", e))?;
            if let Some(problem) = references::first_unknown(&env, program.expression()) {
                return Err(StartupError::config(setting(), format!("`when`: {problem}")));
            }
            // No type checker: a trial run on neutral values catches a `when` that is plainly
            // not a condition (a string, a number); one that fails on these values may still
            // be fine on real ones.
            let sample = variables::Caller::root(&NEUTRAL);
            let used = Use { target: Item::Tool(""), upstream: None, arguments: Arguments::None };
            let mut reads = Reads::default();
            reads.add(program.expression());
            if let Ok(value) = run(&env, &program, &sample, used, &reads)
                && !matches!(value, Value::Bool(_))
            {
                return Err(StartupError::config(
                    setting(),
                    format!("`when` must be a condition (true or false), not a {}", value.type_of()),
                ));
            }
            let message = rule.message.clone().unwrap_or_else(|| format!("denied by policy rule {:?}", rule.name));
            let guard = Guard::of(program.expression());
            compiled.push(Compiled {
                name: Arc::from(rule.name.as_str()),
                guard,
                program,
                effect: rule.effect,
                message,
            });
        }
        let mut reads = Reads::default();
        compiled.iter().for_each(|rule| reads.add(rule.program.expression()));
        let denials = (0..=compiled.len()).map(|_| AtomicU64::new(0)).collect();
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Ok(Self { id, root: Context::with_env(env), reads, rules: compiled, default, hide_denied, denials })
    }

    /// Whether every use is allowed whatever it is (no rules, default allow): lists need no
    /// filtering and calls no evaluation.
    pub fn is_open(&self) -> bool {
        self.rules.is_empty() && self.default == Effect::Allow
    }

    /// What policy decides for `used` by `caller`. `listing`: for an entry of a list (no
    /// arguments; a rule that fails counts as not holding).
    pub fn decide(&self, caller: &Caller<'_>, used: Use<'_>, listing: bool) -> Decision {
        self.decide_at(caller, used, listing).0
    }

    /// Whether a list shows `used` to `caller`.
    pub fn shows(&self, caller: &Caller<'_>, used: Use<'_>) -> bool {
        self.is_open() || self.decide(caller, used, true).is_allowed()
    }

    /// Checks a use: `Ok` with the decision when allowed; when denied, counts and logs the
    /// denial and answers with its error (a "not found" of the kind with `hide_denied`).
    pub fn check(&self, caller: &Caller<'_>, used: Use<'_>) -> Result<Decision, GatewayError> {
        if self.is_open() {
            return Ok(Decision::by_default(Effect::Allow));
        }
        let (decision, index) = self.decide_at(caller, used, false);
        if decision.is_allowed() {
            return Ok(decision);
        }
        self.denials[index].fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            rule = decision.rule().unwrap_or(DEFAULT_LABEL),
            principal = %caller.log_id(),
            method = used.target.method(),
            name = %clip(used.target.name()),
            upstream = used.upstream.unwrap_or(""),
            hidden = self.hide_denied,
            "policy denied a use"
        );
        if self.hide_denied {
            let shown = match used.target {
                Item::Tool(name) => GatewayError::invalid_params(format!("Unknown tool: {}", clip(name))),
                Item::Prompt(name) => GatewayError::invalid_params(format!("Unknown prompt: {}", clip(name))),
                Item::Resource(uri) => GatewayError::ResourceNotFound { uri: uri.to_owned() },
            };
            return Err(GatewayError::PolicyHidden {
                rule: decision.rule().map(str::to_owned),
                shown: Box::new(shown),
            });
        }
        let message = match self.rules.get(index) {
            Some(rule) => rule.message.clone(),
            None => "denied by policy: no rule allows this".to_owned(),
        };
        Err(GatewayError::PolicyDenied { rule: decision.rule().map(str::to_owned), message })
    }

    /// The decision and the index of the deciding rule (`rules.len()`: the default).
    fn decide_at(&self, caller: &Caller<'_>, used: Use<'_>, listing: bool) -> (Decision, usize) {
        let variables = Variables::new(caller, used, &self.reads, self.id);
        let mut context = self.root.new_inner_scope();
        context.set_variable_resolver(&variables);
        for (i, rule) in self.rules.iter().enumerate() {
            if let Some(holds) = rule.guard.decide(caller, &used) {
                if holds {
                    return (Decision::by_rule(rule.effect, Arc::clone(&rule.name)), i);
                }
                continue;
            }
            let holds = match rule.program.execute(&context) {
                Ok(Value::Bool(holds)) => holds,
                Ok(_) => !listing && rule.effect == Effect::Deny,
                Err(e) => {
                    if !listing {
                        tracing::debug!(rule = &*rule.name, error = error_kind(&e), "a policy rule failed");
                    }
                    !listing && rule.effect == Effect::Deny
                }
            };
            if holds {
                return (Decision::by_rule(rule.effect, Arc::clone(&rule.name)), i);
            }
        }
        (Decision::by_default(self.default), self.rules.len())
    }

    /// Appends the header of `mcpgate_policy_denials_total` (once, before every endpoint's
    /// [`Policy::render_metrics`]).
    pub(crate) fn render_metrics_header(out: &mut String) {
        out.push_str("# HELP mcpgate_policy_denials_total Uses denied by policy, by endpoint and deciding rule\n");
        out.push_str("# TYPE mcpgate_policy_denials_total counter\n");
    }

    /// Appends `mcpgate_policy_denials_total{server, rule}`: a series per rule and the default,
    /// of the rules of the endpoint `server` (`""`: the root's, which hold on every endpoint).
    /// Both labels are bounded: rule and server names are validated at start-up.
    pub(crate) fn render_metrics(&self, server: &str, out: &mut String) {
        let names = self.rules.iter().map(|r| &*r.name).chain(std::iter::once(DEFAULT_LABEL));
        for (name, count) in names.zip(&self.denials) {
            let _ = writeln!(
                out,
                "mcpgate_policy_denials_total{{server=\"{server}\",rule=\"{name}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
    }
}

/// The principal of the start-up trial run.
static NEUTRAL: std::sync::LazyLock<mcpgate_runtime::Principal> =
    std::sync::LazyLock::new(mcpgate_runtime::Principal::anonymous);

/// Ids of policies, for [`Policy::id`].
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn run(
    env: &Arc<Env>,
    program: &Program,
    caller: &Caller<'_>,
    used: Use<'_>,
    reads: &Reads,
) -> Result<Value, ExecutionError> {
    // Not the policy's id: the trial run's principal is not cached for any policy.
    let variables = Variables::new(caller, used, reads, u64::MAX);
    let mut context = Context::with_env(Arc::clone(env));
    context.set_variable_resolver(&variables);
    program.execute(&context)
}

/// Names are metric labels and log fields: a small alphabet, and never the default's label.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name != DEFAULT_LABEL
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// What kind of failure, without the values involved (they may be arguments).
fn error_kind(e: &ExecutionError) -> &'static str {
    match e {
        ExecutionError::NoSuchKey(_) => "no such key",
        ExecutionError::UndeclaredReference(_) => "undeclared reference",
        ExecutionError::NoSuchOverload(_) | ExecutionError::UnexpectedType { .. } => "type mismatch",
        ExecutionError::ValuesNotComparable(..) => "values not comparable",
        _ => "evaluation error",
    }
}
