# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Boot 3: the same disk and TPM, but a UKI whose kernel command line says
# panic=31 instead of panic=30. The firmware measures a different UKI into
# PCR 4, so the TPM must refuse to unseal: the vault stays sealed and says
# why, a wrong recovery key is refused, the operator's recovery key opens it,
# and reseal binds it to this boot (boot 4 then unseals by itself).
vault_status_when_up() {
  for _ in $(seq 30); do
    clawctl vault status --json > /tmp/vault-status.json 2>/dev/null && break
    sleep 1
  done
}
check "changed cmdline: the boot runs with the changed kernel command line" vm_ssh '
  grep -qw panic=31 /proc/cmdline'
check "changed cmdline: the vault stays sealed and reports the PCR mismatch" vm_ssh "
  $(declare -f vault_status_when_up); vault_status_when_up"'
  jq -e ".protection == \"tpm2\" and .state == \"pcr-mismatch\" and (.degraded_reason | contains(\"PCR mismatch\"))" /tmp/vault-status.json'
check "changed cmdline: a secret cannot be read while the vault is sealed" vm_ssh '
  ! clawctl secret get vm-test-canary > /dev/null 2>&1'
check "changed cmdline: a wrong recovery key is refused" vm_ssh '
  od -An -N32 -tx1 /dev/urandom | tr -d " \n" | sed -E "s/(.{4})/\1-/g; s/-$//" | clawctl vault recover && exit 1
  clawctl vault status --json | jq -e ".state == \"pcr-mismatch\""'
recover_with_key() { vm_ssh 'clawctl vault recover >/dev/null' < "$VMS/recovery-key"; }
check "changed cmdline: the operator's recovery key opens the vault" recover_with_key
check "changed cmdline: the secret stored on boot 1 reads back after recovery" vm_ssh '
  test "$(clawctl secret get vm-test-canary | sha256sum)" = "$(cat /var/lib/clawos-vm-test/vault-canary.sha256)"'
check "changed cmdline: reseal binds the master key to this boot" vm_ssh '
  clawctl vault reseal > /dev/null && clawctl vault status --json | jq -e ".state == \"unsealed\""'
