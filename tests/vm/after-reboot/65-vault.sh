# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# After the reboot the security agent unseals the vault by itself (same
# measured boot, same PCRs 4 and 12), and the secret stored on boot 1 reads
# back (compared by its SHA-256, which boot 1 kept in /var/lib/clawos-vm-test).
check "vault: unsealed by itself after the reboot" vm_ssh '
  for _ in $(seq 30); do
    clawctl vault status --json > /tmp/vault-status.json 2>/dev/null && break
    sleep 1
  done
  jq -e ".protection == \"tpm2\" and .state == \"unsealed\" and .degraded_reason == null" /tmp/vault-status.json'
check "vault: the secret stored before the reboot reads back" vm_ssh '
  test "$(clawctl secret get vm-test-canary | sha256sum)" = "$(cat /var/lib/clawos-vm-test/vault-canary.sha256)"'
check "vault: the security agent reports healthy" vm_ssh '
  clawctl ipc call security-agent health_check | jq -e ".status == \"ok\""'
check "vault: the security agent logs how long the boot's unseal took" vm_ssh '
  journalctl -b -u clawos-security-agent -o cat | grep -E "vault open: unsealed in [0-9]+ ms"'
