//! An expired upstream token is refreshed once, even when replicas race for it, and a task
//! created before the expiry completes on another replica after it.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use mcpgate_e2e::{Look, PATIENCE, TaskPoll, Until, wait_for};

use super::setup::Setup;
use super::{LockAttempts, TASKS, now_ms, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refreshed_once_even_when_replicas_race_and_a_task_outlives_it() -> anyhow::Result<()> {
    // Upstream tokens live 4 s (refreshed within their last second): each expiry below is
    // waited out, so the lifetime is what this test costs, four times over.
    let mut setup = Setup::start(Duration::from_secs(4)).await?;
    let mut alice = setup.user("alice").await?;
    let link = setup.link_in_tool_error(&alice).await?;
    setup.connected(&mut alice, &link, (0, 1, 2)).await?;
    assert_eq!(setup.whoami(&alice, None).await?, "alice");
    let all = [0, 1, 2];

    // Expired: the next call refreshes once.
    setup.until_expired("alice").await?;
    let before = setup.refreshes(&all, "ok").await?;
    assert_eq!(setup.whoami(&alice, None).await?, "alice", "{}", setup.logs());
    assert_eq!(setup.refreshes(&all, "ok").await? - before, 1, "one refresh for one expired token");

    // Expired again, and two replicas race on it: both calls succeed, the refresh token is
    // spent once (spending a rotated one twice would revoke the grant: see below). The token
    // endpoint holds the first refresh until the other replica is seen wanting one too (trying
    // the refresh lock, or at the token endpoint itself): the two overlap, however the machine
    // schedules them.
    setup.until_expired("alice").await?;
    let before = setup.refreshes(&all, "ok").await?;
    let mut locks = LockAttempts::start(setup.redis_port()).await?;
    setup.token_endpoint(Method::POST, "hold-tokens").await?;
    let overlap = async {
        wait_for("both racing replicas to want a refresh while one is held", PATIENCE, async || {
            let held = setup.token_endpoint(Method::GET, "held-tokens").await?["held"].as_u64().unwrap_or(0);
            let locks = locks.count().await?;
            Ok(if held >= 1 && (locks >= 2 || held >= 2) {
                Look::Done(())
            } else {
                Look::not_yet(format!("{held} held at the token endpoint, {locks} lock attempts"))
            })
        })
        .await;
        setup.token_endpoint(Method::POST, "release-tokens").await
    };
    let (one, two, released) = tokio::join!(setup.whoami(&alice, Some(1)), setup.whoami(&alice, Some(2)), overlap);
    released?;
    assert_eq!((one?, two?), ("alice".to_owned(), "alice".to_owned()), "{}", setup.logs());
    assert_eq!(setup.refreshes(&all, "ok").await? - before, 1, "one refresh for two racing replicas");

    // The grant still works: the next expiry is refreshed too.
    setup.until_expired("alice").await?;
    assert_eq!(setup.whoami(&alice, None).await?, "alice", "{}", setup.logs());
    assert_eq!(setup.refreshes(&all, "failed").await?, 0, "no refresh was refused");

    // A task created before expiry: its replica is killed once the token expired, and another
    // replica runs the (idempotent) call again with a refreshed token of Alice's.
    let caps = json!({"extensions": {TASKS: {}}});
    // The call runs until the test creates `release` (the 120 s are only the upstream's bound):
    // still running when its replica is killed after the token's expiry however loaded the
    // machine, and no fixed sleep for the rerun, which returns once released.
    let dir = tempfile::tempdir()?;
    let lb = setup.cluster.url();
    let mut tries = 0;
    let (id, release) = loop {
        tries += 1;
        let release = dir.path().join(format!("release-{tries}"));
        let arguments = json!({"seconds": 120, "release": release.to_str().unwrap_or_default()});
        let params = json!({"name": "files_slow_whoami", "arguments": arguments});
        let expiry = setup.expires_at("alice")?;
        let created = setup.modern(&lb, &alice, "tools/call", caps.clone(), params).await?;
        let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
        // Answered before the token's expiry: created before it.
        if now_ms() < expiry {
            break (id, release);
        }
        // The machine took longer than the token's life: this task shows nothing and is let
        // through; the next one is created on a token refreshed just before.
        anyhow::ensure!(tries < 3, "three tasks in a row were created after their token expired");
        std::fs::write(&release, b"")?;
        TaskPoll::new(&setup.client, &lb).auth(&alice.bearer).within(PATIENCE).until(&id, Until::Terminal).await;
        setup.until_expired("alice").await?;
        assert_eq!(setup.whoami(&alice, None).await?, "alice", "{}", setup.logs());
    };
    let victim = setup.cluster.executing_replica_soon(&setup.client).await?;
    setup.until_expired("alice").await?;
    let survivors: Vec<usize> = all.into_iter().filter(|&i| i != victim).collect();
    let before = setup.refreshes(&survivors, "ok").await?;
    setup.cluster.kill(victim);
    std::fs::write(&release, b"")?;
    let done = TaskPoll::new(&setup.client, &lb)
        .auth(&alice.bearer)
        .within(Duration::from_secs(60))
        .until(&id, Until::Terminal)
        .await;
    assert_eq!(done["status"], "completed", "{done}\n{}", setup.logs());
    assert_eq!(text(&done["result"]), "alice", "{done}");
    let refreshed = setup.refreshes(&survivors, "ok").await? - before;
    assert!(refreshed >= 1, "the rerun after expiry refreshed on a survivor: {refreshed}");
    Ok(())
}
