# shellcheck shell=bash
# After the reboot the security agent unseals the vault by itself (same
# measured boot, same PCRs 4 and 12), and the secret stored on boot 1 reads
# back (compared by its SHA-256, which boot 1 kept in /var/lib/clawos-vm-test).
vault_unsealed_after_reboot() {
  for _ in $(seq 30); do
    clawctl vault status --json > /tmp/vault-status.json 2>/dev/null && break
    sleep 1
  done
  jq -e ".protection == \"tpm2\" and .state == \"unsealed\" and .degraded_reason == null" /tmp/vault-status.json
}
check "vault: unsealed by itself after the reboot" vault_unsealed_after_reboot
secret_reads_back() {
  test "$(clawctl secret get vm-test-canary | sha256sum)" = "$(cat /var/lib/clawos-vm-test/vault-canary.sha256)"
}
check "vault: the secret stored before the reboot reads back" secret_reads_back
security_agent_healthy() {
  clawctl ipc call security-agent health_check | jq -e ".status == \"ok\""
}
check "vault: the security agent reports healthy" security_agent_healthy
# The boot's first start of the agent has the TPM unseal the key; a later
# start in the same boot (the chaos checks kill it) takes the keyring's copy.
unseal_time_logged() {
  journalctl -b -u clawos-security-agent -o cat | grep -E "^vault open: " | head -n 1 | grep -E "^vault open: unsealed by the TPM in [0-9]+ ms$"
}
check "vault: the boot's first open was unsealed by the TPM, and the agent logs how long it took" unseal_time_logged
