//! The MCP layer: admitting a request under its era's rules, dispatching it to a handler,
//! and rendering the result for that era.

mod admission;
mod answers;
pub(crate) mod cancellation;
mod dispatch;
mod handlers;
pub(crate) mod listen;
mod render;
mod request_state;
mod resource_uri;
pub mod session;
mod task_input;
pub mod task_view;
mod tool_lookup;
mod work;

pub(crate) use dispatch::{Ticket, dispatch};
pub(crate) use task_input::answer as answer_task_input;
pub(crate) use work::Reply;
