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
check "ipc: a request answered over the abstract socket from the operator CLI" \
  vm_ssh 'clawctl ipc call router health_check | jq -e .'
