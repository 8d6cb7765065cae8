//! Which parts of `principal` and `arguments` a policy's rules can read, found once at start-up
//! on the parsed expressions, so that evaluation converts only those parts of the JSON (claims,
//! arguments) into CEL values.
//!
//! Invariant: a partial value is indistinguishable from the whole one to every rule of the
//! policy. A part is kept whole wherever a rule could look at it as a value (compare it, count
//! it, iterate it, index it with a computed key, pass it to a function); a map is cut down to
//! some of its keys only where every rule reaches into it by static field names
//! (`principal.claims.role`, `has(arguments.env)`), and then it keeps every such name. The
//! walk over-approximates: a comprehension variable that shadows `principal` only makes more
//! of the principal convert.

use std::collections::BTreeMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// What the rules read of one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Need {
    /// All of it.
    Whole,
    /// Only these fields of it (a map), each with its own need; a field whose value is not a
    /// map is converted whole whatever its need.
    Fields(BTreeMap<String, Need>),
}

/// The need of a value no rule reads.
const NOTHING: Need = Need::Fields(BTreeMap::new());

impl Need {
    /// The need of field `name` (`None`: no rule reads it).
    pub(super) fn field(&self, name: &str) -> Option<&Need> {
        match self {
            Self::Whole => Some(&Self::Whole),
            Self::Fields(fields) => fields.get(name),
        }
    }

    /// Marks the value at `path` (below this one) as read whole.
    fn whole_at(&mut self, path: &[&str]) {
        match (self, path.split_first()) {
            (Self::Whole, _) => {}
            (this, None) => *this = Self::Whole,
            (Self::Fields(fields), Some((first, rest))) => {
                fields.entry((*first).to_owned()).or_insert(NOTHING).whole_at(rest);
            }
        }
    }

    /// Marks the field at `path` (below this one) as reached by name: present, with whatever
    /// else is read of it.
    fn reached_at(&mut self, path: &[&str]) {
        if let (Self::Fields(fields), Some((first, rest))) = (self, path.split_first()) {
            fields.entry((*first).to_owned()).or_insert(NOTHING).reached_at(rest);
        }
    }
}

/// What a policy's rules read of the two structured variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reads {
    /// Of `principal` (`sub`, `iss`, `scopes`, `claims`).
    pub(super) principal: Need,
    /// Of `arguments`.
    pub(super) arguments: Need,
}

impl Default for Reads {
    fn default() -> Self {
        Self { principal: NOTHING, arguments: NOTHING }
    }
}

impl Reads {
    /// Adds what `expr` reads.
    pub(super) fn add(&mut self, expr: &IdedExpr) {
        match &expr.expr {
            Expr::Unspecified | Expr::Literal(_) => {}
            Expr::Ident(_) | Expr::Select(_) => {
                if let Expr::Select(select) = &expr.expr
                    && select.test
                {
                    // `has(a.b.c)`: the interpreter resolves `a.b` and looks `c` up in it.
                    match name_segments(&select.operand) {
                        Some(mut path) => {
                            path.push(&select.field);
                            if let Some(need) = self.need_of(path[0]) {
                                need.reached_at(&path[1..]);
                            }
                        }
                        None => self.add(&select.operand),
                    }
                    return;
                }
                match name_segments(expr) {
                    // `a.b.c` is resolved as a name, then its value is used as a whole.
                    Some(path) => {
                        if let Some(need) = self.need_of(path[0]) {
                            need.whole_at(&path[1..]);
                        }
                    }
                    None => {
                        if let Expr::Select(select) = &expr.expr {
                            self.add(&select.operand);
                        }
                    }
                }
            }
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.add(target);
                }
                call.args.iter().for_each(|arg| self.add(arg));
            }
            Expr::Comprehension(c) => {
                [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .for_each(|part| self.add(part));
            }
            Expr::List(list) => list.elements.iter().for_each(|item| self.add(item)),
            Expr::Map(map) => map.entries.iter().for_each(|entry| self.add_entry(&entry.expr)),
            Expr::Struct(s) => s.entries.iter().for_each(|entry| self.add_entry(&entry.expr)),
        }
    }

    fn add_entry(&mut self, entry: &EntryExpr) {
        match entry {
            EntryExpr::StructField(field) => self.add(&field.value),
            EntryExpr::MapEntry(pair) => {
                self.add(&pair.key);
                self.add(&pair.value);
            }
        }
    }

    fn need_of(&mut self, root: &str) -> Option<&mut Need> {
        match root {
            "principal" => Some(&mut self.principal),
            "arguments" => Some(&mut self.arguments),
            _ => None,
        }
    }
}

/// The segments of the name `expr` spells (`a.b.c`: an identifier and field selections on
/// it, no presence test), root first; as the interpreter resolves names.
pub(super) fn name_segments(expr: &IdedExpr) -> Option<Vec<&str>> {
    let mut segments = Vec::new();
    let mut at = expr;
    loop {
        match &at.expr {
            Expr::Ident(name) => {
                segments.push(name.as_str());
                segments.reverse();
                return Some(segments);
            }
            Expr::Select(select) if !select.test => {
                segments.push(select.field.as_str());
                at = &select.operand;
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Need, Reads};
    use std::collections::BTreeMap;

    fn reads(rules: &[&str]) -> Reads {
        let env = cel::Env::stdlib();
        let mut reads = Reads::default();
        for rule in rules {
            reads.add(env.compile(rule).expect("parses").expression());
        }
        reads
    }

    fn fields(pairs: &[(&str, Need)]) -> Need {
        Need::Fields(pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect::<BTreeMap<_, _>>())
    }

    #[test]
    fn fields_reached_by_name_are_kept_and_the_rest_is_left_out() {
        let r = reads(&[
            "principal.claims.role == 'x' && has(principal.claims.tenant)",
            "has(arguments.env) && arguments.env == 'prod'",
            "principal.claims.groups.exists(g, g == 'support')",
        ]);
        let nothing = fields(&[]);
        assert_eq!(
            r.principal,
            fields(&[("claims", fields(&[("groups", Need::Whole), ("role", Need::Whole), ("tenant", nothing)]))])
        );
        assert_eq!(r.arguments, fields(&[("env", Need::Whole)]));
    }

    #[test]
    fn a_value_used_as_a_whole_is_converted_whole() {
        for rule in [
            "size(principal.claims) > 1",
            "'role' in principal.claims",
            "principal.claims['role'] == 'x'",
            "principal.claims.exists(k, k == 'role')",
            "[principal.claims][0].role == 'x'",
        ] {
            let r = reads(&[rule, "principal.claims.tenant == 'a'"]);
            assert_eq!(r.principal, fields(&[("claims", Need::Whole)]), "{rule}");
        }
        assert_eq!(reads(&["principal == principal"]).principal, Need::Whole);
        assert_eq!(reads(&["arguments.size() == 0"]).arguments, Need::Whole);
        // Nothing read, nothing converted.
        assert_eq!(reads(&["tool == 'x'"]), Reads::default());
    }
}
