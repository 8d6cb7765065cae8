//! The part of a rule that needs no interpreter: the conjuncts of its top-level `&&` that
//! compare a name (`tool`, `method`, `server`, `upstream`, `prompt`, `resource`,
//! `principal.sub`, `principal.iss`) with string literals — `==`, `in [...]`, `startsWith`,
//! `endsWith` — checked natively before the rule is run.
//!
//! Invariant: a guard only answers where CEL would answer the same. One of its conjuncts
//! false makes the whole `when` false (in CEL, `false && x` and `x && false` are false even
//! when `x` fails), and these conjuncts never fail; all of them true decides only a `when`
//! that is nothing else. Top-level conjuncts are outside every comprehension, so no local
//! variable can shadow the names they read.

use cel::common::ast::operators::{EQUALS, IN, LOGICAL_AND};
use cel::common::ast::{Expr, IdedExpr, LiteralValue};

use super::reads::name_segments;
use super::variables::{Caller, Use, text_of};

/// The natively checked conjuncts of one rule.
#[derive(Debug)]
pub(super) struct Guard {
    tests: Vec<Test>,
    /// Whether the `when` is these conjuncts and nothing else.
    complete: bool,
}

/// A name a conjunct reads.
#[derive(Debug, Clone, Copy)]
enum Name {
    /// A variable that is a name (see `variables::text_of`).
    Text(&'static str),
    /// `principal.sub`.
    Subject,
    /// `principal.iss`.
    Issuer,
}

#[derive(Debug)]
enum Test {
    Equals(Name, String),
    In(Name, Vec<String>),
    StartsWith(Name, String),
    EndsWith(Name, String),
}

impl Guard {
    /// The guard of the `when` `expr`.
    pub(super) fn of(expr: &IdedExpr) -> Self {
        let mut conjuncts = Vec::new();
        flatten(expr, &mut conjuncts);
        let tests: Vec<Test> = conjuncts.iter().filter_map(|c| test(c)).collect();
        Self { complete: tests.len() == conjuncts.len(), tests }
    }

    /// `Some(holds)` when the guard decides the rule, `None` when the rule must be run.
    pub(super) fn decide(&self, caller: &Caller<'_>, used: &Use<'_>) -> Option<bool> {
        if self.tests.is_empty() {
            return None;
        }
        let value = |name: Name| match name {
            Name::Text(variable) => text_of(caller, used, variable).unwrap_or_default(),
            Name::Subject => caller.principal().subject(),
            Name::Issuer => caller.principal().issuer(),
        };
        let passes = |t: &Test| match t {
            Test::Equals(name, literal) => value(*name) == literal,
            Test::In(name, literals) => literals.iter().any(|l| value(*name) == l),
            Test::StartsWith(name, literal) => value(*name).starts_with(literal.as_str()),
            Test::EndsWith(name, literal) => value(*name).ends_with(literal.as_str()),
        };
        if !self.tests.iter().all(passes) {
            return Some(false);
        }
        self.complete.then_some(true)
    }
}

fn flatten<'e>(expr: &'e IdedExpr, out: &mut Vec<&'e IdedExpr>) {
    match &expr.expr {
        Expr::Call(call) if call.target.is_none() && call.func_name == LOGICAL_AND && call.args.len() == 2 => {
            flatten(&call.args[0], out);
            flatten(&call.args[1], out);
        }
        _ => out.push(expr),
    }
}

/// The test `expr` is, if it is one.
fn test(expr: &IdedExpr) -> Option<Test> {
    let Expr::Call(call) = &expr.expr else { return None };
    match (&call.target, call.func_name.as_str(), call.args.as_slice()) {
        (None, EQUALS, [a, b]) => match (name(a), literal(b), name(b), literal(a)) {
            (Some(name), Some(text), ..) | (.., Some(name), Some(text)) => Some(Test::Equals(name, text)),
            _ => None,
        },
        (None, IN, [a, b]) => {
            let Expr::List(list) = &b.expr else { return None };
            if !list.optional_indices.is_empty() {
                return None;
            }
            let literals = list.elements.iter().map(literal).collect::<Option<Vec<_>>>()?;
            Some(Test::In(name(a)?, literals))
        }
        (Some(target), "startsWith", [arg]) => Some(Test::StartsWith(name(target)?, literal(arg)?)),
        (Some(target), "endsWith", [arg]) => Some(Test::EndsWith(name(target)?, literal(arg)?)),
        _ => None,
    }
}

fn name(expr: &IdedExpr) -> Option<Name> {
    match name_segments(expr)?.as_slice() {
        ["principal", "sub"] => Some(Name::Subject),
        ["principal", "iss"] => Some(Name::Issuer),
        [variable] => ["server", "method", "tool", "prompt", "resource", "upstream"]
            .into_iter()
            .find(|known| known == variable)
            .map(Name::Text),
        _ => None,
    }
}

fn literal(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner().to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::Guard;
    use crate::policy::{Arguments, Caller, Item, Use};
    use mcpgate_runtime::Principal;

    fn decide(when: &str, tool: &str) -> Option<bool> {
        let program = cel::Env::stdlib().compile(when).expect("parses");
        let principal = Principal::new("https://iss", "alice-bot", vec![]);
        let used = Use { target: Item::Tool(tool), upstream: Some("github"), arguments: Arguments::None };
        Guard::of(program.expression()).decide(&Caller::at(&principal, "internal"), &used)
    }

    #[test]
    fn a_false_conjunct_decides_and_anything_else_runs_the_rule() {
        assert_eq!(decide("tool == 'echo'", "echo"), Some(true));
        assert_eq!(decide("'echo' == tool", "sum"), Some(false));
        assert_eq!(decide("tool in ['a', 'echo'] && upstream == 'github' && server == 'internal'", "echo"), Some(true));
        assert_eq!(decide("tool.startsWith('delete_') && principal.claims.x == 1", "echo"), Some(false));
        // The failing part comes first: CEL's `&&` is false whatever the other side does.
        assert_eq!(
            decide("principal.claims.missing == 1 && principal.sub.endsWith('-bot') && method == 'x'", "t"),
            Some(false)
        );
        assert_eq!(decide("principal.iss == 'https://iss' && principal.claims.x == 1", "echo"), None);
        assert_eq!(decide("principal.claims.x == 1", "echo"), None);
        // Not a top-level conjunct, or not a literal: the interpreter decides.
        assert_eq!(decide("tool == 'a' || tool == 'b'", "c"), None);
        assert_eq!(decide("!(tool == 'echo')", "echo"), None);
        assert_eq!(decide("tool == prompt", "echo"), None);
        assert_eq!(decide("tool in ['a', 1]", "echo"), None);
        assert_eq!(decide("prompt == ''", "echo"), Some(true));
    }
}
