# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Boot 4: the changed UKI again, after `clawctl vault reseal` on boot 3: the
# vault now unseals by itself, with no recovery key.
check "changed cmdline, resealed: the vault unseals by itself" vm_ssh "
  $(declare -f vault_status_when_up); vault_status_when_up"'
  jq -e ".state == \"unsealed\" and .degraded_reason == null" /tmp/vault-status.json'
check "changed cmdline, resealed: the secret reads back" vm_ssh '
  test "$(clawctl secret get vm-test-canary | sha256sum)" = "$(cat /var/lib/clawos-vm-test/vault-canary.sha256)"'
