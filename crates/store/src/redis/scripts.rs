//! The Lua scripts of `lua/*.lua`, loaded once per process; redis-rs sends `EVALSHA` and
//! reloads a script if the server answers `NOSCRIPT` (e.g. after a Redis restart).

use std::sync::LazyLock;

use redis::Script;

pub(super) static CREATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/create.lua")));
pub(super) static CANCEL: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/cancel.lua")));
pub(super) static CLAIM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/claim.lua")));
pub(super) static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/renew.lua")));
pub(super) static SETTLE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/settle.lua")));
pub(super) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/release.lua")));
pub(super) static FORGET: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/forget.lua")));
pub(super) static ANSWER: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/answer.lua")));
pub(super) static CHECKPOINT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/checkpoint.lua")));
pub(super) static HOLD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/hold.lua")));
pub(super) static LAPSE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/lapse.lua")));
pub(super) static HAND_BACK: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/handback.lua")));
pub(super) static RATE_LIMIT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/ratelimit.lua")));
pub(super) static QUOTA: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/quota.lua")));
pub(super) static CHARGE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/charge.lua")));
pub(super) static PURGE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/purge.lua")));
pub(super) static CUTOVER: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/cutover.lua")));
pub(super) static VAULT_PUT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/vault_put.lua")));
pub(super) static VAULT_DELETE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/vault_delete.lua")));
pub(super) static UNLOCK: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/unlock.lua")));
pub(super) static PIN_OBSERVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/pin_observe.lua")));
pub(super) static SEAL_RING: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/seal_ring.lua")));
pub(super) static PIN_APPROVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/pin_approve.lua")));

/// Every script, for loading at connect time.
pub(super) fn all() -> [&'static Script; 23] {
    [
        &CREATE,
        &CANCEL,
        &CLAIM,
        &RENEW,
        &SETTLE,
        &RELEASE,
        &FORGET,
        &ANSWER,
        &HAND_BACK,
        &CHECKPOINT,
        &HOLD,
        &LAPSE,
        &RATE_LIMIT,
        &QUOTA,
        &CHARGE,
        &PURGE,
        &CUTOVER,
        &VAULT_PUT,
        &VAULT_DELETE,
        &UNLOCK,
        &PIN_OBSERVE,
        &PIN_APPROVE,
        &SEAL_RING,
    ]
}
