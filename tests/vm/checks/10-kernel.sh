# shellcheck shell=bash
# The running kernel is the one this build made, with the ClawOS options.
check "kernel: running release is ours ($(cat "$OUT/kernel/release"))" \
  vm_ssh "test \"\$(uname -r)\" = '$(cat "$OUT/kernel/release")'"
# The running config is fetched here: `check` runs its command in this shell.
config_carries_fragment() {
  local running line missing=0
  running=$(vm_ssh "zcat /proc/config.gz") || return 1
  while IFS= read -r line; do
    [[ $line =~ ^CONFIG_ ]] || continue
    grep -qxF "$line" <<<"$running" || { echo "missing: $line"; missing=1; }
  done < "$REPO/kernel/clawos.config"
  return $missing
}
check "kernel: /proc/config.gz carries every option of kernel/clawos.config" config_carries_fragment
check "kernel: BTF is exposed at /sys/kernel/btf/vmlinux" vm_ssh 'test -s /sys/kernel/btf/vmlinux'
check "kernel: the BPF LSM is active" vm_ssh 'grep -qw bpf /sys/kernel/security/lsm'
check "kernel: the image records where its kernel source came from" \
  vm_ssh "grep -qF '$(cat "$OUT/kernel/source")' /usr/lib/clawos/kernel-source"
# clawos-ebpf-selftest is test code the image does not carry
# (tests/vm/ebpf-selftest, built by make userspace): copied into /run (tmpfs,
# gone at the next boot) and run there.
ebpf_selftest() {
  vm_push "${CARGO_TARGET_DIR:-$REPO/target}/release/clawos-ebpf-selftest" /run/clawos-test/clawos-ebpf-selftest || return 1
  vm_ssh '/run/clawos-test/clawos-ebpf-selftest | grep -q "\"attached\":true"'
}
check "ebpf: the aya exec monitor built by make ebpf loads, attaches and sees an exec" ebpf_selftest
