//! Policy: who may use which tool, prompt or resource. Rules from `[[policy]]`, written in
//! CEL, are compiled once at start-up and evaluated per use, first match deciding.
//!
//! Invariant: every use and every list entry of the root endpoint goes through one
//! evaluation, and its outcome is a [`Decision`] naming the rule (or the default) that decided.

#[allow(dead_code, unused_imports, reason = "the evaluator and the audit trail use it next")]
mod decision;

#[allow(unused_imports, reason = "the evaluator and the audit trail use it next")]
pub(crate) use decision::{Decision, Effect};
