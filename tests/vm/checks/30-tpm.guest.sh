# shellcheck shell=bash
# A TPM 2.0 is present and the boot chain measured the UKI into it.

tpm_present() { test -c /dev/tpmrm0; }
check "tpm: /dev/tpmrm0 is present" tpm_present

uki_measured() {
  local pcrs
  pcrs=$(tpm2_pcrread sha256:4,11) || return 1
  echo "$pcrs"
  echo "$pcrs" | grep -qE "^ +4 *: 0x[0-9A-F]{64}$" && echo "$pcrs" | grep -qE "^ +11 *: 0x[0-9A-F]{64}$" &&
    ! echo "$pcrs" | grep -qE ": 0x0{64}$"
}
check "tpm: PCR 4 (firmware: the UKI) and PCR 11 (systemd-stub: its sections) are non-zero" uki_measured
