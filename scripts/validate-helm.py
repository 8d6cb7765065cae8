#!/usr/bin/env python3
"""Lints and renders the Helm chart with Helm's own engine (helm-python-sdk binds Helm's Go
SDK), then validates every rendered manifest against the Kubernetes schemas.

Usage: validate-helm.py CHART OUT_DIR KUBERNETES_VALIDATE
  Renders each value set below into OUT_DIR/<name>/, runs KUBERNETES_VALIDATE --strict on the
  built-in kinds and checks the ServiceMonitor (a CRD the schemas do not know) by hand. Exits
  non-zero, saying why, on any lint error or warning, render failure or invalid manifest, and
  when a chart that must refuse to render (no sealing keys) does not.
"""

import pathlib
import subprocess
import sys

import helm_python as helm
import yaml

SEAL = "k1:" + "A" * 43 + "="
SETS = {
    # Secrets from values, an external Redis, autoscaling and the PDB on (the defaults).
    "defaults": {"secrets": {"sealKeys": SEAL, "redisUrl": "rediss://:pw@redis.example.internal:6380"}},
    # A trial: bundled Redis, an upstream config file, a ServiceMonitor, fixed replicas, the
    # admin API.
    "trial": {
        "secrets": {"sealKeys": SEAL, "adminToken": "t" * 40},
        "admin": {"enabled": True},
        "redis": {"bundled": True},
        "config": '[[upstream]]\nname = "everything"\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-everything"]\n',
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "autoscaling": {"enabled": False},
        "replicaCount": 2,
    },
    # Redis behind Sentinel, writes acknowledged by one replica.
    "sentinel": {
        "secrets": {"sealKeys": SEAL, "redisPassword": "data-pw", "sentinelPassword": "sentinel-pw"},
        "sentinel": {"enabled": True, "masterName": "mcpgate", "addresses": ["redis-0.redis:26379", "redis-1.redis:26379", "redis-2.redis:26379"]},
        "durability": {"replicasAck": 1},
    },
    # Production-like: an existing Secret, no PDB.
    "existing-secret": {"secrets": {"existingSecret": "mcpgate-secrets"}, "podDisruptionBudget": {"enabled": False}},
}
# Kinds each set must render, by name.
EXPECTED = {
    "defaults": {"ConfigMap", "Secret", "Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"},
    "trial": {"ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor"},
    "sentinel": {"ConfigMap", "Secret", "Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"},
    "existing-secret": {"ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler"},
}


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    chart_dir, out_dir, validate = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
    for name, values in SETS.items():
        report = helm.lint(chart_dir, values, strict=True, quiet=True)
        problems = [m for m in report["messages"] if m["severity"] >= 2] + [{"error": e} for e in report["errors"]]
        if problems:
            fail(f"helm lint ({name}): {problems}")
        with helm.Chart.load(chart_dir) as chart:
            chart.validate_schema(values)
            rendered = chart.render(values, name="gw", namespace="mcpgate", is_install=True)
        target = out_dir / name
        target.mkdir(parents=True, exist_ok=True)
        builtin, kinds = [], set()
        for path, text in rendered.items():
            if not path.endswith(".yaml"):
                continue
            for i, doc in enumerate(d for d in yaml.safe_load_all(text) if d):
                kinds.add(doc["kind"])
                file = target / f"{pathlib.Path(path).stem}-{i}.yaml"
                file.write_text(yaml.safe_dump(doc))
                if doc["kind"] == "ServiceMonitor":
                    endpoints = doc.get("spec", {}).get("endpoints") or []
                    if doc["apiVersion"] != "monitoring.coreos.com/v1" or not any(
                        e.get("port") == "http" and e.get("path") == "/metrics" for e in endpoints
                    ):
                        fail(f"{name}: the ServiceMonitor does not scrape /metrics on port http: {doc}")
                else:
                    builtin.append(str(file))
        if values.get("admin", {}).get("enabled"):
            texts = "".join(rendered.values())
            if "MCPGATE_ADMIN_LISTEN" not in texts or "MCPGATE_ADMIN_TOKEN" not in texts:
                fail(f"{name}: the admin API is enabled but its listener or token is not rendered")
        if values.get("sentinel", {}).get("enabled"):
            texts = "".join(rendered.values())
            wanted = ["MCPGATE_STORE_SENTINEL_ADDRESSES", "MCPGATE_STORE_SENTINEL_MASTER_NAME", "MCPGATE_STORE_SENTINEL_PASSWORD"]
            if any(w not in texts for w in wanted) or "MCPGATE_REDIS_URL" in texts:
                fail(f"{name}: Sentinel is enabled but its settings are not rendered (or a Redis URL is)")
        missing = EXPECTED[name] - kinds
        if missing:
            fail(f"{name}: rendered no {sorted(missing)} (got {sorted(kinds)})")
        result = subprocess.run([validate, "--strict", "--quiet", *builtin], capture_output=True, text=True)
        if result.returncode != 0:
            fail(f"{name}: rendered manifests do not validate:\n{result.stdout}{result.stderr}")
        print(f"helm chart ({name}): lint clean, {len(builtin) + ('ServiceMonitor' in kinds)} manifests valid")
    # Without sealing keys the chart must refuse to render, naming the value.
    try:
        with helm.Chart.load(chart_dir) as chart:
            chart.render({"secrets": {"redisUrl": "redis://r:6379"}}, name="gw", namespace="mcpgate")
    except helm.HelmError as e:
        if "secrets.sealKeys" not in str(e):
            fail(f"rendering without sealing keys failed, but not naming secrets.sealKeys: {e}")
    else:
        fail("the chart rendered without sealing keys")
    print("helm chart: refuses to render without sealing keys")
    # Sentinel with the bundled single-pod Redis must refuse to render, naming both values.
    try:
        with helm.Chart.load(chart_dir) as chart:
            chart.render(
                {
                    "secrets": {"sealKeys": "k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="},
                    "redis": {"bundled": True},
                    "sentinel": {"enabled": True, "addresses": ["s:26379"]},
                },
                name="gw",
                namespace="mcpgate",
            )
    except helm.HelmError as e:
        if "sentinel.enabled" not in str(e) or "redis.bundled" not in str(e):
            fail(f"rendering Sentinel with the bundled Redis failed, but not naming both values: {e}")
    else:
        fail("the chart rendered Sentinel together with the bundled Redis")
    print("helm chart: refuses Sentinel together with the bundled Redis")


if __name__ == "__main__":
    main()
