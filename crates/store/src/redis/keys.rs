//! The Redis key schema, in one place.
//!
//! Every key of a task carries the task's shard as its hash tag (`{<prefix>:<shard>}`), and
//! so do the shard's job stream, dead-letter stream, owner indexes and idempotency keys: every
//! script touches one Redis Cluster slot. Event channels are not keys and carry no tag.
//!
//! ```text
//! <p>:{<p>:<ss>}:task:<id>        hash    the task record
//! <p>:{<p>:<ss>}:jobs             stream  jobs of shard <ss> (consumer group "workers")
//! <p>:{<p>:<ss>}:dead             stream  jobs whose task ran out of attempts
//! <p>:{<p>:<ss>}:leases           zset    tasks run where they were created: id by lease deadline
//! <p>:{<p>:<ss>}:owner:<hash>     zset    an owner's tasks in this shard, "<created>:<id>"
//! <p>:{<p>:<ss>}:idem:<digest>    string  task id of a recent call, for idempotent retries
//! <p>:events:<id>                 channel status changes of a task (every replica listens
//!                                         to all of them through one pattern)
//! <p>:once:<id>                   string  a single-use token that was used (until its expiry)
//! <p>:{<p>:catalog}:lists:<name>  string  the last lists upstream <name> served (JSON)
//! <p>:{<p>:catalog}:generation    integer advanced whenever any upstream's lists change
//! <p>:at-rest:cutover             string  Unix ms from which records hold payloads sealed in
//!                                         the current format only (see `at_rest`)
//! <p>:seal:rings                 hash    each live replica's seal key ids and fingerprints
//!                                         (replica id → "<seen ms>|<sealing id>|<id>=<fp>,…")
//! <p>:{<p>:vault}:<kind>:<h>      hash    a vault entry (h: digest of its scope and name):
//!                                         value, meta, version, updated, scope, name
//! <p>:{<p>:vault}:<kind>:index    zset    every entry of a kind, "<scope>\0<name>" (lex order)
//! <p>:{<p>:vault}:version         integer the last version given to any vault entry
//! <p>:lock:<h>                    string  a named lock's holder (h: digest of the name), PX
//! <p>:{<p>:pins:<name>}:approved      hash    upstream <name>'s approved tool hashes (tool → hash)
//! <p>:{<p>:pins:<name>}:approved-defs hash    the definitions they were taken from (tool → JSON)
//! <p>:{<p>:pins:<name>}:seen          hash    withheld tools' latest seen hashes (tool → hash)
//! <p>:{<p>:pins:<name>}:seen-defs     hash    their latest seen definitions (tool → JSON)
//! <p>:{<p>:pins:<name>}:seeded        string  set once anything was approved (first-seen seeds once)
//! ```

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::model::TaskId;

/// Consumer group of every job stream.
pub(super) const GROUP: &str = "workers";

/// Builds keys under one prefix.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    prefix: String,
}

impl Keys {
    pub(super) fn new(prefix: &str) -> Self {
        Self { prefix: prefix.to_owned() }
    }

    /// The prefix every key starts with.
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    fn base(&self, shard: u8) -> String {
        format!("{p}:{{{p}:{shard:02x}}}", p = self.prefix)
    }

    /// The stored lists of an upstream (one slot with the generation, for MULTI).
    pub(super) fn lists(&self, upstream: &str) -> String {
        format!("{p}:{{{p}:catalog}}:lists:{upstream}", p = self.prefix)
    }

    pub(super) fn lists_generation(&self) -> String {
        format!("{p}:{{{p}:catalog}}:generation", p = self.prefix)
    }

    pub(super) fn task(&self, id: &TaskId) -> String {
        format!("{}:task:{id}", self.base(id.shard()))
    }

    pub(super) fn jobs(&self, shard: u8) -> String {
        format!("{}:jobs", self.base(shard))
    }

    /// The shard's lease index: tasks running on the replica that created them, by deadline.
    pub(super) fn leases(&self, shard: u8) -> String {
        format!("{}:leases", self.base(shard))
    }

    pub(super) fn dead(&self, shard: u8) -> String {
        format!("{}:dead", self.base(shard))
    }

    pub(super) fn owner(&self, shard: u8, owner: &str) -> String {
        let mut key = format!("{}:owner:", self.base(shard));
        push_hashed(&mut key, owner);
        key
    }

    pub(super) fn idempotency(&self, shard: u8, digest: &[u8; 32]) -> String {
        let mut key = format!("{}:idem:", self.base(shard));
        for b in digest {
            let _ = write!(key, "{b:02x}");
        }
        key
    }

    /// A rate-limit bucket of `scope`: every bucket of one scope shares the scope's hash tag
    /// (one slot, so one script charges them all).
    pub(super) fn rate(&self, scope: &str, bucket: &str) -> String {
        format!("{}:{bucket}", self.scoped("rate", scope))
    }

    /// A quota set (`running`, `retained`) of `scope`: both sets of a scope share its hash tag.
    pub(super) fn quota(&self, scope: &str, set: &str) -> String {
        format!("{}:{set}", self.scoped("quota", scope))
    }

    /// `<p>:{<p>:<kind>:<hash>}`: the hash tag of one principal's keys of a kind, the scope
    /// hashed (16 bytes of SHA-256, hex), never spelled out.
    fn scoped(&self, kind: &str, scope: &str) -> String {
        let mut key = format!("{p}:{{{p}:{kind}:", p = self.prefix);
        push_hashed(&mut key, scope);
        key.push('}');
        key
    }

    /// The pin keys of an upstream, in the order the pin scripts take them: approved,
    /// approved-defs, seen, seen-defs, seeded (one slot per upstream).
    pub(super) fn pins(&self, upstream: &str) -> Vec<String> {
        ["approved", "approved-defs", "seen", "seen-defs", "seeded"]
            .iter()
            .map(|part| format!("{p}:{{{p}:pins:{upstream}}}:{part}", p = self.prefix))
            .collect()
    }

    /// The fleet's seal key rings (see `seal_ring`).
    pub(super) fn seal_rings(&self) -> String {
        format!("{}:seal:rings", self.prefix)
    }

    /// The fleet's heartbeats, in the order `heartbeat.lua` takes them: expiries, records
    /// (one slot, so the script runs on Redis Cluster).
    pub(super) fn heartbeats(&self) -> Vec<String> {
        ["expiries", "records"].iter().map(|part| format!("{p}:{{{p}:fleet}}:{part}", p = self.prefix)).collect()
    }

    /// The encryption-at-rest cutover (see `at_rest`).
    pub(super) fn at_rest_cutover(&self) -> String {
        format!("{}:at-rest:cutover", self.prefix)
    }

    /// A vault entry (one slot with its kind's index, for atomic writes).
    pub(super) fn vault_entry(&self, kind: &str, member: &str) -> String {
        let mut key = format!("{p}:{{{p}:vault}}:{kind}:", p = self.prefix);
        push_hashed(&mut key, member);
        key
    }

    /// The vault's version sequence (in the entries' slot).
    pub(super) fn vault_version(&self) -> String {
        format!("{p}:{{{p}:vault}}:version", p = self.prefix)
    }

    /// The index of a kind's vault entries.
    pub(super) fn vault_index(&self, kind: &str) -> String {
        format!("{p}:{{{p}:vault}}:{kind}:index", p = self.prefix)
    }

    /// A named lock.
    pub(super) fn lock(&self, name: &str) -> String {
        let mut key = format!("{}:lock:", self.prefix);
        push_hashed(&mut key, name);
        key
    }

    pub(super) fn once(&self, id: &str) -> String {
        format!("{}:once:{id}", self.prefix)
    }

    pub(super) fn channel(&self, id: &TaskId) -> String {
        format!("{}:events:{id}", self.prefix)
    }

    /// The pattern matching every task's event channel (glob characters of the prefix
    /// escaped).
    pub(super) fn events_pattern(&self) -> String {
        let mut pattern = String::with_capacity(self.prefix.len() + 9);
        for c in self.prefix.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push_str(":events:*");
        pattern
    }

    /// The channel of catalog changes, shared by every replica.
    pub(super) fn changes_channel(&self) -> String {
        format!("{}:changes", self.prefix)
    }

    /// The task id of an event channel, if it is one of ours.
    pub(super) fn task_of_channel(&self, channel: &str) -> Option<TaskId> {
        let rest = channel.strip_prefix(&self.prefix)?.strip_prefix(":events:")?;
        TaskId::parse(rest)
    }
}

/// Appends 16 bytes of SHA-256 of `value`, hex: keys name principals without spelling them.
fn push_hashed(key: &mut String, value: &str) {
    for b in &Sha256::digest(value.as_bytes())[..16] {
        let _ = write!(key, "{b:02x}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_keys_of_a_task_share_one_hash_tag() {
        let keys = Keys::new("mcpgate");
        let id = TaskId::generate(0x2a);
        let tag = |k: &str| k[k.find('{').expect("tag")..=k.find('}').expect("tag")].to_owned();
        let expected = tag(&keys.task(&id));
        assert_eq!(expected, "{mcpgate:2a}");
        for key in [
            keys.jobs(0x2a),
            keys.dead(0x2a),
            keys.leases(0x2a),
            keys.owner(0x2a, "3:issalice"),
            keys.idempotency(0x2a, &[7; 32]),
        ] {
            assert_eq!(tag(&key), expected, "{key}");
        }
        assert_eq!(keys.task_of_channel(&keys.channel(&id)), Some(id));
    }
}
