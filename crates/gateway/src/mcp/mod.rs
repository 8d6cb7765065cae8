//! The MCP layer: admitting a request under its era's rules, dispatching it to a handler,
//! and rendering the result for that era.

mod admission;
mod answers;
pub(crate) mod cancellation;
pub mod companions;
mod context;
mod dispatch;
mod handlers;
pub mod idempotency;
pub mod listen;
pub mod principal_slots;
mod render;
mod request_state;
pub mod session;
mod task_input;
pub mod task_view;
mod work;

pub use context::CallContext;
pub use dispatch::{Ticket, dispatch};
pub use handlers::discover_result;
pub use task_input::answer as answer_task_input;
pub use work::Reply;
