//! The deployment artifacts hold what docs/deployment.md promises: a multi-stage, non-root image
//! with a health check that works without a shell, a compose topology of Redis + replicas +
//! load balancer (+ load generator), and Kubernetes probes on the right endpoints. (The files
//! are also validated by `docker compose config` and the Kubernetes schemas in the test
//! command; here the probe runs for real.) The shipped nginx configs pass `nginx -t` on the
//! nginx distributions ship (the test command installs Debian's nginx-light), and the one for
//! replicas without Docker serves calls and tasks through a real nginx.

use serde_json::json;

use mcpgate_e2e::{Client, Cluster, Gateway, Nginx, Until, binary, poll_task};

fn read(path: &str) -> String {
    let full = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn probe(url: &str) -> std::process::ExitStatus {
    std::process::Command::new(binary().expect("mcpgate binary"))
        .args(["--probe", url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("runs")
}

#[test]
fn the_probe_exits_zero_only_for_a_200() -> anyhow::Result<()> {
    let gateway = Gateway::builder().start()?;
    assert!(probe(&format!("http://{}/healthz", gateway.addr())).success());
    assert!(probe(&format!("http://{}/readyz", gateway.addr())).success());
    assert!(!probe(&format!("http://{}/no-such-path", gateway.addr())).success(), "404 is unhealthy");
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    assert!(!probe(&format!("http://127.0.0.1:{port}/healthz")).success(), "nothing listening is unhealthy");
    assert!(!probe("https://127.0.0.1/healthz").success(), "only plain http is probed");
    Ok(())
}

#[test]
fn the_image_is_multi_stage_non_root_and_health_checked() {
    let dockerfile = read("deploy/Dockerfile");
    let froms: Vec<&str> = dockerfile.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert!(froms.len() >= 2 && froms[0].ends_with(" AS build"), "{froms:?}");
    assert!(froms.last().is_some_and(|f| f.contains("distroless") && f.contains("nonroot")), "{froms:?}");
    assert!(dockerfile.contains("\nUSER 65532:65532\n"));
    assert!(dockerfile.contains("HEALTHCHECK") && dockerfile.contains("\"--probe\""), "no shell needed");
    assert!(dockerfile.contains("-p mcpgate -p mcpgate-loadgen"), "the image carries the load generator too");
}

#[test]
fn compose_runs_redis_replicas_a_load_balancer_and_a_load_profile() {
    let compose = read("docker-compose.yml");
    for needle in [
        "  redis:\n",
        "\"--appendonly\", \"yes\"",
        "  gateway:\n",
        "      replicas: 3\n",
        "MCPGATE_REDIS_URL: redis://redis:6379",
        "  lb:\n",
        "- \"8080:8080\"",
        "./deploy/nginx/mcpgate-proxy.conf:/etc/nginx/mcpgate-proxy.conf:ro",
        "  loadgen:\n",
        "profiles: [\"load\"]",
        "path: deploy/gateway.env.example",
    ] {
        assert!(compose.contains(needle), "docker-compose.yml lacks {needle:?}");
    }
    let nginx = read("deploy/nginx.conf");
    assert!(nginx.contains("include /etc/nginx/mcpgate-proxy.conf;"));
    // The replicas' name, looked up through Docker's DNS at request time.
    assert!(nginx.contains("resolver 127.0.0.11 ") && nginx.contains("set $mcpgate_upstream gateway:8080;"));
    let env = read("deploy/gateway.env.example");
    assert!(env.contains("MCPGATE_SEAL_KEYS="), "replicas need shared keys");
}

#[test]
fn kubernetes_probes_use_readiness_and_liveness_endpoints() {
    let deployment = read("deploy/k8s/deployment.yaml");
    assert!(deployment.contains("readinessProbe:\n            httpGet:\n              path: /readyz"));
    assert!(deployment.contains("livenessProbe:\n            httpGet:\n              path: /healthz"));
    assert!(deployment.contains("terminationGracePeriodSeconds: 40"));
    let config = read("deploy/k8s/configmap.yaml");
    // The grace period covers the drain and the shutdown grace.
    let secs = |key: &str| -> u64 {
        config
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
            .and_then(|v| v.trim_matches('"').parse().ok())
            .unwrap_or_else(|| panic!("{key} in configmap.yaml"))
    };
    assert!(secs("MCPGATE_SHUTDOWN_DRAIN_SECS") + secs("MCPGATE_SHUTDOWN_GRACE_SECS") < 40);
    for file in ["configmap.yaml", "deployment.yaml", "service.yaml", "hpa.yaml", "pdb.yaml"] {
        assert!(
            read("deploy/k8s/kustomization.yaml").contains(&format!("  - {file}\n")),
            "{file} not in kustomization"
        );
    }
}

/// A shipped nginx config with its `include` of the proxy settings pointed at this checkout's
/// file (where deploy/ says to copy it: /etc/nginx/mcpgate-proxy.conf).
fn with_checkout_proxy(config: &str) -> String {
    let include = "include /etc/nginx/mcpgate-proxy.conf;";
    assert!(config.contains(include), "the config includes the shared proxy settings");
    let proxy = format!("{}/../deploy/nginx/mcpgate-proxy.conf", env!("CARGO_MANIFEST_DIR"));
    config.replace(include, &format!("include {proxy};"))
}

/// `text` with `from` replaced by `to`, which must be there.
fn replaced(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from:?} not found in {text}");
    text.replace(from, to)
}

#[test]
fn the_compose_load_balancer_config_passes_nginx_t_on_the_distributions_nginx() -> anyhow::Result<()> {
    // Mounted as the whole nginx.conf of the compose `lb` service; the nginx here is Debian's
    // (1.22 on Debian 12), which has no `resolve` on upstream servers (nginx >= 1.27.3).
    Nginx::check_config(&with_checkout_proxy(&read("deploy/nginx.conf")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replicas_recipe_serves_calls_and_tasks_through_nginx() -> anyhow::Result<()> {
    // docs/deployment.md's recipe: replicas sharing one Redis, deploy/nginx/replicas.conf in
    // nginx's http context, its `server` lines naming the replicas' --listen addresses.
    let cluster = Cluster::builder(3).start()?;
    let mut shipped = with_checkout_proxy(&read("deploy/nginx/replicas.conf"));
    for i in 0..3 {
        shipped = replaced(
            &shipped,
            &format!("server 127.0.0.1:808{};", i + 1),
            &format!("server {};", cluster.replica(i).addr()),
        );
    }
    let nginx = Nginx::start_with(|port, ready| {
        replaced(&shipped, "    listen 8080;\n", &format!("    listen 127.0.0.1:{port};\n    {ready}"))
    })?;
    let url = format!("http://{}/mcp", nginx.addr());
    let client = Client::new()?;

    let (status, health) = client.get(&format!("http://{}/lb-health", nginx.addr())).await?;
    assert_eq!((status, health.as_str()), (200, "ok\n"));
    let echo = client.modern(&url, "tools/call", json!({"name": "echo", "arguments": {"text": "hello"}})).await?;
    let echo = echo.json()?;
    assert_eq!(echo["result"]["content"][0]["text"], "hello", "{echo}\n{}", nginx.log());

    // A task created through nginx and polled through it (each poll on any replica).
    let meta =
        json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let call = json!({"name": "slow_report", "arguments": {"topic": "replicas", "seconds": 1}, "_meta": meta});
    let created = client.modern(&url, "tools/call", call).await?.json()?;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().expect("a task id");
    let done = poll_task(&client, &url, id, Until::Terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    Ok(())
}
