# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# The eight IPC components run as their own units, report healthy through
# clawctl, and systemd restarts one that dies.
check "components: every component unit is active" vm_ssh '
  rc=0
  for c in agent-loop wasm-daemon ebpf-agent security-agent fs-engine observability router scheduler; do
    systemctl is-active -q clawos-$c.service || { echo "clawos-$c.service: $(systemctl is-active clawos-$c.service)"; rc=1; }
  done
  exit $rc'
check "components: each runs as its own system user" vm_ssh '
  for c in agent-loop wasm-daemon ebpf-agent security-agent fs-engine observability router scheduler; do
    test "$(ps -o user= -p "$(systemctl show -P MainPID clawos-$c.service)")" = "clawos-$c" || { echo "clawos-$c runs as the wrong user"; exit 1; }
  done'
check "components: clawctl status reports all eight healthy" vm_ssh '
  for _ in $(seq 45); do clawctl status --json > /tmp/status.json && exit 0; sleep 2; done
  cat /tmp/status.json; exit 1'
check "components: a killed component is restarted by systemd and clawctl shows the restart" vm_ssh '
  systemctl kill -s KILL clawos-scheduler.service
  for _ in $(seq 45); do
    sleep 2
    clawctl status --json > /tmp/status.json || continue
    test "$(jq ".components[] | select(.component == \"scheduler\") | .restarts" /tmp/status.json)" -ge 1 && exit 0
  done
  cat /tmp/status.json; exit 1'
check "ipc: a request answered over the abstract socket from the operator CLI: the router's health, from its own process" \
  vm_ssh 'clawctl ipc call router health_check | jq -e --argjson pid "$(systemctl show -P MainPID clawos-router)" \
    ".component == \"router\" and .status == \"ok\" and .pid == \$pid and .uptime_ns > 0 and (.component_version | length) > 0" >/dev/null'

# Who may call is settled from the peer's kernel credentials (SO_PEERCRED,
# specs/ipc/README.md): a UID that is neither a component nor the operator
# is refused before a byte is read, and a component is held to its ACL
# rules: agent-loop, whose model chooses its tool calls, cannot list or
# answer the approvals its own actions wait on.
check "ipc: a process of another user is refused with EPERM; agent-loop's UID cannot answer approvals" vm_ssh '
  set -e
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups clawctl ipc call router ping 2>&1) && { echo "nobody got an answer: $out"; exit 1; }
  echo "$out" | grep -q "EPERM\|is not a ClawOS component or operator" || { echo "$out"; exit 1; }
  journalctl -b -u clawos-router -o cat | grep -q "peer uid\|neither a component nor an operator"
  uid=$(id -u clawos-agent-loop)
  out=$(setpriv --reuid=$uid --regid=$(id -g clawos-agent-loop) --clear-groups clawctl approvals list 2>&1) && { echo "agent-loop listed approvals: $out"; exit 1; }
  echo "$out" | grep -q EPERM || { echo "$out"; exit 1; }'

# cgroup v2 (clawos.slice, clawos-component.conf): every component and the
# in-box model in clawos.slice, each with its CPU weight and its memory and
# tasks limits in its own cgroup, the slice capping them together.
check "cgroups: the components and the in-box model run in clawos.slice with their CPU weight, memory and tasks limits; the slice caps them together" vm_ssh '
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
    test "$(cat $cg/memory.max)" = "$(systemctl show -P MemoryMax $u)" && test "$(systemctl show -P MemoryMax $u)" != infinity || { echo "$u: memory.max $(cat $cg/memory.max)"; exit 1; }
    test "$(cat $cg/pids.max)" = 64 && test "$(cat $cg/cpu.weight)" = 100 || { echo "$u: pids.max $(cat $cg/pids.max), cpu.weight $(cat $cg/cpu.weight)"; exit 1; }
  done
  test "$(systemctl show -P Slice clawos-model.service)" = clawos.slice && test "$(systemctl show -P CPUWeight clawos-model.service)" = 20'

# A component whose memory limit is set below what it uses (written to its
# cgroup's memory.max: systemd applies the unit's limit again when it
# restarts it) is killed by the kernel's OOM killer inside its own cgroup;
# systemd restarts it with its limit; no other component is touched.
check "cgroups: a component pushed past its memory limit is OOM-killed in its own cgroup and restarted with its limit; the other components keep running" vm_ssh '
  unit=clawos-scheduler.service; cg=/sys/fs/cgroup/clawos.slice/$unit
  others=$(for c in agent-loop wasm-daemon ebpf-agent security-agent fs-engine observability router; do systemctl show -P MainPID clawos-$c.service; done)
  before=$(systemctl show -P NRestarts $unit)
  # Whatever happens, the scheduler is left with its limit and running.
  trap "echo \$(systemctl show -P MemoryMax $unit) > $cg/memory.max 2>/dev/null; systemctl reset-failed $unit; systemctl start $unit" EXIT
  echo "$unit uses $(cat $cg/memory.current) bytes; memory.max set to 64K"
  echo 64K > $cg/memory.max
  for _ in $(seq 60); do
    sleep 1
    test "$(systemctl show -P NRestarts $unit)" -gt "$before" && systemctl is-active -q $unit && break
  done
  journalctl -b -u $unit -o cat | grep -q "killed by the OOM killer" || { journalctl -b -u $unit -o cat | tail -n 5; exit 1; }
  test "$(systemctl show -P NRestarts $unit)" -gt "$before" && systemctl is-active -q $unit
  test "$(cat $cg/memory.max)" = "$(systemctl show -P MemoryMax $unit)" || { echo "memory.max after the restart: $(cat $cg/memory.max)"; exit 1; }
  test "$others" = "$(for c in agent-loop wasm-daemon ebpf-agent security-agent fs-engine observability router; do systemctl show -P MainPID clawos-$c.service; done)" || { echo "another component was restarted"; exit 1; }
  for _ in $(seq 45); do clawctl status --json > /tmp/status.json && exit 0; sleep 2; done
  cat /tmp/status.json; exit 1'

# WatchdogSec (clawos-component.conf): a component that stops answering its
# watchdog (frozen with SIGSTOP, so it neither exits nor pings) is killed
# by systemd when the watchdog time runs out, and restarted.
check "components: a frozen component is killed by its watchdog and restarted" vm_ssh '
  unit=clawos-scheduler.service
  before=$(systemctl show -P NRestarts $unit)
  watchdog_us=$(systemctl show -P WatchdogUSec $unit)
  test -n "$watchdog_us" && test "$watchdog_us" != 0 && test "$watchdog_us" != infinity || { echo "no watchdog: $watchdog_us"; exit 1; }
  systemctl kill -s STOP $unit
  for _ in $(seq 150); do
    sleep 1
    test "$(systemctl show -P NRestarts $unit)" -gt "$before" && systemctl is-active -q $unit && break
  done
  test "$(systemctl show -P NRestarts $unit)" -gt "$before" || { systemctl status $unit --no-pager; exit 1; }
  journalctl -b -u $unit -o cat | grep -qi "watchdog timeout"'
