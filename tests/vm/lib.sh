# Helpers for the boot tests: start a VM headless, wait until it is ready,
# run commands in it over SSH, shut it down. Sourced by tests/vm/run.sh.
KEY="$OUT/ssh/id_ed25519"
VM_PID="" VM_PORT="" VM_SERIAL=""
PASSED=0 FAILED=0

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# vm_start IMAGE STATE_DIR [--fresh]: boots in the background.
vm_start() {
  local image=$1 state=$2; shift 2
  VM_PORT=$(free_port); VM_SERIAL="$state/serial.log"
  mkdir -p "$state"; : > "$VM_SERIAL"
  VM_T0=$(date +%s.%N)
  bash "$REPO/qemu/run.sh" --image "$image" --state "$state" --headless --ssh-port "$VM_PORT" --serial "$VM_SERIAL" "$@" \
    > "$state/qemu.log" 2>&1 &
  VM_PID=$!
}

vm_ssh() {
  ssh -i "$KEY" -p "$VM_PORT" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
    -o LogLevel=ERROR -o ConnectTimeout=5 -o BatchMode=yes root@127.0.0.1 "$@"
}

# vm_wait_ready TIMEOUT: until systemd finished booting (running or degraded)
# and sshd answers. Sets VM_READY_S (seconds since QEMU start).
vm_wait_ready() {
  local deadline=$(( $(date +%s) + $1 )) state
  while (( $(date +%s) < deadline )); do
    kill -0 "$VM_PID" 2>/dev/null || { warn "QEMU exited before the VM was ready"; vm_serial_tail; return 1; }
    state=$(vm_ssh systemctl is-system-running --wait 2>/dev/null) || true
    if [[ $state == running || $state == degraded ]]; then
      VM_READY_S=$(echo "$(date +%s.%N) - $VM_T0" | bc); VM_READY_S=$(printf '%.1f' "$VM_READY_S")
      log "VM ready ($state) after ${VM_READY_S}s"; return 0
    fi
    sleep 2
  done
  warn "VM not ready within $1 s"; vm_serial_tail; return 1
}

vm_serial_tail() { warn "last lines of the serial console ($VM_SERIAL):"; tail -n 60 "$VM_SERIAL" >&2 || true; }

# vm_wait_exit TIMEOUT: waits for QEMU to exit, killing it after TIMEOUT.
vm_wait_exit() {
  local deadline=$(( $(date +%s) + $1 ))
  while kill -0 "$VM_PID" 2>/dev/null; do
    if (( $(date +%s) >= deadline )); then kill "$VM_PID" 2>/dev/null; wait "$VM_PID" 2>/dev/null; return 1; fi
    sleep 1
  done
  wait "$VM_PID" 2>/dev/null || true
}

vm_poweroff() { vm_ssh systemctl poweroff >/dev/null 2>&1 || true; vm_wait_exit 120 || true; }

# vm_kill: stops a VM still running (the EXIT trap of the test scripts). Must
# return 0: under `set -e` a failing command here would turn the exit status
# of a passing run into 1.
vm_kill() {
  if [[ -n $VM_PID ]] && kill -0 "$VM_PID" 2>/dev/null; then
    kill "$VM_PID" 2>/dev/null || true
  fi
  return 0
}

# check NAME CMD...: runs CMD, counts and reports the result.
check() {
  local name=$1; shift
  local output
  if output=$("$@" 2>&1); then
    PASSED=$((PASSED + 1)); printf '  ok   %s\n' "$name"
  else
    FAILED=$((FAILED + 1)); printf '  FAIL %s\n%s\n' "$name" "$(sed 's/^/       /' <<<"$output" | tail -n 30)"
  fi
}
