//! A gateway serving a tool that asks the user a question mid-call (multi-round input): the
//! first round returns an elicitation; the client answers it and calls again (a 2026-07-28
//! client with the sealed `requestState`, on any replica; a 2025-11-25 client on the call's
//! own stream), and the tool finishes with the answer.
//!
//! Run it with `cargo run -p mcpgate --example ask_user`.

use mcpgate::ask::{self, FormAnswer};
use mcpgate::catalog::BoxFuture;
use mcpgate::protocol::content::ContentBlock;
use mcpgate::protocol::input::InputRequests;
use mcpgate::protocol::tool::CallToolResult;
use mcpgate::{Failure, Gateway, Outcome, Tool, ToolCall, ToolContext, ToolDescriptor};
use serde::Deserialize;
use serde_json::json;

/// Books a table, asking for the name to book it under.
struct BookTable {
    descriptor: ToolDescriptor,
}

#[derive(Deserialize)]
struct Booking {
    guests: u32,
}

impl Tool for BookTable {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, call: ToolCall, _cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let booking: Booking = match mcpgate::catalog::decode_args(&call.arguments) {
                Ok(b) => b,
                Err(failure) => return Outcome::Failed(failure),
            };
            if !(1..=12).contains(&booking.guests) {
                return Outcome::Failed(Failure::InvalidArguments("guests must be 1 to 12".to_owned()));
            }
            // The answers so far come with every round; ask until the name is there.
            let text = match ask::form_answer(&call.input_responses, "name") {
                FormAnswer::Missing => {
                    let question = ask::form_field(
                        &format!("A table for {}: what name should it be under?", booking.guests),
                        "name",
                        "string",
                    );
                    return Outcome::NeedInput {
                        requests: InputRequests::from([("name".to_owned(), question)]),
                        state: None,
                    };
                }
                FormAnswer::Refused => "No table booked.".to_owned(),
                answer @ FormAnswer::Accepted(_) => match answer.text("name") {
                    Some(name) => format!("Booked a table for {} under {name}.", booking.guests),
                    None => "No name given: no table booked.".to_owned(),
                },
            };
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = mcpgate::config::load_with_env("toolset = []", &|name| std::env::var(name).ok())?;
    let schema = json!({"type": "object", "properties": {
        "guests": {"type": "integer", "minimum": 1, "maximum": 12, "description": "How many people"}
    }, "required": ["guests"]});
    let book = BookTable { descriptor: ToolDescriptor::new("book_table", "Book a table; asks for the name.", schema) };
    let gateway = Gateway::builder(config).tool(book).build().await?;
    let (listener, addr) = gateway.bind().await?;
    println!("listening on http://{addr}");
    gateway.serve(listener, mcpgate::shutdown::signal()).await?;
    Ok(())
}
