//! Creating a task in the embedded store: found again by its idempotency key, checked against
//! its creator's quotas, recorded, indexed and enqueued (or, run where created, leased at
//! once) in one step under the store's lock.

use super::{Entry, Pending, State};
use crate::error::StoreError;
use crate::model::{Created, Job, Lease, NewTask, Read, TaskId};
use crate::quota::{Quota, QuotaKind};

impl State {
    pub(in crate::memory) fn create(&mut self, task: NewTask, now: u64) -> Result<Created, StoreError> {
        if let Some(idempotency) = &task.idempotency
            && let Some((id, call, _)) = self.idempotency.get(&idempotency.scope)
            && let Some(entry) = self.tasks.get(id)
        {
            if *call != idempotency.call {
                return Ok(Created::KeyReused);
            }
            return Ok(Created::Existing(entry.view(Read::Control)));
        }
        if let Some(quota) = task.quota.as_ref().filter(|q| q.is_limited()) {
            self.check_quota(quota, task.payload_bytes(), now)?;
        }
        let shard = match &task.idempotency {
            Some(i) => u16::from(i.scope[0]) % self.shards,
            None => rand::random_range(0..self.shards),
        };
        let id = TaskId::generate(u8::try_from(shard).unwrap_or(0));
        let (ttl_ms, idempotency, task_indexed) = (task.ttl_ms, task.idempotency.clone(), task.indexed);
        let task_quota = task.quota.clone().filter(Quota::is_limited);
        let answer_bytes = task.input_responses.values().map(|a| a.json.len() as u64).sum();
        let stored_bytes = task.payload_bytes();
        let record = task.into_record(id.clone(), now);
        if let Some(ttl) = ttl_ms {
            self.expiries.insert((now.saturating_add(ttl), id.clone()));
        }
        if task_indexed {
            self.owners.entry(record.owner.clone()).or_default().insert((now, id.clone()));
        }
        if let Some(idempotency) = idempotency {
            let window = ttl_ms.map_or(idempotency.window_ms, |ttl| ttl.min(idempotency.window_ms));
            if window > 0 {
                let expires = now.saturating_add(window);
                self.idempotency.insert(idempotency.scope, (id.clone(), idempotency.call, expires));
                self.idempotency_order.push_back((expires, idempotency.scope));
            }
        }
        self.enqueue(id.clone());
        let entry = Entry {
            record: record.clone(),
            lease_token: 0,
            lease_until: 0,
            asked: std::collections::BTreeMap::new(),
            answer_bytes,
            stored_bytes,
            deferred_since: None,
        };
        if let Some(quota) = task_quota {
            self.quotas.entry(quota.scope).or_default().push(id.clone());
        }
        self.tasks.insert(id, entry);
        Ok(Created::New(record))
    }

    /// Fails when the caller of `quota` is at one of its quotas (tasks that ended no longer
    /// count as running, expired ones not at all).
    fn check_quota(&mut self, quota: &Quota, bytes: u64, now: u64) -> Result<(), StoreError> {
        let Some(ids) = self.quotas.get_mut(&quota.scope) else { return Ok(()) };
        let tasks = &self.tasks;
        ids.retain(|id| tasks.contains_key(id));
        let running = ids.iter().filter(|id| !tasks[*id].record.status.is_terminal()).count();
        if quota.max_running > 0 && running as u64 >= quota.max_running {
            return Err(StoreError::QuotaExceeded {
                kind: QuotaKind::Running,
                max: quota.max_running,
                retry_after_ms: None,
            });
        }
        let oldest = || {
            ids.iter()
                .filter_map(|id| tasks[id].record.ttl_ms.map(|ttl| tasks[id].record.created_ms.saturating_add(ttl)))
                .min()
                .map(|expires| expires.saturating_sub(now))
        };
        if quota.max_retained > 0 && ids.len() as u64 >= quota.max_retained {
            return Err(StoreError::QuotaExceeded {
                kind: QuotaKind::Retained,
                max: quota.max_retained,
                retry_after_ms: oldest(),
            });
        }
        let stored: u64 = ids.iter().map(|id| tasks[id].stored_bytes).sum();
        if quota.max_bytes > 0 && stored.saturating_add(bytes) > quota.max_bytes {
            return Err(StoreError::QuotaExceeded {
                kind: QuotaKind::Bytes,
                max: quota.max_bytes,
                retry_after_ms: oldest(),
            });
        }
        Ok(())
    }

    /// See `TaskStore::charge`.
    pub(in crate::memory) fn charge(&mut self, scope: &str, id: &TaskId, bytes: u64) {
        let counted = self.quotas.get(scope).is_some_and(|ids| ids.contains(id));
        if let Some(entry) = self.tasks.get_mut(id).filter(|_| counted) {
            entry.stored_bytes = entry.stored_bytes.saturating_add(bytes);
        }
    }

    /// A task that runs on `worker` from now on: created (or found, like `create`), its lease
    /// held, its job pending for that worker (as if read and claimed).
    pub(in crate::memory) fn create_running(
        &mut self,
        task: NewTask,
        worker: &str,
        lease: u64,
        now: u64,
    ) -> Result<(Created, Option<(Lease, Job)>), StoreError> {
        let record = match self.create(task, now)? {
            Created::New(record) => record,
            other => return Ok((other, None)),
        };
        let job = self
            .queue
            .pop_back()
            .filter(|j| j.task == record.id)
            .unwrap_or_else(|| unreachable!("create enqueued its job last"));
        self.pending.insert(job.entry.clone(), Pending { job: job.clone(), worker: worker.to_owned(), delivered: now });
        let entry = self.tasks.get_mut(&record.id).unwrap_or_else(|| unreachable!("just created"));
        entry.lease_token = 1;
        entry.lease_until = now.saturating_add(lease);
        entry.record.attempts = 1;
        let lease = Lease {
            task: record.id.clone(),
            token: 1,
            entry: job.entry.clone(),
            worker: worker.to_owned(),
            // The memory store seals nothing.
            binding: mcpgate_seal::RecordBinding::default(),
        };
        Ok((Created::New(entry.record.clone()), Some((lease, job))))
    }
}
