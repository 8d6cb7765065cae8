//! The deployment artifacts hold what docs/deployment.md promises: a multi-stage, non-root image
//! with a health check that works without a shell, a compose topology of Redis + replicas +
//! load balancer (+ load generator), and Kubernetes probes on the right endpoints. (The files
//! are also validated by `docker compose config` and the Kubernetes schemas in the test
//! command; here the probe runs for real.)

use mcpgate_e2e::{Gateway, binary};

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
    assert!(nginx.contains("include /etc/nginx/mcpgate-proxy.conf;") && nginx.contains("server gateway:8080 resolve;"));
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
