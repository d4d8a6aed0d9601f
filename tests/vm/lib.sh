# shellcheck shell=bash
# Helpers for the boot tests: start a VM headless, wait until it is ready,
# run commands in it over SSH, shut it down. Sourced by tests/vm/run.sh.
KEY="$OUT/ssh/id_ed25519"
VM_PID="" VM_PORT="" VM_SERIAL="" VM_STATE="" VM_LAST_SSH="" VM_SSH_SOCKET=""
# The shared connections' sockets (vm_ssh_share): short paths, as a
# socket's path is limited to 107 bytes.
VM_SSH_DIR=$(mktemp -d /tmp/clawos-vm-ssh.XXXXXX)
PASSED=0 FAILED=0

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# vm_start IMAGE STATE_DIR [--fresh]: boots in the background. VM_STATE is
# STATE_DIR, where qemu/run.sh keeps the VM's copy-on-write disk (disk.qcow2).
vm_start() {
  local image=$1 state=$2; shift 2
  vm_ssh_unshare
  VM_PORT=$(free_port); VM_SERIAL="$state/serial.log"
  # shellcheck disable=SC2034  # read by the checks, not here
  VM_STATE=$state
  mkdir -p "$state"; : > "$VM_SERIAL"
  VM_T0=$(date +%s.%N) VM_CPU0=$(head -n 1 /proc/stat)
  bash "$REPO/qemu/run.sh" --image "$image" --state "$state" --headless --ssh-port "$VM_PORT" --serial "$VM_SERIAL" \
    --disk-cache unsafe "$@" \
    > "$state/qemu.log" 2>&1 &
  VM_PID=$!
}

# VM_SSH_TIMEOUT=S vm_ssh ...: bounds the whole session, not just the connect.
# Through the VM's shared connection while it is up (vm_ssh_share), else a
# connection of its own.
vm_ssh() {
  local shared=()
  vm_ssh_shared && shared=(-o ControlMaster=no -o "ControlPath=$VM_SSH_SOCKET")
  ${VM_SSH_TIMEOUT:+timeout "$VM_SSH_TIMEOUT"} ssh -i "$KEY" -p "$VM_PORT" -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5 -o BatchMode=yes "${shared[@]}" root@127.0.0.1 "$@"
}

# vm_ssh_share: one SSH connection to the VM that the later vm_ssh calls
# share as sessions (OpenSSH's ControlMaster). A new connection costs the
# emulated guest its key exchange: `ssh ... true` took 1.3-1.5 s against
# 0.15 s through a shared one, measured on a VM busy with the boot checks,
# and the suite makes hundreds of calls. The connection ends with the VM
# (a reboot closes it; a guest that stops answering is given up after
# 60 s of unanswered keepalives), and vm_ssh then connects on its own.
vm_ssh_share() {
  VM_SSH_SOCKET="$VM_SSH_DIR/$VM_PORT"
  mkdir -p "$VM_SSH_DIR"
  ssh -i "$KEY" -p "$VM_PORT" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
    -o ConnectTimeout=5 -o BatchMode=yes -o ServerAliveInterval=10 -o ServerAliveCountMax=6 \
    -o ControlMaster=yes -o "ControlPath=$VM_SSH_SOCKET" -N -f root@127.0.0.1 </dev/null >/dev/null 2>&1 || true
}

# vm_ssh_shared: whether the shared connection is up (a master killed
# without closing leaves its socket behind; that one is not used).
vm_ssh_shared() {
  [[ -S $VM_SSH_SOCKET ]] && ssh -o "ControlPath=$VM_SSH_SOCKET" -O check root@127.0.0.1 >/dev/null 2>&1
}

# vm_ssh_unshare: ends the shared connection, if any.
vm_ssh_unshare() {
  [[ -S $VM_SSH_SOCKET ]] && ssh -o "ControlPath=$VM_SSH_SOCKET" -O exit root@127.0.0.1 >/dev/null 2>&1
  rm -f "$VM_SSH_SOCKET"; rmdir "$VM_SSH_DIR" 2>/dev/null || true
  return 0
}

# vm_push FILE DEST: copies a host file into the guest as DEST (mode 0755,
# parents made), for test code the image does not carry. Through ssh's
# stdin, not scp: that needs nothing in the guest but a shell and cat (scp
# speaks SFTP and would need the image to ship an sftp-server).
vm_push() {
  vm_ssh "mkdir -p '$(dirname "$2")' && cat > '$2' && chmod 0755 '$2'" < "$1"
}

# vm_copy_agent_db AGENT DIR: a copy of AGENT's database (workspace.db and
# its -wal) in DIR, to read with the host's sqlite3. SQLite deletes the -wal
# and -shm when its last connection closes, so a file the glob named can be
# gone when tar reaches it (exit 2, CI 2026-11-28), and a checkpoint can
# change the database while tar reads it (exit 1): either way the archive is
# not one state, so it is taken again (kept in the guest until it is whole).
vm_copy_agent_db() {
  vm_ssh "cd /clawfs/agents/$1 && for _ in \$(seq 10); do
      tar -cf /run/clawos-test/db-$1.tar workspace.db* 2>/dev/null && cat /run/clawos-test/db-$1.tar && rm /run/clawos-test/db-$1.tar && exit 0
      sleep 0.3
    done; echo 'no whole copy of $1/workspace.db in 10 tries' >&2; exit 1" | tar -xf - -C "$2"
}

# install_test_tool TOOL: installs a test tool (tests/tools, built by make
# tools into out/test-tools, never in the image) the way an operator
# installs any tool: its component and the definition tools.sh wrote for it
# (capabilities, limits, the pinned hash clawctl checks the file against)
# copied into the guest, then `clawctl tool install`.
install_test_tool() {
  local definition wasm
  definition=$(jq -e --arg t "$1" '.tools[] | select(.tool_id == $t)' "$OUT/test-tools/registry.json") \
    || { echo "$1 is not in $OUT/test-tools/registry.json (make tools)"; return 1; }
  wasm=$(jq -r .wasm_path <<<"$definition")
  if ! { vm_push "$OUT/test-tools/$wasm" "/run/clawos-test/tools/$wasm" &&
    vm_push <(echo "$definition") "/run/clawos-test/tools/$1.json" &&
    vm_ssh "clawctl tool install /run/clawos-test/tools/$wasm --definition /run/clawos-test/tools/$1.json --yes" >/dev/null; }; then
    echo "installing $1 failed"; return 1
  fi
}

# A guest whose kernel has started no unit of systemd's after this many
# seconds never will: under TCG the kernel reaches systemd 20-40 s after
# QEMU starts, and the slowest CI host took about four times that. What
# that looks like (CI, 2026-11-27, boot 1): RCU stall reports from 190 s on
# ("timer wakeup didn't happen ... Possible timer handling issue on cpu=1")
# while the host sat 89% idle: a vCPU's timer interrupt lost under
# emulation, which the guest never recovers from.
VM_KERNEL_TIMEOUT=${CLAWOS_KERNEL_TIMEOUT:-300}
# Until a boot is given up (vm_boot): the first boot is ready in 90-180 s
# under TCG here, and CI hosts have run VMs four times slower.
BOOT_TIMEOUT=${CLAWOS_BOOT_TIMEOUT:-900}

# vm_wait_ready TIMEOUT: until systemd finished booting (running or degraded)
# and sshd answers. Sets VM_READY_S (seconds since QEMU start). Returns 2,
# with the VM stopped, when the kernel never reached systemd (see
# VM_KERNEL_TIMEOUT), 1 on any other failure.
vm_wait_ready() {
  local deadline=$(( $(date +%s) + $1 )) kernel_deadline=$(( $(date +%s) + VM_KERNEL_TIMEOUT )) state
  while (( $(date +%s) < deadline )); do
    kill -0 "$VM_PID" 2>/dev/null || { warn "QEMU exited before the VM was ready"; vm_boot_report; return 1; }
    if (( $(date +%s) >= kernel_deadline )) && (( $(vm_console_count 'Started ') == 0 )); then
      warn "the guest's kernel started no unit within $VM_KERNEL_TIMEOUT s"
      vm_boot_report; vm_kill; wait "$VM_PID" 2>/dev/null || true; return 2
    fi
    # Bounded: a guest that stalls mid-answer must not outlast the deadline.
    state=$(VM_SSH_TIMEOUT=120 vm_ssh systemctl is-system-running --wait 2>&1) || true
    VM_LAST_SSH=$state
    if [[ $state == running || $state == degraded ]]; then
      VM_READY_S=$(echo "$(date +%s.%N) - $VM_T0" | bc); VM_READY_S=$(printf '%.1f' "$VM_READY_S")
      log "VM ready ($state) after ${VM_READY_S}s"; vm_ssh_share; return 0
    fi
    sleep 2
  done
  # A VM that never got ready is stopped: left running, it would take the
  # CPU from every boot after it.
  warn "VM not ready within $1 s"; vm_boot_report; vm_kill; wait "$VM_PID" 2>/dev/null || true; return 1
}

# vm_boot IMAGE STATE_DIR [ARGS...]: vm_start and vm_wait_ready
# $BOOT_TIMEOUT, starting the VM once more if its kernel never reached
# systemd. Only for boots that such a start leaves as they were: no unit
# ran, so neither the disk nor the TPM's stored state changed. (The update
# boots do not use it: their boot loader counts each try.) A boot that
# stalls twice fails.
vm_boot() {
  local rc=0
  vm_start "$@"
  vm_wait_ready "$BOOT_TIMEOUT" || rc=$?
  if (( rc == 2 )); then
    log "starting the VM once more: its kernel stalled before systemd"
    STALLED_BOOTS=$((STALLED_BOOTS + 1))
    vm_start "$@"; rc=0
    vm_wait_ready "$BOOT_TIMEOUT" || rc=$?
  fi
  return "$rc"
}
STALLED_BOOTS=0

# vm_boot_report: what a failed boot leaves to go on. CI shows only the end
# of the output, so the summary comes last: the host's state, how far the
# guest got, and whether its kernel reported stalls.
vm_boot_report() {
  warn "last lines of the serial console ($VM_SERIAL):"
  tail -n 60 "$VM_SERIAL" >&2 || true
  local plain; plain=$(sed 's/\x1b\[[0-9;]*[a-zA-Z]//g; s/\x1bM//g; s/\r//g' "$VM_SERIAL" 2>/dev/null) || true
  {
    echo "--- boot summary"
    echo "host: $(grep -h 'accel' "${VM_SERIAL%/*}/qemu.log" 2>/dev/null); $(uptime | sed 's/.*load/load/'); $(df -h --output=avail "$OUT" | tail -n 1 | tr -d ' ') disk and $(free -m | awk '/^Mem/ {print $7}') MiB memory available"
    # /proc/stat's first line: user nice system idle iowait irq softirq steal.
    echo "host CPU since QEMU started: $(awk '{ for (i = 2; i <= 9; i++) d[i] = $i - p[i] } NR == 1 { for (i = 2; i <= 9; i++) p[i] = $i; next }
      { t = 0; for (i = 2; i <= 9; i++) t += d[i]; if (t == 0) t = 1
        printf "busy %d%%, idle %d%%, iowait %d%%, steal %d%%", 100 * (d[2] + d[3] + d[4] + d[7] + d[8]) / t, 100 * d[5] / t, 100 * d[6] / t, 100 * d[9] / t }' \
      <(echo "$VM_CPU0") <(head -n 1 /proc/stat))"
    echo "guest: kernel at $(grep -o '^\[ *[0-9.]*\]' <<<"$plain" | tail -n 1 | tr -d '[] ') s; $(grep -c 'rcu: INFO' <<<"$plain") RCU stall reports; $(grep -c 'Started ' <<<"$plain") units started; $(grep -c 'FAILED' <<<"$plain") failed"
    echo "last unit lines:"; grep -E '(Started|Finished|FAILED|Starting) ' <<<"$plain" | tail -n 6 | cut -c1-110
    echo "last SSH answer: $(tail -n 2 <<<"${VM_LAST_SSH:-none}" | cut -c1-150)"
    echo "QEMU: $(grep -v 'accel' "${VM_SERIAL%/*}/qemu.log" 2>/dev/null | tail -n 3)"
  } >&2
}

# vm_console_count REGEX: how many lines of the serial console (ANSI escapes
# removed) match REGEX.
vm_console_count() {
  sed 's/\x1b\[[0-9;]*[a-zA-Z]//g; s/\r/\n/g' "$VM_SERIAL" 2>/dev/null | grep -cE "$1" || true
}

# vm_wait_console REGEX COUNT TIMEOUT: until the serial console has shown
# COUNT lines matching REGEX. Fails when the time runs out, QEMU exits, or
# SSH answers (the guest got past whatever should have stopped it), and says
# which.
vm_wait_console() {
  local regex=$1 count=$2 deadline=$(( $(date +%s) + $3 )) polls=0
  while (( $(date +%s) < deadline )); do
    (( $(vm_console_count "$regex") >= count )) && return 0
    kill -0 "$VM_PID" 2>/dev/null || { echo "QEMU exited before the console showed '$regex'"; return 1; }
    # Every 10 s: a guest that booted on without asking is a failure now,
    # not at the deadline.
    if (( ++polls % 5 == 0 )) && VM_SSH_TIMEOUT=10 vm_ssh true 2>/dev/null; then
      echo "SSH answers: the guest booted without the console showing '$regex'"; return 1
    fi
    sleep 2
  done
  echo "the console did not show '$regex' $count time(s) within $3 s; its last lines:"
  sed 's/\x1b\[[0-9;]*[a-zA-Z]//g; s/\r/\n/g' "$VM_SERIAL" | grep -av '^[[:space:]]*$' | tail -n 4 | cut -c1-200 |
    sed 's/[[:cntrl:]]/?/g; s/^/    /'
  return 1
}

# vm_console_type FILE: types FILE's first line and Enter on the serial
# console of a VM started with --console-socket "$VM_STATE/console.sock"
# (read by the host, never on a command line). One byte at a time, and the
# connection held open a moment after: QEMU takes from the socket only what
# the UART's FIFO has room for, and drops the rest when the client hangs up.
# What QEMU sends back is read and thrown away (the --serial file has it): a
# client that never reads fills the socket, and QEMU (7.2) then writes a
# byte whose send would block to the --serial file once when it fails and
# again when the UART retries it. The file then read "Pleaase enter" and no
# prompt matched (a make test-vm run, 2026-11-28, and by hand at the third
# of a row of wrong keys; with the client reading, eleven in a row matched).
vm_console_type() {
  python3 - "$VM_STATE/console.sock" "$1" <<'PY'
import socket, sys, time
with open(sys.argv[2], "rb") as f:
    line = f.readline().rstrip(b"\r\n")
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.setblocking(False)
def drain(seconds):
    end = time.monotonic() + seconds
    while True:
        try:
            while s.recv(65536):
                pass
        except BlockingIOError:
            pass
        if time.monotonic() >= end:
            return
        time.sleep(0.01)
for byte in line + b"\r":
    while True:
        try:
            s.send(bytes([byte]))
            break
        except BlockingIOError:
            drain(0.05)
    drain(0.05)
drain(2)
s.close()
PY
}

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
  vm_ssh_unshare
  return 0
}

# check NAME CMD...: runs CMD on the host (most checks run vm_ssh), and
# reports it (check_report).
check() {
  local name=$1; shift
  local output status=0 t0=$SECONDS
  output=$("$@" 2>&1) || status=$?
  check_report "$name" "$status" "$((SECONDS - t0))" "$output"
  ((status == 0)) || failure_journal "$((SECONDS - t0))"
}

# failure_journal SECONDS: what the box's components logged during a
# failed check that took SECONDS, after its output. CI keeps only the
# suite's output, so a failure carries its own evidence (a timeout says
# nothing of what the component was busy with); each line cut at 300
# characters (journalctl shows control characters as a blob's size).
# Nothing when the VM does not answer.
failure_journal() {
  # Never fails: under the suite's errexit and pipefail, ssh's 255 from a
  # VM that is down (a check after a power cut) ended the whole suite.
  VM_SSH_TIMEOUT=20 vm_ssh "journalctl -b --since=-$(($1 + 5))s -u 'clawos-*' -p info -o short-monotonic -q --no-pager |
    tail -n 20" 2>/dev/null | cut -c1-300 | sed 's/^/       journal: /' || true
}

# check_report NAME STATUS SECONDS OUTPUT: counts and prints a check's
# result, with its time when it took 10 s or more (the suite's time is
# spent in few checks) and the end of its output when it failed, and
# records the time in VM_TIMES (scripts/times-report.sh).
check_report() {
  local name=$1 status=$2 took="" output=$4
  (( $3 < 10 )) || took=" [$3 s]"
  [[ -z ${VM_TIMES:-} ]] || printf 'check\t%s\t%s\n' "$3" "$name" >> "$VM_TIMES"
  if ((status == 0)); then
    PASSED=$((PASSED + 1)); printf '  ok   %s%s\n' "$name" "$took"
  else
    FAILED=$((FAILED + 1)); printf '  FAIL %s%s\n%s\n' "$name" "$took" "$(tail -n 30 <<<"$output" | sed 's/^/       /')"
  fi
}

# Checks that need nothing of the host run in the guest, from files of
# their own (NN-name.guest.sh beside the host's NN-name.sh, with
# tests/vm/guest/lib.sh's check): pushed once per boot, and run a group of
# files to one SSH session, not a session per check.

# vm_push_checks: tests/vm into the booted guest (/run/clawos-test/vm, a
# tmpfs gone at the next boot), with env.sh holding the host's values the
# guest files read: this build's version, root hash and kernel release.
vm_push_checks() {
  local env
  env=$(printf 'version=%q\nroothash=%q\nkernel_release=%q\n' "${version:-}" "${roothash:-}" "$(cat "$OUT/kernel/release" 2>/dev/null)")
  tar -C "$REPO/tests/vm" --exclude=target -cf - . |
    vm_ssh 'rm -rf /run/clawos-test/vm && mkdir -p /run/clawos-test/vm && tar -xf - -C /run/clawos-test/vm' &&
    vm_ssh 'cat > /run/clawos-test/vm/guest/env.sh' <<<"$env"
}

# guest_checks FILE...: runs guest check files (paths relative to
# tests/vm) in one SSH session and reports each check as check does. A
# session that ends before the files did (SSH, or the guest, went away) is
# a failure of its own.
guest_checks() {
  local line status secs name output="" done=0 pending=""
  flush_pending() {
    [[ -n $pending ]] || return 0
    IFS=$'\t' read -r status secs name <<<"$pending"
    check_report "$name" "$([[ $status == ok ]] && echo 0 || echo 1)" "$secs" "${output%$'\n'}"
    pending="" output=""
  }
  while IFS= read -r line; do
    case $line in
      @@check$'\t'*) flush_pending; pending=${line#@@check$'\t'} ;;
      @@out$'\t'*) output+="${line#@@out$'\t'}"$'\n' ;;
      @@log$'\t'*) flush_pending; log "${line#@@log$'\t'}" ;;
      @@done) flush_pending; done=1 ;;
      *) flush_pending; printf '%s\n' "$line" ;;
    esac
  done < <(vm_ssh "bash /run/clawos-test/vm/guest/run.sh $*" 2>&1)
  flush_pending
  ((done)) || check_report "the guest's checks in $* ran to their end" 1 0 "the SSH session ended before the guest's run did"
}

# run_checks DIR: DIR's check files in order: a host file (NN-name.sh) is
# sourced here; guest files (NN-name.guest.sh) next to each other run in
# the guest together (guest_checks). Pushes the files first (once a boot).
run_checks() {
  local file group=()
  vm_push_checks || { check_report "the check files are pushed into the guest" 1 0 "vm_push_checks failed"; return; }
  for file in "$REPO/tests/vm/$1"/*.sh; do
    if [[ $file == *.guest.sh ]]; then group+=("${file#"$REPO/tests/vm/"}"); continue; fi
    (( ${#group[@]} == 0 )) || { guest_checks "${group[@]}"; group=(); }
    # shellcheck source=/dev/null  # each check file is checked on its own
    source "$file"
  done
  (( ${#group[@]} == 0 )) || guest_checks "${group[@]}"
}

# lane NAME CMD...: runs CMD (boots and their checks, on VMs of its own)
# in the background, beside the suite's main line, for the parts of the
# suite that share no VM or file with what runs meanwhile. Its output goes
# to $VMS/lane-NAME.log and its counts to $VMS/lane-NAME.counts; lane_join
# NAME waits for it, then prints its output and adds its counts. Each lane
# has its own VM_* variables (a subshell), so its VMs and SSH connections
# are its own. A lane costs little where the main line waits (console
# prompts, gate timeouts, a guest idle between SSH calls) and the host's
# cores are not both busy; timing-bound checks stay on the main line.
declare -A LANE_PIDS=()
lane() {
  local name=$1; shift
  (
    # shellcheck disable=SC2030  # the lane's own counts, handed on through its counts file
    PASSED=0 FAILED=0 t0=$SECONDS
    # The main line's VM and shared connection are not the lane's to end;
    # its own connections' sockets go in a directory of its own.
    VM_PID="" VM_SSH_SOCKET="" VM_SSH_DIR=$(mktemp -d /tmp/clawos-vm-ssh.XXXXXX)
    trap vm_kill EXIT
    "$@"
    [[ -z ${VM_TIMES:-} ]] || printf 'phase\t%s\t%s\n' "$((SECONDS - t0))" "$name (a lane)" >> "$VM_TIMES"
    echo "$PASSED $FAILED" > "$VMS/lane-$name.counts"
  ) > "$VMS/lane-$name.log" 2>&1 &
  LANE_PIDS[$name]=$!
}
lane_join() {
  local name=$1 passed failed
  wait "${LANE_PIDS[$name]}" || true
  unset "LANE_PIDS[$name]"
  echo "--- lane $name:"
  cat "$VMS/lane-$name.log"
  if read -r passed failed 2>/dev/null < "$VMS/lane-$name.counts"; then
    # shellcheck disable=SC2031  # the main line's counts; the lane's came through its file
    PASSED=$((PASSED + passed)) FAILED=$((FAILED + failed))
  else
    FAILED=$((FAILED + 1)); echo "  FAIL lane $name ended before it counted its checks"
  fi
}
# lanes_kill: stops the lanes still running (the EXIT trap), VMs included.
lanes_kill() {
  local pid
  for pid in "${LANE_PIDS[@]}"; do pkill -P "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; done
  return 0
}

# phase NAME: starts timing the suite's part NAME, ending the one before;
# phase_times prints them all ("usb 31 s, boot 1 1460 s, ...").
PHASE_NAME="" PHASE_T0=0 PHASE_TIMES=()
phase() {
  if [[ -n $PHASE_NAME ]]; then
    PHASE_TIMES+=("$PHASE_NAME $((SECONDS - PHASE_T0)) s")
    [[ -z ${VM_TIMES:-} ]] || printf 'phase\t%s\t%s\n' "$((SECONDS - PHASE_T0))" "$PHASE_NAME" >> "$VM_TIMES"
  fi
  PHASE_NAME=$1 PHASE_T0=$SECONDS
}
phase_times() {
  phase ""
  local joined
  joined=$(printf '%s, ' "${PHASE_TIMES[@]}")
  echo "${joined%, }"
}

