# shellcheck shell=bash
# The eight IPC components run as their own units and report healthy
# through clawctl (67-component-failures.guest.sh kills, starves and freezes
# them).
components_active() {
  rc=0
  for c in agent-loop wasm-daemon ebpf-agent security-agent fs-engine observability router scheduler; do
    systemctl is-active -q clawos-$c.service || { echo "clawos-$c.service: $(systemctl is-active clawos-$c.service)"; rc=1; }
  done
  exit $rc
}
check "components: every component unit is active" components_active
components_own_users() {
  for c in agent-loop wasm-daemon ebpf-agent security-agent fs-engine observability router scheduler; do
    test "$(ps -o user= -p "$(systemctl show -P MainPID clawos-$c.service)")" = "clawos-$c" || { echo "clawos-$c runs as the wrong user"; exit 1; }
  done
}
check "components: each runs as its own system user" components_own_users
components_all_healthy() {
  for _ in $(seq 45); do clawctl status --json > /tmp/status.json && exit 0; sleep 2; done
  cat /tmp/status.json; exit 1
}
check "components: clawctl status reports all eight healthy" components_all_healthy
router_answers_over_ipc() {
  clawctl ipc call router health_check | jq -e --argjson pid "$(systemctl show -P MainPID clawos-router)" \
    ".component == \"router\" and .status == \"ok\" and .pid == \$pid and .uptime_ns > 0 and (.component_version | length) > 0" >/dev/null
}
check "ipc: a request answered over the abstract socket from the operator CLI: the router's health, from its own process" router_answers_over_ipc

# Who may call is settled from the peer's kernel credentials (SO_PEERCRED,
# specs/ipc/README.md): a UID that is neither a component nor the operator
# is refused before a byte is read, and a component is held to its ACL
# rules: agent-loop, whose model chooses its tool calls, cannot list or
# answer the approvals its own actions wait on.
peer_credentials_decide() {
  set -e
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups clawctl ipc call router ping 2>&1) && { echo "nobody got an answer: $out"; exit 1; }
  echo "$out" | grep -q "EPERM\|is not a ClawOS component or operator" || { echo "$out"; exit 1; }
  journalctl -b -u clawos-router -o cat | grep -q "peer uid\|neither a component nor an operator"
  uid=$(id -u clawos-agent-loop)
  out=$(setpriv --reuid="$uid" --regid="$(id -g clawos-agent-loop)" --clear-groups clawctl approvals list 2>&1) && { echo "agent-loop listed approvals: $out"; exit 1; }
  echo "$out" | grep -q EPERM || { echo "$out"; exit 1; }
}
check "ipc: a process of another user is refused with EPERM; agent-loop's UID cannot answer approvals" peer_credentials_decide

# cgroup v2 (clawos.slice, clawos-component.conf): every component and the
# in-box model in clawos.slice, each with its CPU weight and its memory and
# tasks limits in its own cgroup, the slice capping them together.
cgroup_limits_set() {
  set -e
  slice=/sys/fs/cgroup/clawos.slice
  total=$(awk "/^MemTotal:/ { print \$2 * 1024 }" /proc/meminfo)
  max=$(cat $slice/memory.max); tasks=$(cat $slice/pids.max)
  echo "clawos.slice: memory.max $max of $total, pids.max $tasks"
  # set -e does not stop at a failed test inside an && list: each ends in exit.
  test "$max" != max && test "$max" -lt "$total" && test "$tasks" = 1152 || exit 1
  for c in agent-loop wasm-daemon ebpf-agent security-agent fs-engine observability router scheduler; do
    u=clawos-$c.service; cg=$slice/$u
    test "$(systemctl show -P ControlGroup $u)" = /clawos.slice/$u || { echo "$u: $(systemctl show -P ControlGroup $u)"; exit 1; }
    if ! { test "$(cat $cg/memory.max)" = "$(systemctl show -P MemoryMax $u)" && test "$(systemctl show -P MemoryMax $u)" != infinity; }; then
      echo "$u: memory.max $(cat $cg/memory.max)"; exit 1
    fi
    if ! { test "$(cat $cg/pids.max)" = 64 && test "$(cat $cg/cpu.weight)" = 100; }; then
      echo "$u: pids.max $(cat $cg/pids.max), cpu.weight $(cat $cg/cpu.weight)"; exit 1
    fi
  done
  test "$(systemctl show -P Slice clawos-model.service)" = clawos.slice && test "$(systemctl show -P CPUWeight clawos-model.service)" = 20
}
check "cgroups: the components and the in-box model run in clawos.slice with their CPU weight, memory and tasks limits; the slice caps them together" cgroup_limits_set
