//! Quotas per caller on tasks, checked when a task is created and shared by every replica:
//! how many of a caller's tasks may be running (working or waiting for input), how many may
//! be retained (any status, until they expire), and how many bytes its retained tasks may
//! hold (arguments, answers and state given at creation, plus the result once recorded).
//!
//! Invariant: a creation over a quota creates nothing and says which quota; a task counts
//! from its creation until it ends (running) or expires (retained). Ends are noticed lazily:
//! only a creation that finds its caller at the running quota checks which of the counted
//! tasks have ended since, so no transition pays for the quota and no crash can leave a
//! finished task counted as running.

/// A caller's quotas, carried by the task being created (0 = no quota).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    /// Whose quota: the caller's key (tasks of every session of one caller count together).
    pub scope: String,
    /// Most tasks running at once.
    pub max_running: u64,
    /// Most tasks retained at once.
    pub max_retained: u64,
    /// Most bytes the retained tasks may hold: a creation that would go over is refused; a
    /// result is counted when recorded (see `TaskStore::charge`), and may go over, since a
    /// task already run is never dropped for it.
    pub max_bytes: u64,
}

impl Quota {
    /// Whether any quota applies.
    pub fn is_limited(&self) -> bool {
        self.max_running > 0 || self.max_retained > 0 || self.max_bytes > 0
    }
}

/// Which quota refused a creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaKind {
    /// Tasks running at once.
    Running,
    /// Tasks retained at once.
    Retained,
    /// Bytes held by the retained tasks.
    Bytes,
}

impl QuotaKind {
    /// How the quota is named in errors.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Running => "running tasks",
            Self::Retained => "retained tasks",
            Self::Bytes => "bytes stored in tasks",
        }
    }
}
