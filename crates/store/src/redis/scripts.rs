//! The Lua scripts of `lua/*.lua`, loaded once per process; redis-rs sends `EVALSHA` and
//! reloads a script if the server answers `NOSCRIPT` (e.g. after a Redis restart).
//!
//! Each script is `lua/prelude.lua` (the functions the scripts share: Redis's clock, the
//! expiry check) followed by the script's own file, joined at compile time: Redis cannot
//! include one script in another, and this keeps each operation one script, one `EVALSHA`.

use std::sync::LazyLock;

use redis::Script;

/// The script of `lua/<file>` with the prelude before it.
macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(include_str!("../../lua/prelude.lua"), include_str!(concat!("../../lua/", $file))))
        })
    };
}

pub(super) static CREATE: LazyLock<Script> = script!("create.lua");
pub(super) static CANCEL: LazyLock<Script> = script!("cancel.lua");
pub(super) static CLAIM: LazyLock<Script> = script!("claim.lua");
pub(super) static RENEW: LazyLock<Script> = script!("renew.lua");
pub(super) static SETTLE: LazyLock<Script> = script!("settle.lua");
pub(super) static RELEASE: LazyLock<Script> = script!("release.lua");
pub(super) static FORGET: LazyLock<Script> = script!("forget.lua");
pub(super) static ANSWER: LazyLock<Script> = script!("answer.lua");
pub(super) static CHECKPOINT: LazyLock<Script> = script!("checkpoint.lua");
pub(super) static HOLD: LazyLock<Script> = script!("hold.lua");
pub(super) static LAPSE: LazyLock<Script> = script!("lapse.lua");
pub(super) static HAND_BACK: LazyLock<Script> = script!("handback.lua");
pub(super) static RATE_LIMIT: LazyLock<Script> = script!("ratelimit.lua");
pub(super) static QUOTA: LazyLock<Script> = script!("quota.lua");
pub(super) static CHARGE: LazyLock<Script> = script!("charge.lua");
pub(super) static PURGE: LazyLock<Script> = script!("purge.lua");
pub(super) static CUTOVER: LazyLock<Script> = script!("cutover.lua");
pub(super) static VAULT_PUT: LazyLock<Script> = script!("vault_put.lua");
pub(super) static VAULT_DELETE: LazyLock<Script> = script!("vault_delete.lua");
pub(super) static UNLOCK: LazyLock<Script> = script!("unlock.lua");
pub(super) static PIN_OBSERVE: LazyLock<Script> = script!("pin_observe.lua");
pub(super) static SEAL_RING: LazyLock<Script> = script!("seal_ring.lua");
pub(super) static PIN_APPROVE: LazyLock<Script> = script!("pin_approve.lua");
pub(super) static HEARTBEAT: LazyLock<Script> = script!("heartbeat.lua");

/// Every script, for loading at connect time.
pub(super) fn all() -> [&'static Script; 24] {
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
        &HEARTBEAT,
    ]
}
