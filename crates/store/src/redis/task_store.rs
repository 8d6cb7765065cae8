//! The task records and their transitions on Redis: each transition is one Lua script
//! (one round trip, atomic), reads are one `HMGET` of the fields the reader renders (a full
//! read is one `HGETALL`; a listing, one command per shard plus one per task, sent together).
//! Creating a task, the one transition with more to it (idempotency, quotas), is in `create`.

use std::time::Duration;

use redis::Value;

use mcpgate_protocol::task::TaskStatus;

use super::at_rest::Payloads;
use super::record::{
    CONTROL_FIELDS, OUTCOME_FIELDS, RequestKeys, decode, decode_fields, decode_named, item, parse_status, request_keys,
};
use super::{RedisStore, Retry, reply, scripts};
use crate::clock::millis;
use crate::contract::TaskStore;
use crate::error::StoreError;
use crate::model::{
    Answered, Cancelled, CheckedAnswers, Claim, Created, Job, Lease, ListCursor, NewTask, Page, RawRequests, Read,
    Renewal, Settled, Skip, StatusNote, TaskId, TaskOutcome, TaskRecord,
};

impl TaskStore for RedisStore {
    async fn create(&self, task: NewTask) -> Result<Created, StoreError> {
        self.create_with(task, None).await.map(|(created, _)| created)
    }

    async fn create_running(
        &self,
        task: NewTask,
        worker: &str,
        lease: Duration,
    ) -> Result<(Created, Option<(Lease, Job)>), StoreError> {
        let (created, _) = self.create_with(task, Some((worker, millis(lease)))).await?;
        Ok(match created {
            Created::New(mut record) => {
                record.attempts = 1;
                let job = Job { task: record.id.clone(), entry: String::new() };
                let lease = Lease {
                    task: record.id.clone(),
                    token: 1,
                    entry: String::new(),
                    worker: worker.to_owned(),
                    binding: Payloads::binding_of(&record),
                };
                (Created::New(record), Some((lease, job)))
            }
            other => (other, None),
        })
    }

    async fn get(&self, id: &TaskId, read: Read) -> Result<Option<TaskRecord>, StoreError> {
        let key = self.inner.keys.task(id);
        if read == Read::Full {
            return self.read_whole(&key).await;
        }
        // A finished task read here before: no round trip (see `terminal_cache`).
        let now = crate::clock::now_ms();
        if let Some(record) = self.inner.terminal.get(id, read, now) {
            return Ok(Some(record));
        }
        let ticket = self.inner.terminal.ticket();
        let fields = if read == Read::WithOutcome { OUTCOME_FIELDS } else { CONTROL_FIELDS };
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&key).arg(fields);
        let values: Vec<Value> = self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        // A parked task's outstanding requests: their keys are listed in the record.
        let names: Vec<String> = match request_keys(&values) {
            None => Vec::new(),
            Some(RequestKeys::Listed(keys)) => keys.iter().map(|k| format!("req:{k}")).collect(),
            // Parked by a release that did not list the keys: read the whole record.
            Some(RequestKeys::Unlisted) => return self.read_whole(&key).await,
        };
        let requests: Vec<Value> = if names.is_empty() {
            Vec::new()
        } else {
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(&key).arg(&names);
            self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?
        };
        let record = self
            .inner
            .payloads
            .open_found(decode_named(decode_fields(fields, values).chain(decode_fields(&names, requests)))?)?;
        if let (Some(ticket), Some(record)) = (ticket, &record) {
            self.inner.terminal.insert(ticket, id, read, record, now);
        }
        Ok(record)
    }

    async fn list(&self, owner: &str, cursor: Option<&ListCursor>, limit: usize) -> Result<Page, StoreError> {
        let start = cursor.map_or_else(|| "-".to_owned(), |c| format!("({}", c.0));
        let fetch = limit.saturating_add(1);
        // One command per shard (each index is in its shard's slot), sent together.
        let ranges: Vec<redis::Cmd> = (0..self.inner.shards)
            .map(|s| {
                let mut cmd = redis::cmd("ZRANGE");
                cmd.arg(self.inner.keys.owner(u8::try_from(s).unwrap_or(0), owner))
                    .arg(&start)
                    .arg("+")
                    .arg("BYLEX")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(fetch);
                cmd
            })
            .collect();
        let members: Vec<Vec<String>> = self.call_each(Retry::Yes, ranges).await?;
        let mut all: Vec<String> = members.into_iter().flatten().collect();
        all.sort();
        let more = all.len() > limit;
        all.truncate(limit);
        let entries: Vec<(&String, TaskId)> = all
            .iter()
            .filter_map(|m| m.split_once(':').and_then(|(_, id)| TaskId::parse(id)).map(|id| (m, id)))
            .collect();
        let reads: Vec<redis::Cmd> = entries
            .iter()
            .map(|(_, id)| {
                let mut cmd = redis::cmd("HMGET");
                cmd.arg(self.inner.keys.task(id)).arg(CONTROL_FIELDS);
                cmd
            })
            .collect();
        let records: Vec<Vec<Value>> = self.call_each(Retry::Yes, reads).await?;
        let mut tasks = Vec::with_capacity(records.len());
        let mut dead = Vec::new();
        for (values, (member, id)) in records.into_iter().zip(&entries) {
            match decode_named(decode_fields(CONTROL_FIELDS, values))? {
                Some(record) => tasks.push(record),
                // The task expired: drop its index entry now (one extra round trip, only then).
                None => {
                    let mut cmd = redis::cmd("ZREM");
                    cmd.arg(self.inner.keys.owner(id.shard(), owner)).arg(member.as_str());
                    dead.push(cmd);
                }
            }
        }
        if !dead.is_empty() {
            let _: Vec<i64> = self.call_each(Retry::Yes, dead).await?;
        }
        let next = if more { all.last().map(|m| ListCursor(m.clone())) } else { None };
        Ok(Page { tasks, next })
    }

    async fn cancel(&self, id: &TaskId, owner: &str) -> Result<Cancelled, StoreError> {
        let keys = &self.inner.keys;
        let mut out = reply(
            self.script_acked(
                Retry::No,
                &scripts::CANCEL,
                vec![keys.task(id)],
                vec![owner.to_owned(), keys.channel(id)],
            )
            .await?,
        )?;
        match item(&out, 0).as_deref() {
            Some("notfound") => Ok(Cancelled::NotFound),
            Some("terminal") => self
                .inner
                .payloads
                .open_found(decode(out.split_off(1))?)?
                .map_or(Ok(Cancelled::NotFound), |r| Ok(Cancelled::AlreadyTerminal(r))),
            Some("ok") => self
                .inner
                .payloads
                .open_found(decode(out.split_off(1))?)?
                .map_or(Ok(Cancelled::NotFound), |r| Ok(Cancelled::Now(r))),
            _ => Err(StoreError::corrupt("unexpected cancel reply")),
        }
    }

    async fn charge(&self, scope: &str, id: &TaskId, bytes: u64) -> Result<(), StoreError> {
        self.charge_bytes(scope, id, bytes.to_string()).await
    }

    async fn claim(&self, job: &Job, worker: &str, lease: Duration, max_attempts: u32) -> Result<Claim, StoreError> {
        let keys = &self.inner.keys;
        let shard = job.task.shard();
        // A claim whose reply was lost (the primary died under it) or that the replicas did
        // not confirm (`store.replicas_ack`) may still have landed, and survived a failover:
        // dropping it would leave the task with an attempt spent on nothing, and a tool that
        // is not retry-safe would then fail as interrupted without ever having run. So it is
        // retried under the same claim id, which the script recognises (a fresh lease, no
        // attempt spent), for a third of the lease: the worker counts the lease from before
        // the first try, so most of it is still left when a retry lands.
        let id = format!("{:016x}", rand::random::<u64>());
        let args = vec![
            job.entry.clone(),
            millis(lease).to_string(),
            max_attempts.to_string(),
            worker.to_owned(),
            keys.channel(&job.task),
            id,
        ];
        let task_keys = vec![keys.task(&job.task), keys.jobs(shard), keys.dead(shard)];
        let give_up = tokio::time::Instant::now() + lease / 3;
        let mut backoff = Duration::from_millis(50);
        let value = loop {
            match self.script_acked(Retry::Yes, &scripts::CLAIM, task_keys.clone(), args.clone()).await {
                Ok(value) => break value,
                Err(
                    e @ (StoreError::Unavailable { .. }
                    | StoreError::Timeout { .. }
                    | StoreError::NotAcknowledged { .. }),
                ) => {
                    if tokio::time::Instant::now() + backoff >= give_up {
                        return Err(e);
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
                Err(e) => return Err(e),
            }
        };
        let mut out = reply(value)?;
        Ok(match item(&out, 0).as_deref() {
            Some("run") => {
                let token = item(&out, 1)
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| StoreError::corrupt("claim reply without a token"))?;
                let record =
                    decode(out.split_off(2))?.ok_or_else(|| StoreError::corrupt("claim reply without a record"))?;
                let binding = Payloads::binding_of(&record);
                let record = self.inner.payloads.open(record)?;
                let lease = Lease {
                    task: job.task.clone(),
                    token,
                    entry: job.entry.clone(),
                    worker: worker.to_owned(),
                    binding,
                };
                Claim::Run { lease, task: Box::new(record) }
            }
            Some("gone") => Claim::Skip(Skip::Gone),
            Some("terminal") => Claim::Skip(Skip::Terminal),
            Some("parked") => Claim::Skip(Skip::Parked),
            Some("busy") => Claim::Skip(Skip::Busy),
            Some("exhausted") => Claim::Exhausted { tool: item(&out, 1).unwrap_or_default() },
            _ => return Err(StoreError::corrupt("unexpected claim reply")),
        })
    }

    async fn renew(&self, lease: &Lease, duration: Duration, note: Option<&StatusNote>) -> Result<Renewal, StoreError> {
        let out = self
            .script(
                Retry::No,
                &scripts::RENEW,
                self.lease_keys(lease),
                vec![
                    lease.token.to_string(),
                    millis(duration).to_string(),
                    if note.is_some() { "1" } else { "0" }.to_owned(),
                    note.map(|n| n.message.clone()).unwrap_or_default(),
                    lease.entry.clone(),
                    lease.worker.clone(),
                    note.and_then(|n| n.progress_ppm).map(|p| p.to_string()).unwrap_or_default(),
                ],
            )
            .await?;
        Ok(match item(&[out], 0).as_deref() {
            Some("held") => Renewal::Held,
            Some("cancelled") => Renewal::Cancelled,
            Some("gone") => Renewal::Gone,
            Some("lost") => Renewal::Lost,
            _ => return Err(StoreError::corrupt("unexpected renew reply")),
        })
    }

    async fn hold(
        &self,
        lease: &Lease,
        input_requests: &RawRequests,
        state: Option<Option<&str>>,
    ) -> Result<Renewal, StoreError> {
        let names: Vec<&String> = input_requests.keys().collect();
        let names =
            serde_json::to_string(&names).map_err(|e| StoreError::corrupt_caused("request keys not encodable", e))?;
        let (change, json) = match state {
            None => ("keep", String::new()),
            Some(None) => ("none", String::new()),
            Some(Some(json)) => {
                ("set", self.inner.payloads.seal(&lease.task, &lease.binding, "state", json.to_owned())?)
            }
        };
        let mut args =
            vec![lease.token.to_string(), self.inner.keys.channel(&lease.task), names, change.to_owned(), json];
        args.extend(input_requests.iter().flat_map(|(k, r)| [k.clone(), r.method.clone(), r.json.clone()]));
        let out = self.script_acked(Retry::No, &scripts::HOLD, vec![self.inner.keys.task(&lease.task)], args).await?;
        renewal(&out, "hold")
    }

    async fn checkpoint(&self, lease: &Lease, state: &str) -> Result<Renewal, StoreError> {
        let out = self
            .script(
                Retry::No,
                &scripts::CHECKPOINT,
                vec![self.inner.keys.task(&lease.task)],
                vec![
                    lease.token.to_string(),
                    self.inner.payloads.seal(&lease.task, &lease.binding, "state", state.to_owned())?,
                ],
            )
            .await?;
        renewal(&out, "checkpoint")
    }

    async fn finish(
        &self,
        lease: &Lease,
        job: &Job,
        status: TaskStatus,
        outcome: TaskOutcome,
        tool_error: bool,
    ) -> Result<Settled, StoreError> {
        let (field, json) = match outcome {
            TaskOutcome::Result(r) => ("result", r),
            TaskOutcome::Error(e) => ("error", e),
        };
        // A result is bound to its isError flag too: it decides how the result is rendered.
        let bound_as = if field == "result" { Payloads::result_field(tool_error) } else { field };
        let json = self.inner.payloads.seal_as(&lease.task, &lease.binding, field, bound_as, json)?;
        let flag = if tool_error { "1" } else { "0" };
        self.settle(lease, job, status, vec![field.to_owned(), json, flag.to_owned()]).await
    }

    async fn park(
        &self,
        lease: &Lease,
        job: &Job,
        input_requests: &RawRequests,
        state: Option<&str>,
    ) -> Result<Settled, StoreError> {
        let names: Vec<&String> = input_requests.keys().collect();
        let names =
            serde_json::to_string(&names).map_err(|e| StoreError::corrupt_caused("request keys not encodable", e))?;
        let state =
            self.inner.payloads.seal(&lease.task, &lease.binding, "state", state.unwrap_or_default().to_owned())?;
        let mut args = vec![state, names];
        args.extend(input_requests.iter().flat_map(|(k, r)| [k.clone(), r.method.clone(), r.json.clone()]));
        self.settle(lease, job, TaskStatus::InputRequired, args).await
    }

    async fn answer(
        &self,
        id: &TaskId,
        owner: &str,
        answers: &CheckedAnswers,
        max_bytes: u64,
    ) -> Result<Answered, StoreError> {
        let keys = &self.inner.keys;
        let mut args = Vec::with_capacity(3 + 4 * answers.len());
        args.extend([owner.to_owned(), keys.channel(id), max_bytes.to_string()]);
        for (k, a) in answers {
            let mut fits = String::from(",");
            for method in &a.fits {
                fits.push_str(method);
                fits.push(',');
            }
            // The budget counts what was answered, not what sealing makes of it.
            let size = a.json.len().to_string();
            args.extend([k.clone(), fits, self.inner.payloads.seal_answer(id, owner, k, a.json.clone())?, size]);
        }
        let out = reply(
            self.script_acked(
                Retry::No,
                &scripts::ANSWER,
                vec![keys.task(id), keys.jobs(id.shard()), keys.leases(id.shard())],
                args,
            )
            .await?,
        )?;
        Ok(match item(&out, 0).as_deref() {
            Some("notfound") => Answered::NotFound,
            Some("idle") => Answered::NotWaiting(
                item(&out, 1)
                    .and_then(|s| parse_status(&s))
                    .ok_or_else(|| StoreError::corrupt("answer reply without a status"))?,
            ),
            Some("invalid") => Answered::Invalid(item(&out, 1).unwrap_or_default()),
            Some("toolarge") => Answered::TooLarge(item(&out, 1).and_then(|n| n.parse().ok()).unwrap_or(max_bytes)),
            Some("waiting") => Answered::Waiting(item(&out, 1).and_then(|n| n.parse().ok()).unwrap_or(1)),
            Some("resumed") => Answered::Resumed,
            _ => return Err(StoreError::corrupt("unexpected answer reply")),
        })
    }

    async fn release(&self, lease: &Lease, job: &Job) -> Result<Settled, StoreError> {
        let out = self
            .script(
                Retry::No,
                &scripts::RELEASE,
                self.lease_keys(lease),
                vec![lease.token.to_string(), job.entry.clone()],
            )
            .await?;
        settled(&out)
    }

    async fn defer(&self, lease: &Lease, job: &Job, grace: Duration, error: &str) -> Result<Settled, StoreError> {
        let keys = &self.inner.keys;
        let out = self
            .script_acked(
                Retry::No,
                &scripts::RELEASE,
                self.lease_keys(lease),
                vec![
                    lease.token.to_string(),
                    job.entry.clone(),
                    millis(grace).to_string(),
                    self.inner.payloads.seal(&lease.task, &lease.binding, "error", error.to_owned())?,
                    keys.channel(&lease.task),
                    "Failed: no replica can run its tool".to_owned(),
                ],
            )
            .await?;
        settled(&out)
    }
}

/// Decodes the reply of `settle.lua` / `release.lua`.
fn settled(out: &Value) -> Result<Settled, StoreError> {
    Ok(match item(std::slice::from_ref(out), 0).as_deref() {
        Some("done") => Settled::Done,
        Some("terminal") => Settled::AlreadyTerminal,
        Some("lost") => Settled::Lost,
        Some("gone") => Settled::Gone,
        Some("gaveup") => Settled::GaveUp,
        _ => return Err(StoreError::corrupt("unexpected settle reply")),
    })
}

impl RedisStore {
    /// The whole record under `key` (one `HGETALL`).
    async fn read_whole(&self, key: &str) -> Result<Option<TaskRecord>, StoreError> {
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(key);
        let pairs: Vec<Value> = self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        self.inner.payloads.open_found(decode(pairs)?)
    }

    /// Runs `settle.lua`; `tail` is what follows the status (see the script's header).
    async fn settle(
        &self,
        lease: &Lease,
        job: &Job,
        status: TaskStatus,
        tail: Vec<String>,
    ) -> Result<Settled, StoreError> {
        let keys = &self.inner.keys;
        let args = [lease.token.to_string(), job.entry.clone(), keys.channel(&lease.task), status.as_str().to_owned()]
            .into_iter()
            .chain(tail)
            .collect();
        let out = self.script_acked(Retry::No, &scripts::SETTLE, self.lease_keys(lease), args).await?;
        settled(&out)
    }

    /// The keys of a script run under a lease: the task, its shard's job stream and lease index.
    fn lease_keys(&self, lease: &Lease) -> Vec<String> {
        let keys = &self.inner.keys;
        let shard = lease.task.shard();
        vec![keys.task(&lease.task), keys.jobs(shard), keys.leases(shard)]
    }
}

/// A `held | cancelled | gone | lost` script reply.
fn renewal(out: &redis::Value, script: &str) -> Result<Renewal, StoreError> {
    Ok(match item(std::slice::from_ref(out), 0).as_deref() {
        Some("held") => Renewal::Held,
        Some("cancelled") => Renewal::Cancelled,
        Some("gone") => Renewal::Gone,
        Some("lost") => Renewal::Lost,
        _ => return Err(StoreError::corrupt(format!("unexpected {script} reply"))),
    })
}
