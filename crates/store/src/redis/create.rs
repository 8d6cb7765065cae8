//! Creating a task on Redis: the shard its idempotency key names (or any), its creator's quota
//! reserved first (`quota.lua`), then `create.lua`, which records, indexes and enqueues it (or
//! leases it to the worker that runs it at once) and remembers the call for retries; a
//! creation to run here that Redis did not confirm is handed back to the queue.

use std::time::Duration;

use super::at_rest::Payloads;
use super::record::item;
use super::{RedisStore, Retry, era_name, reply, scripts};
use crate::contract::TaskStore as _;
use crate::error::StoreError;
use crate::model::{Created, Job, Lease, NewTask, Read, TaskId};

impl RedisStore {
    /// `create`, or with `running` = (worker, lease ms) a task that runs on that worker from
    /// now on (its lease in the lease index, no job enqueued); also returns the job's queue
    /// entry (empty for a running task).
    pub(super) async fn create_with(
        &self,
        task: NewTask,
        running: Option<(&str, u64)>,
    ) -> Result<(Created, String), StoreError> {
        let shard = match &task.idempotency {
            Some(idempotency) => self.shard_of(&idempotency.scope),
            None => self.random_shard(),
        };
        let keys = &self.inner.keys;
        let call = task.idempotency.as_ref().map(|i| hex(&i.call)).unwrap_or_default();
        let window = task.idempotency.as_ref().map_or(0, |i| i.window_ms);
        let answer_bytes: usize = task.input_responses.values().map(|a| a.json.len()).sum();
        let mut force = false;
        let quota = task.quota.as_ref().filter(|q| q.is_limited());
        loop {
            let id = TaskId::generate(shard);
            if let Some(quota) = quota
                && let Err(over) = self.reserve(quota, &id, task.ttl_ms, task.payload_bytes()).await
            {
                // A retry of a call whose task exists gets that task, whatever the quota says.
                if let (StoreError::QuotaExceeded { .. }, Some(idempotency)) = (&over, &task.idempotency)
                    && let Some(found) = self.find_idempotent(shard, idempotency, &call).await?
                {
                    return Ok((found, String::new()));
                }
                return Err(over);
            }
            let ttl = task.ttl_ms.map_or_else(|| "-1".to_owned(), |t| t.to_string());
            let payloads = &self.inner.payloads;
            let binding = Payloads::binding(&id, &task.owner, task.era, &task.tool);
            let mut answers = Vec::with_capacity(3 * task.input_responses.len());
            for (k, a) in &task.input_responses {
                answers.extend([
                    k.clone(),
                    a.method.clone(),
                    payloads.seal_answer(&id, &task.owner, k, a.json.clone())?,
                ]);
            }
            // A task that runs at once waits in the lease index, any other in the job stream.
            let waits = if running.is_some() { keys.leases(shard) } else { keys.jobs(shard) };
            let mut script_keys = vec![keys.task(&id), keys.owner(shard, &task.owner), waits];
            if let Some(idempotency) = &task.idempotency {
                script_keys.push(keys.idempotency(shard, &idempotency.scope));
            }
            let out = self
                .script_acked(
                    Retry::Yes,
                    &scripts::CREATE,
                    script_keys,
                    [
                        id.to_string(),
                        task.owner.clone(),
                        task.issuer.clone(),
                        task.subject.clone(),
                        era_name(task.era).to_owned(),
                        task.tool.clone(),
                        payloads.seal(&id, &binding, "args", task.arguments.clone())?,
                        task.capabilities.clone(),
                        ttl,
                        task.poll_interval_ms.to_string(),
                        window.to_string(),
                        if force { "1" } else { "0" }.to_owned(),
                        if task.indexed { task.index_horizon_ms.unwrap_or(0).to_string() } else { "-1".to_owned() },
                        payloads.seal(&id, &binding, "state", task.state.clone().unwrap_or_default())?,
                        call.clone(),
                        task.scopes.join(" "),
                        answer_bytes.to_string(),
                        running.map(|r| r.0.to_owned()).unwrap_or_default(),
                        running.map_or(0, |r| r.1).to_string(),
                        match &task.credential {
                            Some(credential) => payloads.seal_secret(&id, &binding, "cred", credential)?,
                            None => String::new(),
                        },
                        task.trace.clone().unwrap_or_default(),
                        task.server.clone().unwrap_or_default(),
                    ]
                    .into_iter()
                    .chain(answers)
                    .collect(),
                )
                .await
                .and_then(reply);
            if let Some(quota) = quota
                && !matches!(&out, Ok(out) if item(out, 0).as_deref() == Some("1"))
            {
                // Nothing was created under this id (or maybe not: a failed call is given the
                // benefit of the doubt rather than leave the caller blocked): its place is free.
                if let Err(e) = self.unreserve(quota, &id).await {
                    tracing::warn!(
                        error = &e as &dyn std::error::Error,
                        "a quota place reserved for a task not created stays counted until checked"
                    );
                }
            }
            // Only a creation a retry can find again (it has an idempotency key): without one
            // a retry is a new task, and an adopted call already ran (or goes on running) as
            // a call; handing such a task back would run the tool a second time.
            if let (
                Err(StoreError::NotAcknowledged { .. } | StoreError::Unavailable { .. } | StoreError::Timeout { .. }),
                Some((worker, lease_ms)),
                Some(_),
            ) = (&out, running, &task.idempotency)
            {
                self.hand_back_unconfirmed(&id, binding, worker, Duration::from_millis(lease_ms));
            }
            let out = out?;
            match (item(&out, 0).as_deref(), item(&out, 1)) {
                (Some("1"), Some(created)) => {
                    let created_ms = created.parse().unwrap_or(0);
                    let entry = item(&out, 2).unwrap_or_default();
                    return Ok((Created::New(task.into_record(id, created_ms)), entry));
                }
                (Some("2"), Some(_)) => return Ok((Created::KeyReused, String::new())),
                (Some("0"), Some(existing)) => {
                    let existing = TaskId::parse(&existing)
                        .ok_or_else(|| StoreError::corrupt("idempotency key holds no task id"))?;
                    match self.get(&existing, Read::Control).await? {
                        Some(record) => return Ok((Created::Existing(record), String::new())),
                        // Expired at the edge of the window: create anew.
                        None => force = true,
                    }
                }
                _ => return Err(StoreError::corrupt("unexpected create reply")),
            }
        }
    }
}

impl RedisStore {
    /// After a creation to run here that failed (the replicas did not confirm it, or its reply
    /// was lost) and that the client's retry will find by its idempotency key: the caller is
    /// told it failed, so this replica will not run it, but the task
    /// may exist all the same, under a lease nobody uses. Handing it back (attempt not spent,
    /// a fresh job) lets any worker run it when the client's retry finds it; left alone it
    /// would be taken over only once the lease lapsed, as a second attempt, which fails a tool
    /// that is not retry-safe without it ever having run. In the background, retried while
    /// the store is unreachable for a third of the lease (a takeover is what remains after
    /// that); a task that does not exist answers "gone".
    fn hand_back_unconfirmed(&self, id: &TaskId, binding: mcpgate_seal::RecordBinding, worker: &str, lease: Duration) {
        let lease_held = Lease { task: id.clone(), token: 1, entry: String::new(), worker: worker.to_owned(), binding };
        let job = Job { task: id.clone(), entry: String::new() };
        let store = self.clone();
        tokio::spawn(async move {
            let give_up = tokio::time::Instant::now() + lease / 3;
            let mut backoff = Duration::from_millis(100);
            loop {
                match store.release(&lease_held, &job).await {
                    Ok(_) => return,
                    Err(e) if tokio::time::Instant::now() + backoff >= give_up => {
                        tracing::warn!(task = %job.task, error = &e as &dyn std::error::Error, "a task created to run here but not confirmed could not be handed back; it is taken over once its lease lapses");
                        return;
                    }
                    Err(_) => {
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                    }
                }
            }
        });
    }

    /// What an idempotency key already names, read directly (for a creation refused by a
    /// quota): the task of the same call, [`Created::KeyReused`] for another call, or `None`.
    async fn find_idempotent(
        &self,
        shard: u8,
        idempotency: &crate::model::Idempotency,
        call: &str,
    ) -> Result<Option<Created>, StoreError> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.inner.keys.idempotency(shard, &idempotency.scope));
        let held: Option<String> = self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        let Some((id, digest)) = held.as_deref().and_then(|h| h.split_once(' ')) else { return Ok(None) };
        if digest != call {
            return Ok(Some(Created::KeyReused));
        }
        let Some(id) = TaskId::parse(id) else { return Ok(None) };
        Ok(self.get(&id, Read::Control).await?.map(Created::Existing))
    }
}

/// Lower-case hex of a digest.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
