# shellcheck shell=bash
# A component that dies, runs out of memory or hangs is restarted by systemd
# and loses nothing it had acknowledged (clawos-component.conf: Restart=,
# WatchdogSec=; specs/ipc/README.md, "Heartbeat and watchdog"). Each check
# aims at a component with state to lose, after the checks that gave it
# some: agent-loop (an agent's pause, kept in its database), wasm-daemon (a
# tool's note in an agent's database), security-agent (the unsealed vault,
# whose master key a restart takes from the kernel keyring).

# wait_restarted UNIT BEFORE SECONDS: until UNIT restarted since NRestarts
# was BEFORE and is active again.
wait_restarted() {
  for _ in $(seq "$3"); do
    sleep 1
    test "$(systemctl show -P NRestarts "$1")" -gt "$2" && systemctl is-active -q "$1" && return 0
  done
  systemctl status "$1" --no-pager | tail -n 5; return 1
}

agent_loop_killed() {
  unit=clawos-agent-loop.service
  clawctl agent pause kernel-engine >/dev/null || exit 1
  before=$(systemctl show -P NRestarts $unit)
  systemctl kill -s KILL $unit
  wait_restarted $unit "$before" 60 || exit 1
  for _ in $(seq 45); do
    clawctl status --json > /tmp/status.json 2>/dev/null &&
      test "$(jq ".components[] | select(.component == \"agent-loop\") | .restarts" /tmp/status.json)" -gt "$before" && break
    sleep 2
  done
  test "$(jq ".components[] | select(.component == \"agent-loop\") | .restarts" /tmp/status.json)" -gt "$before" || { cat /tmp/status.json; exit 1; }
  clawctl agent list | grep -Eq "^kernel-engine +paused" || { clawctl agent list; exit 1; }
  clawctl agent resume kernel-engine | grep -q "\"idle\""
}
check "components: agent-loop killed (SIGKILL) is restarted by systemd, clawctl shows the restart, and a paused agent is still paused" agent_loop_killed

# Its memory limit set below what it uses (written to its cgroup's
# memory.max: systemd applies the unit's own limit again when it restarts
# it), wasm-daemon is killed by the kernel's OOM killer inside its own
# cgroup; systemd restarts it with its limit; no other component is
# touched; the note a tool wrote before is there.
wasm_daemon_out_of_memory() {
  unit=clawos-wasm-daemon.service; cg=/sys/fs/cgroup/clawos.slice/$unit
  clawctl tool run scratchpad "{\"op\":\"set\",\"key\":\"before-oom\",\"value\":\"kept\"}" --agent wasm-agent >/dev/null || exit 1
  others=$(for c in agent-loop ebpf-agent security-agent fs-engine observability router scheduler; do systemctl show -P MainPID clawos-$c.service; done)
  before=$(systemctl show -P NRestarts $unit)
  # Whatever happens, wasm-daemon is left with its limit and running.
  trap 'systemctl show -P MemoryMax $unit > $cg/memory.max 2>/dev/null; systemctl reset-failed $unit; systemctl start $unit' EXIT
  echo "$unit uses $(cat $cg/memory.current) bytes; memory.max set to 64K"
  echo 64K > $cg/memory.max
  wait_restarted $unit "$before" 60
  journalctl -b -u $unit -o cat | grep -q "killed by the OOM killer" || { journalctl -b -u $unit -o cat | tail -n 5; exit 1; }
  test "$(systemctl show -P NRestarts $unit)" -gt "$before" && systemctl is-active -q $unit || exit 1
  test "$(cat $cg/memory.max)" = "$(systemctl show -P MemoryMax $unit)" || { echo "memory.max after the restart: $(cat $cg/memory.max)"; exit 1; }
  test "$others" = "$(for c in agent-loop ebpf-agent security-agent fs-engine observability router scheduler; do systemctl show -P MainPID clawos-$c.service; done)" || { echo "another component was restarted"; exit 1; }
  clawctl tool run scratchpad "{\"op\":\"get\",\"key\":\"before-oom\"}" --agent wasm-agent | jq -e ".value == \"kept\"" >/dev/null || exit 1
  for _ in $(seq 45); do clawctl status --json > /tmp/status.json && exit 0; sleep 2; done
  cat /tmp/status.json; exit 1
}
check "cgroups: wasm-daemon pushed past its memory limit is OOM-killed in its own cgroup and restarted with its limit; a tool's note survives; the other components keep running" wasm_daemon_out_of_memory

# The product's watchdog is 90 s, three missed 30 s heartbeats (the unit's
# WatchdogSec=, checked first). Waiting that out proves nothing more than
# a shorter one: the check gives security-agent 20 s through a runtime
# drop-in (its heartbeat loop pings at half of whatever systemd sets),
# freezes it with SIGSTOP, so it neither exits nor pings, and waits for
# systemd to kill and restart it; then takes the drop-in away again.
security_agent_frozen() {
  unit=clawos-security-agent.service; dropin=/run/systemd/system/$unit.d/99-watchdog-check.conf
  test "$(systemctl show -P WatchdogUSec $unit)" = "1min 30s" || { echo "WatchdogSec: $(systemctl show -P WatchdogUSec $unit)"; exit 1; }
  trap 'rm -f $dropin; systemctl daemon-reload; systemctl restart $unit' EXIT
  mkdir -p ${dropin%/*} && printf "[Service]\nWatchdogSec=20\n" > $dropin && systemctl daemon-reload && systemctl restart $unit || exit 1
  test "$(systemctl show -P WatchdogUSec $unit)" = 20s || exit 1
  before=$(systemctl show -P NRestarts $unit)
  systemctl kill -s STOP $unit
  wait_restarted $unit "$before" 90 || exit 1
  journalctl -b -u $unit -o cat | grep -qi "watchdog timeout" || { journalctl -b -u $unit -o cat | tail -n 5; exit 1; }
  for _ in $(seq 30); do clawctl vault status --json 2>/dev/null | jq -e ".state == \"unsealed\"" >/dev/null && break; sleep 1; done
  clawctl secret get vm-test-canary | cmp - /run/vault-test/canary
}
check "components: security-agent frozen (SIGSTOP) is killed by its watchdog and restarted; the vault is unsealed again and a secret reads back" security_agent_frozen
