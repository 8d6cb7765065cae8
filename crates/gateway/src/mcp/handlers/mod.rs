//! Method handlers. Each one validates its params, does its work through the catalog, and
//! renders the result for the request's era.

mod background;
mod completion;
mod invoke;
mod legacy_input;
mod lifecycle;
mod lists;
mod promote;
mod prompts;
mod resources;
pub(super) mod search;
pub(super) mod task_methods;
mod tools;

pub(super) use completion::complete;
pub(super) use lifecycle::{initialize, ping};
pub(super) use lists::list;
pub(super) use prompts::get_prompt;
pub(super) use resources::read_resource;
pub(super) use tools::{ToolPlan, call_tool};
