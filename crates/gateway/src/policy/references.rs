//! The start-up check of a rule's references. cel-rust interprets dynamically and has no type
//! checker, so what a checker would catch early is checked here on the parsed expression: every
//! identifier is a policy variable (or a comprehension's own variable in scope), and every
//! function is an operator or declared by the standard environment.
//!
//! Invariant: a rule that passes never fails at run time for naming something unknown; it can
//! still fail on the data (a missing key, a type mismatch), which evaluation handles.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::{Context, Env};
use std::sync::Arc;

/// The variables a rule may read.
pub(crate) const VARIABLES: [&str; 8] =
    ["principal", "server", "method", "tool", "prompt", "resource", "upstream", "arguments"];

/// The first unknown name in `expr`, said as the problem to report.
pub(super) fn first_unknown(env: &Arc<Env>, expr: &IdedExpr) -> Option<String> {
    let mut scope = Vec::new();
    walk(env, expr, &mut scope)
}

fn walk(env: &Arc<Env>, e: &IdedExpr, scope: &mut Vec<String>) -> Option<String> {
    match &e.expr {
        Expr::Unspecified | Expr::Literal(_) => None,
        // Accumulators of expanded macros start with `@` and are the interpreter's own.
        Expr::Ident(name) if name.starts_with('@') || VARIABLES.contains(&name.as_str()) || scope.contains(name) => {
            None
        }
        Expr::Ident(name) => Some(format!("unknown variable `{name}` (known: {})", VARIABLES.join(", "))),
        Expr::Call(call) => {
            if !is_known_function(env, &call.func_name) {
                return Some(format!("unknown function `{}`", call.func_name));
            }
            if let Some(target) = &call.target
                && let Some(found) = walk(env, target, scope)
            {
                return Some(found);
            }
            call.args.iter().find_map(|arg| walk(env, arg, scope))
        }
        Expr::Comprehension(c) => {
            if let Some(found) = walk(env, &c.iter_range, scope).or_else(|| walk(env, &c.accu_init, scope)) {
                return Some(found);
            }
            let depth = scope.len();
            scope.push(c.iter_var.clone());
            scope.extend(c.iter_var2.clone());
            scope.push(c.accu_var.clone());
            let found = [&c.loop_cond, &c.loop_step, &c.result].into_iter().find_map(|part| walk(env, part, scope));
            scope.truncate(depth);
            found
        }
        Expr::List(list) => list.elements.iter().find_map(|item| walk(env, item, scope)),
        Expr::Map(map) => map.entries.iter().find_map(|entry| walk_entry(env, &entry.expr, scope)),
        Expr::Struct(s) => s.entries.iter().find_map(|entry| walk_entry(env, &entry.expr, scope)),
        Expr::Select(select) => walk(env, &select.operand, scope),
    }
}

fn walk_entry(env: &Arc<Env>, entry: &EntryExpr, scope: &mut Vec<String>) -> Option<String> {
    match entry {
        EntryExpr::StructField(field) => walk(env, &field.value, scope),
        EntryExpr::MapEntry(pair) => walk(env, &pair.key, scope).or_else(|| walk(env, &pair.value, scope)),
    }
}

/// Operators (`_==_`, `!_`, `@in`, ...) are the interpreter's own; any other function must be
/// declared by the environment. cel-rust does not expose that lookup, but it refuses to add a
/// context function that would shadow a declared one: that refusal is the answer.
fn is_known_function(env: &Arc<Env>, name: &str) -> bool {
    if name.starts_with('_') || name.starts_with('@') || name.ends_with('_') {
        return true;
    }
    Context::with_env(Arc::clone(env)).add_function(name, || true).is_err()
}
