# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# The secrets vault, hosted by security-agent: initialized with the VM's TPM
# through clawctl, a secret stored and read back, every secret command
# (versions, history, list, the terminal refusal, rotate, rm), and neither a
# value nor the recovery key in plaintext anywhere on the data partition or
# in the journal. The random test value is kept in /run (tmpfs, gone at reboot);
# only its SHA-256 is kept on disk (/var/lib/clawos-vm-test on the data
# partition), for tests/vm/after-reboot/65-vault.guest.sh.
check "vault: a fresh image has no vault yet and the security agent is healthy" vm_ssh '
  clawctl vault status --json | jq -e ".state == \"not-initialized\" and .degraded_reason == null" &&
    clawctl ipc call security-agent health_check | jq -e ".status == \"ok\""'
# The operator keeps the recovery key off the box: the changed-command-line
# boot (tests/vm/changed-cmdline/) needs it, as a real operator would.
vault_init() {
  vm_ssh 'install -d -m 0700 /run/vault-test
          clawctl vault init > /run/vault-test/recovery-key && cat /run/vault-test/recovery-key' \
    > "$VMS/recovery-key" || return 1
  chmod 0600 "$VMS/recovery-key"
  grep -qxE "([0-9a-f]{4}-){15}[0-9a-f]{4}" "$VMS/recovery-key"
}
check "vault: init seals the master key with the TPM and shows a recovery key once" vault_init
check "vault: status says sealed by the TPM to PCRs 4,12 and unsealed" vm_ssh '
  clawctl vault status --json | jq -e ".protection == \"tpm2\" and .pcrs == [4,12] and .state == \"unsealed\""'
# The one ACL entry lets fs-engine pass through to vault/identity-backups
# (its own 0700 subtree); it can neither list the vault nor read a secret.
check "vault: the vault directory is the security agent's, closed to others, fs-engine may only pass through" vm_ssh '
  test "$(stat -c "%U %G" /clawfs/vault)" = "clawos-security-agent clawos-security-agent" &&
  test "$(ls -ld /clawfs/vault | cut -c1-11)" = "drwx--x---+" &&
  ! setpriv --reuid=clawos-fs-engine --regid=clawos-fs-engine --clear-groups ls /clawfs/vault >/dev/null 2>&1 &&
  ! setpriv --reuid=nobody --regid=nogroup --clear-groups stat /clawfs/vault/identity-backups >/dev/null 2>&1 &&
  setpriv --reuid=clawos-fs-engine --regid=clawos-fs-engine --clear-groups stat /clawfs/vault/identity-backups >/dev/null'
check "vault: a secret set through clawctl reads back" vm_ssh '
  printf "clawos-vault-canary-%s" "$(od -An -N16 -tx1 /dev/urandom | tr -d " \n")" > /run/vault-test/canary
  clawctl secret set vm-test-canary < /run/vault-test/canary || exit 1
  clawctl secret get vm-test-canary | cmp - /run/vault-test/canary || exit 1
  install -d -m 0700 /var/lib/clawos-vm-test
  sha256sum < /run/vault-test/canary > /var/lib/clawos-vm-test/vault-canary.sha256'
check "vault: a second version is kept: history lists both, get --version reads either" vm_ssh '
  printf "clawos-vault-canary-v2-%s" "$(od -An -N16 -tx1 /dev/urandom | tr -d " \n")" > /run/vault-test/canary-v2
  clawctl secret set vm-test-versions < /run/vault-test/canary &&
    clawctl secret set vm-test-versions < /run/vault-test/canary-v2 || exit 1
  clawctl secret history vm-test-versions --json | jq -e "[.versions[].version] == [1,2]" || exit 1
  clawctl secret get vm-test-versions | cmp - /run/vault-test/canary-v2 &&
    clawctl secret get vm-test-versions --version 1 | cmp - /run/vault-test/canary'
check "vault: list shows secret IDs, never values" vm_ssh '
  clawctl secret list --json > /run/vault-test/list.json || exit 1
  jq -e "[.secrets[].secret_id] | contains([\"vm-test-canary\", \"vm-test-versions\"])" /run/vault-test/list.json &&
    ! grep -qF "$(cat /run/vault-test/canary-v2)" /run/vault-test/list.json'
check "vault: get refuses to print a secret to a terminal" vm_ssh '
  script -qec "clawctl secret get vm-test-canary" /dev/null > /run/vault-test/tty.out && exit 1
  grep -q "refusing to print a secret to a terminal" /run/vault-test/tty.out &&
    ! grep -qF "$(cat /run/vault-test/canary)" /run/vault-test/tty.out'
check "vault: rotate moves every secret to a new master key and all versions still read back" vm_ssh '
  clawctl vault rotate > /dev/null || exit 1
  clawctl vault status --json | jq -e ".generation == 2 and .state == \"unsealed\"" || exit 1
  clawctl secret get vm-test-canary | cmp - /run/vault-test/canary &&
    clawctl secret get vm-test-versions --version 1 | cmp - /run/vault-test/canary'
check "vault: rm deletes a secret with all its versions" vm_ssh '
  clawctl secret rm vm-test-versions && ! clawctl secret get vm-test-versions > /dev/null 2>&1 &&
    test ! -e /clawfs/vault/secrets/vm-test-versions.enc'
check "vault: the secret file is the spec format (AES-256-GCM JSON)" vm_ssh '
  jq -e ".secret_id == \"vm-test-canary\" and .algorithm == \"AES-256-GCM\" and .version == 1" \
    /clawfs/vault/secrets/vm-test-canary.enc'
check "vault: the audit log records the operator reading the secret" vm_ssh '
  jq -se "any(.[]; .caller == \"operator\" and .operation == \"get\" and .secret_id == \"vm-test-canary\" and .outcome == \"allowed\")" \
    /var/log/clawos/vault/audit.log'
check "vault: neither the value nor the recovery key is in plaintext on disk or in the journal" vm_ssh '
  sync
  rc=0
  for file in canary canary-v2 recovery-key; do
    needle=$(cat /run/vault-test/$file)
    for form in "$needle" "$(printf %s "$needle" | base64 -w0)" "$(printf %s "$needle" | tr -d -)"; do
      if grep -rlaF -e "$form" /clawfs; then echo "$file found on /clawfs"; rc=1; fi
      if journalctl -b -o export | grep -qaF -e "$form"; then echo "$file found in the journal"; rc=1; fi
    done
  done
  exit $rc'
