//! Creating tasks, every way they come to be: for a call (its client asked, its tool's policy
//! says so, a background tool), and adopted from a call already running (it asked for input
//! in 2025-11-25, or ran long).
//!
//! Invariants: every task is admitted first (see `admission`) and created with its caller's
//! quotas; a task is counted as created once, when the store made it durable and it is not one
//! an idempotent retry found again; an adopted task is never deduplicated (its call ran before
//! it existed, so a retry of the call is a new call).

use mcpgate_runtime::worker::{RunWatch, Slot};
use mcpgate_store::{Created, Job, Lease, NewTask, RawAnswer, RawAnswers, TaskRecord, TaskStore as _};

use super::TaskService;
use super::admission::Way;
use super::plan::{TaskPlan, TtlRequest};
use crate::call_context::CallContext;
use crate::error::GatewayError;
use crate::tasks::idempotency;

/// A task made of a running call, to hand to `Workers::adopt`.
#[derive(Debug)]
pub(crate) struct Adoption {
    /// The task, created leased to this replica.
    pub record: TaskRecord,
    /// Its lease.
    pub lease: Lease,
    /// Its job.
    pub job: Job,
    /// The worker slot its run holds.
    pub slot: Slot,
}

impl TaskService {
    /// Creates the planned task (or finds the one an idempotent retry names). With a free run
    /// slot here the task runs on this replica at once (run where created: no queue round
    /// trips); otherwise it is enqueued for any replica.
    pub(crate) async fn create(&self, cx: &CallContext, plan: TaskPlan) -> Result<TaskRecord, GatewayError> {
        Ok(self.create_here(cx, plan).await?.0)
    }

    /// [`Self::create`], with a watch of the run when the task is new and runs here now.
    pub(super) async fn create_here(
        &self,
        cx: &CallContext,
        plan: TaskPlan,
    ) -> Result<(TaskRecord, Option<RunWatch>), GatewayError> {
        let task = self.record_for(cx, plan)?;
        let created = match self.admit(cx, Way::Created).await? {
            Some(slot) => {
                let sent_at = tokio::time::Instant::now();
                let (created, run) =
                    self.store.create_running(task, self.workers.worker_id(), self.workers.lease()).await?;
                match (created, run) {
                    (Created::New(record), Some((lease, job))) => {
                        // Counted (and audited) before its run can report that it started.
                        self.book.created(&record);
                        let watch = self.workers.run_created(slot, lease, job, record.clone(), sent_at);
                        return Ok((record, Some(watch)));
                    }
                    // Found again by an idempotent retry: nothing runs here for it.
                    (created, _) => created,
                }
            }
            None => self.store.create(task).await?,
        };
        let new = matches!(created, Created::New(_));
        let Some(record) = created.into_record() else {
            return Err(GatewayError::invalid_params(
                "Idempotency-Key reused with different arguments: a key names one call (tool and arguments) \
                 within tasks.idempotency_window_ms",
            ));
        };
        if new {
            self.book.created(&record);
        }
        Ok((record, None))
    }

    /// Creates a task of a call already running, which runs on this replica from now on (a
    /// call of a tool of `upstream`, if any), once admitted like any task: refused, it creates
    /// nothing.
    pub(crate) async fn adopt(
        &self,
        cx: &CallContext,
        upstream: Option<&str>,
        plan: TaskPlan,
    ) -> Result<Adoption, GatewayError> {
        let task = self.record_for(cx, plan)?;
        let slot = self
            .admit(cx, Way::Adopted { upstream })
            .await?
            .ok_or_else(|| GatewayError::internal("an adopted task was admitted without a slot"))?;
        // A retry of the call is a new call (it ran before its task existed): no deduplication.
        let task = NewTask { idempotency: None, ..task };
        match self.store.create_running(task, self.workers.worker_id(), self.workers.lease()).await? {
            (Created::New(record), Some((lease, job))) => {
                self.book.created(&record);
                Ok(Adoption { record, lease, job, slot })
            }
            _ => Err(GatewayError::internal("a task created without deduplication was not new")),
        }
    }

    /// The record to create for a planned task (with its idempotency scope).
    fn record_for(&self, cx: &CallContext, plan: TaskPlan) -> Result<NewTask, GatewayError> {
        let tasks = &self.settings.tasks;
        let ttl_ms = match plan.ttl {
            TtlRequest::Default => Some(tasks.default_ttl_ms),
            // Very short lifetimes would expire before anyone could read the result.
            TtlRequest::Millis(t) => Some(t.clamp(1_000, tasks.max_ttl_ms)),
            TtlRequest::Unlimited if tasks.allow_unlimited_ttl => None,
            TtlRequest::Unlimited => Some(tasks.max_ttl_ms),
        };
        let arguments =
            serde_json::to_string(&plan.arguments).map_err(|e| GatewayError::internal_caused("arguments", e))?;
        let capabilities =
            serde_json::to_string(&*cx.capabilities).map_err(|e| GatewayError::internal_caused("capabilities", e))?;
        let mut input_responses = RawAnswers::new();
        for (key, answer) in &plan.answers {
            let json = serde_json::to_string(answer).map_err(|e| GatewayError::internal_caused("answer", e))?;
            input_responses.insert(key.clone(), RawAnswer { method: answer.method().to_owned(), json });
        }
        // Arguments serialize with sorted keys, so the same call always has the same digest.
        let idempotency = idempotency::scope(cx, &plan.tool, &arguments, tasks.idempotency_window_ms);
        Ok(NewTask {
            owner: cx.principal.key().to_owned(),
            issuer: cx.principal.issuer().to_owned(),
            subject: cx.principal.subject().to_owned(),
            era: cx.era,
            tool: plan.tool,
            arguments,
            capabilities,
            scopes: cx.principal.scopes().to_vec(),
            ttl_ms,
            poll_interval_ms: tasks.poll_interval_ms,
            idempotency,
            index_horizon_ms: (!tasks.allow_unlimited_ttl).then_some(tasks.max_ttl_ms),
            indexed: self.settings.indexed,
            quota: self.quota(cx),
            input_responses,
            state: plan.state.map(|s| s.to_string()),
            credential: plan
                .keeps_credential
                .then(|| cx.principal.credential().map(|c| c.expose().to_owned()))
                .flatten(),
            trace: crate::telemetry::traceparent(),
            server: cx.endpoint.server().map(str::to_owned),
        })
    }
}
