# shellcheck shell=bash
# The Prometheus endpoint (observability, 127.0.0.1:9464, reached over SSH):
# scraped in the booted image and read on the host with the Prometheus
# project's own text-format parser (prometheus_client, make test-python),
# which refuses anything malformed. Every component is up with heartbeats
# counted, and the scripted agent's turn (59-agent-turns.sh) shows in the
# agents' metrics with its three tool calls.
check_prometheus_scrape() {
  vm_ssh 'printf "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" | socat -t 5 - TCP:127.0.0.1:9464' > "$OUT/vm/metrics.http" || return 1
  python3 - "$OUT/vm/metrics.http" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
head, _, body = open(sys.argv[1], encoding="utf-8", newline="").read().partition("\r\n\r\n")
assert head.startswith("HTTP/1.0 200") and "text/plain; version=0.0.4" in head, head
samples = {}
for family in text_string_to_metric_families(body):
    for sample in family.samples:
        samples.setdefault(sample.name, []).append((sample.labels, sample.value))
components = {"router", "observability", "agent-loop", "wasm-daemon", "ebpf-agent", "security-agent", "fs-engine", "scheduler"}
up = {labels["component"]: value for labels, value in samples["clawos_component_up"]}
assert set(up) == components and all(value == 1 for value in up.values()), up
beats = {labels["component"]: value for labels, value in samples["clawos_component_heartbeats_total"]}
assert set(beats) == components and all(value > 0 for value in beats.values()), beats
calls = {(labels["tool"], labels["ok"]): value for labels, value in samples["clawos_agent_tool_calls_total"] if labels["agent"] == "vm-scripted"}
assert all(calls.get((tool, "true"), 0) >= 1 for tool in ["text-stats", "file_write", "memory_search"]), calls
tokens = [value for labels, value in samples["clawos_agent_tokens_total"] if labels["agent"] == "vm-scripted" and labels["direction"] == "input"]
assert tokens and tokens[0] >= 1_000_000, tokens
print(f"{len(samples)} metric names, {sum(len(v) for v in samples.values())} samples")
PY
}
check "metrics: the Prometheus endpoint parses with Prometheus's own parser; every component up with heartbeats, the scripted agent's tool calls and tokens" check_prometheus_scrape
