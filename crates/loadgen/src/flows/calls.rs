//! The synchronous flows, never retried as a whole: one call (`sync`), and multi-round calls
//! that ask for input and carry their `requestState` (`mrtr2`, `mrtr3`; a round is retried,
//! as it carries its state, so a retry is the same round).

use serde_json::{Value, json};

use super::outcome::Failure;
use super::outcome::{expect_deleted, expect_text};
use super::retry::retry;
use super::{Client, Shared};

impl Client {
    pub(super) async fn sync(&mut self, shared: &Shared) -> Result<(), Failure> {
        let id = self.next_id();
        let text = format!("echo {id}");
        let answer = shared
            .mcp
            .modern(&id, "tools/call", json!({"name": shared.echo_tool, "arguments": {"text": text}}), false)
            .await
            .map_err(Failure::Call)?;
        expect_text(&answer.result, &text)
    }

    pub(super) async fn mrtr2(&mut self, shared: &Shared, retried: &mut u32) -> Result<(), Failure> {
        let table = format!("tbl_{}_{}", self.tag, self.seq);
        let args = json!({"table": table, "older_than_days": 1});
        let state = self.round(shared, "delete_records", &args, json!({}), None, retried).await?;
        let answers = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
        let id = self.next_id();
        let params =
            json!({"name": "delete_records", "arguments": args, "inputResponses": answers, "requestState": state});
        let done =
            retry(shared.deadline, retried, || shared.mcp.modern(&id, "tools/call", params.clone(), false)).await?;
        expect_deleted(&done.result, &table)
    }

    pub(super) async fn mrtr3(&mut self, shared: &Shared, retried: &mut u32) -> Result<(), Failure> {
        let item = format!("WI-{}-{}", self.tag, self.seq);
        let args = json!({"id": item});
        let s1 = self.round(shared, "update_work_item", &args, json!({}), None, retried).await?;
        let field = json!({"field": {"action": "accept", "content": {"field": "assignee"}}});
        let s2 = self.round(shared, "update_work_item", &args, field, Some(&s1), retried).await?;
        let owner = format!("owner-{}", self.seq);
        let value = json!({"value": {"action": "accept", "content": {"value": owner}}});
        let id = self.next_id();
        let params =
            json!({"name": "update_work_item", "arguments": args, "inputResponses": value, "requestState": s2});
        let done =
            retry(shared.deadline, retried, || shared.mcp.modern(&id, "tools/call", params.clone(), false)).await?;
        expect_text(&done.result, &format!("Work item {item} updated: assignee \"unassigned\" → \"{owner}\""))
    }

    /// One round that must ask for input; returns its requestState.
    async fn round(
        &mut self,
        shared: &Shared,
        tool: &str,
        args: &Value,
        answers: Value,
        state: Option<&str>,
        retried: &mut u32,
    ) -> Result<String, Failure> {
        let id = self.next_id();
        let mut params = json!({"name": tool, "arguments": args, "inputResponses": answers});
        if let Some(state) = state {
            params["requestState"] = json!(state);
        }
        let answer =
            retry(shared.deadline, retried, || shared.mcp.modern(&id, "tools/call", params.clone(), false)).await?;
        if answer.result["resultType"] != "input_required" {
            return Err(Failure::Wrong(format!("{tool} should ask for input: {}", answer.result)));
        }
        answer.result["requestState"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Failure::Wrong(format!("{tool} gave no requestState")))
    }
}
