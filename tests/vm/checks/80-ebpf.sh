# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# eBPF monitor (issue 7): ebpf-agent loads every program, a monitored cgroup's
# actions reach `clawctl events`, and the per-cgroup policy blocks in enforce
# mode and only reports in audit mode. The check cgroups are no part of the
# image's policy: for these checks the shipped /etc/clawos/ebpf-policy.toml
# has a copy with them added bind-mounted over it (reload_policy reads the
# file again), and the last check puts the shipped one back. The agent
# picks new cgroups up within 1 s.

# The shipped policy plus the checks' two cgroups, one enforcing and one
# auditing, each allowed what a shell needs to start.
ebpf_check_policy() {
  vm_ssh 'set -e
    mkdir -p /run/clawos-test
    { cat /etc/clawos/ebpf-policy.toml
      for mode in enforce audit; do
        printf "[[cgroup]]\npath = \"clawos-ebpf-check/%s\"\nmode = \"%s\"\n" $mode $mode
        printf "open_grants = [\"/usr/\", \"/etc/ld.so.cache\", \"/dev/null\"]\n"
      done; } > /run/clawos-test/ebpf-policy.toml
    mount --bind /run/clawos-test/ebpf-policy.toml /etc/clawos/ebpf-policy.toml
    clawctl ipc call ebpf-agent reload_policy >/dev/null
    clawctl ipc call ebpf-agent get_policy |
      jq -e "[.cgroup[].path] | index(\"clawos-ebpf-check/enforce\") and index(\"clawos-ebpf-check/audit\")" >/dev/null'
}
check "ebpf: the checks' policy (the shipped one and two test cgroups, bind-mounted over it) is in force after reload_policy" ebpf_check_policy

# Run counts need kernel.bpf_stats_enabled, set at boot by sysctl.d because
# the agent lacks CAP_SYS_ADMIN. Each program's hook is made to run here
# (the hooks run for every process; the programs look at the cgroup
# inside): an exec and its exit, an open, a TCP connect and a bind, a
# mount, a read of another process's /proc/PID/exe (a ptrace access
# check), any system call; bpf() is the agent's own map reads. Then every
# one of the ten has run.
EBPF_PROGRAMS='["bpf_syscall","bprm_check_security","file_open","ptrace_access_check","sb_mount","sched_process_exec","sched_process_exit","socket_bind","socket_connect","sys_enter"]'
check "ebpf: ebpf-agent is active with all ten programs attached, each with a run count" \
  vm_ssh 'systemctl is-active --quiet clawos-ebpf-agent || exit 1
          /bin/true && cat /etc/hostname >/dev/null && (exec 3<>/dev/tcp/127.0.0.1/22) &&
          (timeout 1 socat -u TCP-LISTEN:18997,bind=127.0.0.1 - >/dev/null 2>&1; true) &&
          mkdir -p /run/clawos-test/ebpf-mount && mount -t tmpfs none /run/clawos-test/ebpf-mount && umount /run/clawos-test/ebpf-mount &&
          readlink /proc/1/exe >/dev/null || exit 1
          sleep 1
          clawctl ipc call ebpf-agent get_metrics > /run/clawos-test/ebpf-metrics.json &&
          jq -e --argjson want '"'$EBPF_PROGRAMS'"' "([.programs[].name] | sort) == \$want and all(.programs[]; .run_count > 0)" /run/clawos-test/ebpf-metrics.json >/dev/null ||
            { jq -c "[.programs[] | {name, run_count}]" /run/clawos-test/ebpf-metrics.json; exit 1; }'

# Runs $2 in a fresh cgroup clawos-ebpf-check/$1 once the agent has it in scope
# (it rescans every second; 3 s leave room for a slow emulated host).
ebpf_in_cgroup='in_cgroup() { d=/sys/fs/cgroup/clawos-ebpf-check/$1; mkdir -p "$d"; sleep 3;
  sh -c "echo \$\$ > $d/cgroup.procs; $2"; }'

check "ebpf: enforce mode denies an open outside the cgroup's grants with EPERM" \
  vm_ssh "$ebpf_in_cgroup"'; out=$(in_cgroup enforce ": < /etc/hostname" 2>&1); echo "$out";
          echo "$out" | grep -q "Operation not permitted" && in_cgroup enforce ": < /dev/null"'

check "ebpf: audit mode lets the same open through and reports it as audited" \
  vm_ssh "$ebpf_in_cgroup"'; (timeout 20 clawctl events --name ebpf_event > /tmp/ebpf-audited 2>/tmp/ebpf-audited.err &); sleep 1
          in_cgroup audit ": < /etc/hostname" || exit 1
          for _ in $(seq 10); do
            jq -e -s "any(.[]; .payload.event_data | .kind == \"file_open\" and .decision == \"audited\" and .path == \"/etc/hostname\")" /tmp/ebpf-audited >/dev/null 2>&1 && exit 0
            sleep 1
          done; tail -n 3 /tmp/ebpf-audited; exit 1'

check "ebpf: an open of /etc/shadow in a monitored cgroup shows up in clawctl events" \
  vm_ssh "$ebpf_in_cgroup"'; (timeout 15 clawctl events --name anomaly_detected --count 1 > /tmp/ebpf-events 2>/dev/null < /dev/null &);
          sleep 1; in_cgroup audit ": < /etc/shadow"; sleep 3; grep -q "/etc/shadow" /tmp/ebpf-events'

# The programs' own diagnostics (aya-log) reach the agent's journal: a path
# longer than the grant check's 248-byte buffer is logged by file_open.
check "ebpf: a program's aya-log diagnostic reaches the ebpf-agent journal" \
  vm_ssh "$ebpf_in_cgroup"'; long=/tmp/$(printf "d%.0s" $(seq 130))/$(printf "e%.0s" $(seq 130))/f;
          mkdir -p "${long%/f}" && : > "$long" && since=$(date +%s) && in_cgroup audit ": < $long" &&
          for _ in $(seq 10); do
            journalctl -u clawos-ebpf-agent --since @$since -o cat | grep -q "bpf_d_path failed with -36" && exit 0; sleep 1
          done; journalctl -u clawos-ebpf-agent -o cat | tail -n 5; exit 1'

# wasm-daemon's own policy (/etc/clawos/ebpf-policy.toml, enforce mode on
# daemon/ and the tool cgroups below it): what a flaw in the WASM host
# would do with the daemon's privileges is tried by a root shell placed in
# that cgroup. The tools checks before this one ran under the same policy,
# so its grants cover what the daemon does for its tools.
check "ebpf: a process in wasm-daemon's cgroup gets EPERM opening /etc/shadow and connecting to the box's own sshd, and both are denied events" \
  vm_ssh '(timeout 20 clawctl events --name ebpf_event > /tmp/ebpf-daemon 2>/tmp/ebpf-daemon.err &); sleep 1
          d=/sys/fs/cgroup/clawos.slice/clawos-wasm-daemon.service/daemon
          test -d $d || exit 1
          out=$(bash -c "echo \$\$ > $d/cgroup.procs; (: < /etc/shadow); (exec 3<>/dev/tcp/127.0.0.1/22)" 2>&1); echo "$out"
          echo "$out" | grep -q "/etc/shadow: Operation not permitted" &&
            echo "$out" | grep -q "/dev/tcp/127.0.0.1/22: Operation not permitted" || exit 1
          for _ in $(seq 10); do
            jq -e -s "any(.[]; .payload.event_data | .kind == \"file_open\" and .decision == \"denied\" and .path == \"/etc/shadow\")
                  and any(.[]; .payload.event_data | .kind == \"connect\" and .decision == \"denied\" and .address == \"127.0.0.1\" and .port == 22)" \
              /tmp/ebpf-daemon >/dev/null 2>&1 && exit 0
            sleep 1
          done; tail -n 3 /tmp/ebpf-daemon; exit 1'

# The shipped policy back in force: no test cgroup, the product's rules.
check "ebpf: the shipped policy is back in force after reload_policy, with no test cgroup" vm_ssh '
  umount /etc/clawos/ebpf-policy.toml && rm -f /run/clawos-test/ebpf-policy.toml || exit 1
  clawctl ipc call ebpf-agent reload_policy >/dev/null || exit 1
  clawctl ipc call ebpf-agent get_policy | jq -e "(.cgroup | length) > 0 and all(.cgroup[]; .path | startswith(\"clawos-ebpf-check\") | not)" >/dev/null'
