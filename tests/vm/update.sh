# shellcheck shell=bash disable=SC2016,SC2154  # the guest's commands are single-quoted: their $ expands in the guest; version is sealed.env's, sourced by run.sh
# The update boots of tests/vm/run.sh (specs/update/README.md), on the main
# VM's disk and TPM after boot 2 (update_boots), with the updates built
# beside boot 1 (update_build). The updates are served over HTTP from the
# host (the guest reaches the host's loopback as 10.0.2.2), made by
# scripts/update-artifacts.sh and signed with the release key the image
# trusts: $version.2, and $version.3 whose router cannot start.
#   boot U1: the power is cut while $version.2 is being written and
#            files, notes and bulk data are being written to /clawfs;
#   boot U2: still $version, /clawfs clean and its acknowledged writes
#            there; a bad signature and a tampered root are refused and
#            change nothing; $version.2 applies;
#   boot U3: $version.2 runs, blessed, the vault and /clawfs opened by the
#            TPM, data of $version there; a source going back from
#            $version.3 to $version.2 is refused; $version.3 applies;
#   boots U4-U6: $version.3 fails its health gate three times;
#   boot U7: systemd-boot went back to $version.2, which says why, and
#            drops $version.3's TPM branch; $version.3 is picked by hand;
#   boot U8: $version.3 asks for the recovery key (VM stopped there).

UPDATE_V2="$version.2" UPDATE_V3="$version.3"
# The disk the box booted from, whichever bus it is on (a guest-side expression).
BOOT_DISK='/dev/$(lsblk -ndo PKNAME /dev/disk/by-partlabel/esp)'
UPDATES_SERVED="$VMS/updates"

# update_serve: the updates and two tampered copies of $UPDATE_V2, over
# HTTP on the host's loopback. Sets UPDATE_URL (as the guest sees it).
update_serve() {
  local good="$OUT/update/$UPDATE_V2" root port
  rm -rf "$UPDATES_SERVED"; mkdir -p "$UPDATES_SERVED"
  ln -s "$good" "$UPDATES_SERVED/v2"
  ln -s "$OUT/update/$UPDATE_V3" "$UPDATES_SERVED/v3"
  # A list that no longer matches its signature: one hash changed.
  mkdir "$UPDATES_SERVED/bad-signature"
  ln -s "$good"/clawos_* "$good/SHA256SUMS.gpg" "$UPDATES_SERVED/bad-signature/"
  awk 'NR == 1 { c = substr($0, 1, 1); $0 = (c == "0" ? "1" : "0") substr($0, 2) } { print }' \
    "$good/SHA256SUMS" > "$UPDATES_SERVED/bad-signature/SHA256SUMS"
  # One byte of the root changed, the signed list untouched.
  mkdir "$UPDATES_SERVED/bad-root"
  ln -s "$good"/clawos_*.efi "$good"/clawos_*.root-verity.raw.gz "$good"/SHA256SUMS* "$UPDATES_SERVED/bad-root/"
  root=$(basename "$good"/clawos_*.root.raw.gz)
  cp "$good/$root" "$UPDATES_SERVED/bad-root/$root"
  python3 - "$UPDATES_SERVED/bad-root/$root" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as f:
    size = os.fstat(f.fileno()).st_size
    f.seek(size // 2); b = f.read(1); f.seek(size // 2); f.write(bytes([b[0] ^ 0x01]))
PY
  port=$(free_port)
  python3 -m http.server --bind 127.0.0.1 --directory "$UPDATES_SERVED" "$port" >"$VMS/http.log" 2>&1 &
  HTTP_PID=$!
  UPDATE_URL="http://10.0.2.2:$port"
}

# What an update may change, as the guest shows it: partition labels, the
# UKIs on the ESP, /clawfs's keyslots.
update_layout() {
  vm_ssh "lsblk -nro PARTN,PARTLABEL $BOOT_DISK | sort -n; ls /efi/EFI/Linux
    cryptsetup luksDump --dump-json-metadata /dev/disk/by-partlabel/clawos-data | jq -c '[.keyslots | keys[]]'"
}

update_refused_and_nothing_changed() { # NAME
  local before after out
  before=$(update_layout) || return 1
  if out=$(vm_ssh "clawctl update apply $UPDATE_URL/$1" 2>&1); then echo "applied: $out"; return 1; fi
  echo "refused: $(tail -n 3 <<<"$out")"
  after=$(update_layout) || return 1
  [[ $before == "$after" ]] || { echo "the layout changed:"; diff <(echo "$before") <(echo "$after"); return 1; }
}

# update_source_went_backwards: one source (a URL) lists $UPDATE_V3, then
# replays the older signed listing of $UPDATE_V2, as a mirror holding the
# box back would (specs/update/README.md, "A source that goes backwards").
update_source_went_backwards() {
  local out
  ln -sfn "$OUT/update/$UPDATE_V3" "$UPDATES_SERVED/moving"
  out=$(vm_ssh "clawctl update check $UPDATE_URL/moving" 2>&1) || { echo "$out"; return 1; }
  echo "$out"; grep -q "$UPDATE_V3 .*offered, newer" <<<"$out" || return 1
  ln -sfn "$OUT/update/$UPDATE_V2" "$UPDATES_SERVED/moving"
  if out=$(vm_ssh "clawctl update check $UPDATE_URL/moving" 2>&1); then echo "check passed: $out"; return 1; fi
  echo "$out"; grep -q "went backwards: its signed listing now ends at $UPDATE_V2, but on .* it listed $UPDATE_V3" <<<"$out" || return 1
  out=$(update_refused_and_nothing_changed moving) || { echo "$out"; return 1; }
  echo "$out"; grep -q "went backwards" <<<"$out"
}

# update_dropped_version_asks VERSION: the booted kernel is VERSION's, and
# /clawfs's volume asks for the recovery key on the console instead of
# opening (vm_wait_console fails if SSH answers first).
update_dropped_version_asks() {
  vm_wait_console 'Please enter .* for disk' 1 "$BOOT_TIMEOUT" || return 1
  grep -q "ClawOS $1 (" "$VM_SERIAL" || { echo "the console shows no boot of $1"; return 1; }
  sed 's/\x1b\[[0-9;]*[a-zA-Z]//g; s/\r/\n/g' "$VM_SERIAL" | grep -aE 'Please enter .* for disk' | tail -n 1
}

# update_applied NAME VERSION: applies and checks the new slot (labelled,
# with the partition UUID the UKI names) and the UKI with its three tries.
update_applied() {
  local name=$1 v=$2 out t0 uuid
  t0=$(date +%s.%N)
  out=$(vm_ssh "clawctl update apply $UPDATE_URL/$name" 2>&1) || { echo "$out"; return 1; }
  # check runs this in a subshell: the figure goes through a file.
  printf '%.0f' "$(echo "$(date +%s.%N) - $t0" | bc)" > "$VMS/update-apply-$v.s"
  echo "$out" | tail -n 3
  # The partition UUID is in the root's file name (clawos_<v>_<uuid>.root.raw.gz).
  uuid=$(basename "$OUT/update/$v"/clawos_*.root.raw.gz | sed "s/^clawos_${v}_//; s/\\.root\\.raw\\.gz\$//")
  vm_ssh "
    lsblk -nro PARTN,PARTLABEL,PARTUUID $BOOT_DISK | sort -n; ls /efi/EFI/Linux
    lsblk -nro PARTLABEL,PARTUUID $BOOT_DISK | grep -qx 'clawos_$v $uuid' &&
    lsblk -nro PARTLABEL $BOOT_DISK | grep -qx 'clawos_${v}_verity' &&
    test -f '/efi/EFI/Linux/clawos_$v+3-0.efi'"
}

# The policy hash systemd-cryptenroll recorded for /clawfs's first-boot
# keyslot (PCRs 4+12) equals TPM2_PolicyPCR's digest of this boot's PCR
# values, computed here independently of clawctl's: the hash clawctl keeps
# keyslots by when it prepares an update. With `alone`: it is the only
# TPM2 keyslot.
keyslot_policy_is_this_boots() {
  local alone=${1:-}
  vm_ssh 'cat /sys/class/tpm/tpm0/pcr-sha256/4 /sys/class/tpm/tpm0/pcr-sha256/12
    cryptsetup luksDump --dump-json-metadata /dev/disk/by-partlabel/clawos-data |
      jq -r ".tokens[] | select(.type == \"systemd-tpm2\") | .\"tpm2-policy-hash\""' | python3 -c '
import hashlib, sys
pcr4, pcr12, *hashes = sys.stdin.read().split()
values = hashlib.sha256(bytes.fromhex(pcr4) + bytes.fromhex(pcr12)).digest()
selection = (1).to_bytes(4, "big") + (0x000B).to_bytes(2, "big") + bytes([3, 0x10, 0x10, 0x00])
digest = hashlib.sha256(bytes(32) + (0x17F).to_bytes(4, "big") + selection + values).hexdigest()
print("this boot:", digest, "keyslots:", hashes)
sys.exit(0 if (hashes == [digest] if sys.argv[1:] == ["alone"] else digest in hashes) else 1)' ${alone:+"$alone"}
}

# settled_to_this_boot: once the booted version is blessed and nothing newer
# waits for its first boot (clawos-update-settle.service), the vault's seal
# accepts one set of PCR values and /clawfs has one TPM2 keyslot, this
# boot's: the version before it asks for the recovery keys.
settled_to_this_boot() {
  VM_SSH_TIMEOUT=120 vm_ssh '
    until systemctl is-active -q clawos-update-settle.service; do
      systemctl is-failed -q clawos-update-settle.service && { journalctl -b -u clawos-update-settle -o cat; exit 1; }
      sleep 2
    done
    journalctl -b -u clawos-update-settle -o cat
    clawctl vault status --json | jq -e ".tpm_branches == 1" >/dev/null || { clawctl vault status; exit 1; }' &&
    keyslot_policy_is_this_boots alone
}

# update_runs VERSION: the box runs VERSION, blessed, with the vault and
# /clawfs opened by the TPM and what $version wrote still there.
update_runs() {
  vm_ssh "
    . /usr/lib/os-release; echo \"running \$IMAGE_VERSION\"; [ \"\$IMAGE_VERSION\" = '$1' ] || exit 1
    # Good (blessed, no try counter) and passed the gate this boot.
    test -f '/efi/EFI/Linux/clawos_$1.efi' || { ls /efi/EFI/Linux; exit 1; }
    clawctl update status --json | jq -e --arg v '$1' '.recent_gates[0].version == \$v and .recent_gates[0].healthy' >/dev/null || exit 1
    clawctl vault status --json | jq -e '.state == \"unsealed\"' >/dev/null || { clawctl vault status; exit 1; }
    journalctl -b -u systemd-cryptsetup@clawfs -o cat | grep -qi 'recovery' && { echo 'asked for the recovery key'; exit 1; }
    clawctl secret get update-canary | grep -qx 'written under $version' || exit 1
    clawctl memory get --agent vm-update --json \$(cat /clawfs/update-test-memory-id) | jq -e '.content | startswith(\"Written under\")' >/dev/null"
}

# The power cut of boot U1 also lands on /clawfs under heavy writes: files
# written through fs-engine (each one synced before it is acknowledged) and
# scratchpad notes into an AgentFS database, each acknowledged one recorded
# here on the host, beside a bulk writer that keeps the disk busy.
power_cut_writers_start() {
  local _
  # The tool compiled first (its cache does not outlive a boot), so notes
  # are being written when the power goes.
  vm_ssh 'clawctl tool run scratchpad "{\"op\":\"get\",\"key\":\"cut-0\"}" --agent wasm-agent' >/dev/null 2>&1 || true
  vm_ssh 'for i in $(seq 100000); do echo "cut-$i" | clawctl fs write --agent kernel-engine -p cut/$i && echo $i; done' \
    > "$VMS/cut-files.acked" 2>/dev/null &
  CUT_PIDS=($!)
  vm_ssh 'for i in $(seq 100000); do clawctl tool run scratchpad "{\"op\":\"set\",\"key\":\"cut-$i\",\"value\":\"v$i\"}" --agent wasm-agent >/dev/null && echo $i; done' \
    > "$VMS/cut-notes.acked" 2>/dev/null &
  CUT_PIDS+=($!)
  # The bulk writer once both have acknowledged a write: beside it from the
  # start, on the emulated USB disk, every note's commit timed out once
  # (a local run, 2026-12-01: 210 files, 0 notes acknowledged), and a cut
  # with nothing acknowledged proves nothing.
  for _ in $(seq 120); do
    [[ -s $VMS/cut-files.acked && -s $VMS/cut-notes.acked ]] && break
    sleep 1
  done
  vm_ssh 'while :; do dd if=/dev/urandom of=/clawfs/cut-bulk bs=1M count=32 conv=fsync status=none || exit; done' >/dev/null 2>&1 &
  CUT_PIDS+=($!)
  # Until the bulk writer is writing: the cut comes under all three.
  for _ in $(seq 60); do
    vm_ssh 'test -s /clawfs/cut-bulk' 2>/dev/null && return 0
    sleep 1
  done
}
power_cut_writers_stop() {
  kill "${CUT_PIDS[@]}" 2>/dev/null || true
  wait "${CUT_PIDS[@]}" 2>/dev/null || true
}

# After the cut: /clawfs mounted read-write with no ext4 or integrity error
# in the kernel's log; every acknowledged file there; every acknowledged
# note there (an AgentFS write returns once it is on disk,
# specs/agentfs/README.md, "Connection settings"); wasm-agent's database
# consistent (clawctl fs check: the AgentFS rules, the audit trail's hash
# chain).
power_cut_survived() {
  local files notes lost
  files=$(tr '\n' ' ' < "$VMS/cut-files.acked") notes=$(wc -l < "$VMS/cut-notes.acked")
  echo "acknowledged before the cut: $(wc -w <<<"$files") file writes, $notes scratchpad notes"
  [[ -n $files ]] && ((notes > 0)) || return 1
  vm_ssh "
    findmnt -no OPTIONS /clawfs | grep -q '^rw' || exit 1
    if journalctl -b -k -o cat | grep -v 'audit: type=' | grep -E 'EXT4-fs error|with errors|device-mapper: integrity.*([Cc]hecksum|mismatch|error)|Buffer I/O error'; then exit 1; fi
    for i in $files; do [ \"\$(cat /clawfs/agents/kernel-engine/cut/\$i)\" = cut-\$i ] || { echo \"file \$i lost\"; exit 1; }; done
    rm -rf /clawfs/agents/kernel-engine/cut /clawfs/cut-bulk" || return 1
  # The notes first: wasm-daemon opening the database recovers its
  # write-ahead log, which the checker's read-only connection cannot. The
  # tool's first call after the boot compiles it (tens of seconds on an
  # emulated CPU, past clawctl's 10 s): it is made until it answers, so the
  # count below is of notes, not of timeouts.
  vm_ssh 'for _ in $(seq 60); do clawctl tool run scratchpad "{\"op\":\"get\",\"key\":\"cut-0\"}" --agent wasm-agent >/dev/null 2>&1 && exit 0; sleep 2; done; exit 1' ||
    { echo "scratchpad never answered after the cut"; return 1; }
  lost=$(vm_ssh "for i in \$(seq 1 $notes); do
      clawctl tool run scratchpad '{\"op\":\"get\",\"key\":\"cut-'\$i'\"}' --agent wasm-agent | jq -e --arg v v\$i '.value == \$v' >/dev/null || echo \$i
    done") || return 1
  echo "acknowledged notes found after the cut: $((notes - $(wc -w <<<"$lost"))) of $notes"
  [[ -z $lost ]] || { echo "acknowledged notes lost: $lost"; return 1; }
  vm_ssh "clawctl fs check /clawfs/agents/wasm-agent/workspace.db"
}

# update_build: $UPDATE_V2's and $UPDATE_V3's files (make
# update-artifacts) from the image's OS tree. It needs no VM, so run.sh runs
# it in a lane beside boot 1; its time goes to $VMS/update-build.s.
# $UPDATE_V3's router cannot start, and its gate gives up after 20 s rather
# than 300, so its three tries take minutes.
update_build() {
  local t0=$SECONDS broken="$VMS/update-broken-tree"
  rm -f "$VMS/update-build.s"; rm -rf "$broken"
  mkdir -p "$broken/usr/lib/systemd/system/clawos-router.service.d" "$broken/usr/lib/systemd/system/clawos-update-gate.service.d"
  printf '[Service]\nExecStart=\nExecStart=/bin/false\n' > "$broken/usr/lib/systemd/system/clawos-router.service.d/99-broken.conf"
  printf '[Service]\nExecStart=\nExecStart=/usr/bin/clawctl update gate --timeout-s 20\n' \
    > "$broken/usr/lib/systemd/system/clawos-update-gate.service.d/99-test.conf"
  UPDATE_VERSION="$UPDATE_V2" bash "$REPO/scripts/update-artifacts.sh" &&
    UPDATE_VERSION="$UPDATE_V3" UPDATE_EXTRA_TREE="$broken" bash "$REPO/scripts/update-artifacts.sh" &&
    echo "$((SECONDS - t0))" > "$VMS/update-build.s"
}

# update_boots: boots U1-U7 on the main VM's disk, with the files
# update_build made.
update_boots() {
  if [[ ! -s $VMS/update-build.s ]]; then
    FAILED=$((FAILED + 1)); echo "  FAIL the update boots: no update was built (update_build)"; return
  fi
  # shellcheck disable=SC2034  # read by the summary of run.sh
  UPDATE_BUILD_S=$(cat "$VMS/update-build.s")
  update_serve
  # shellcheck disable=SC2034  # read by the summary of run.sh
  UPDATE_DOWNLOAD_MIB=$(du -cm --apparent-size "$OUT/update/$UPDATE_V2"/clawos_* | tail -n 1 | cut -f1)

  log "boot U1 (the disk on USB): the power is cut while $UPDATE_V2 is being written"
  # writeback: the guest's flushes reach the disk file, as a real disk's
  # do, so what the guest synced before the cut is on it after.
  vm_start "$IMAGE" "$VMS/main" --disk-bus usb --disk-cache writeback
  if vm_wait_ready "$BOOT_TIMEOUT"; then
    check "hardware: the box boots from a USB stick (usb-storage on xHCI): its root is on a USB disk" vm_ssh "
      disk=$BOOT_DISK; echo \"\$disk: \$(lsblk -ndo TRAN,MODEL \$disk)\"; [ \"\$(lsblk -ndo TRAN \$disk)\" = usb ]"
    check "update: /clawfs's TPM2 keyslot policy hash is TPM2_PolicyPCR of this boot's PCRs 4 and 12" keyslot_policy_is_this_boots
    power_cut_writers_start
    vm_ssh "clawctl update apply $UPDATE_URL/v2" > "$VMS/cut-apply.log" 2>&1 &
    # Until the root slot is being written (its download began), then the
    # power goes.
    for _ in $(seq 120); do grep -q 'GET /v2/clawos_.*root.raw.gz' "$VMS/http.log" && break; sleep 1; done
    sleep 3
    kill -9 "$VM_PID"; wait "$VM_PID" 2>/dev/null || true
    power_cut_writers_stop
    check "update: the power was cut while the root slot was being written" grep -q 'GET /v2/clawos_.*root.raw.gz' "$VMS/http.log"
  else
    FAILED=$((FAILED + 1)); echo "  FAIL boot U1"
  fi

  log "boot U2 (the disk on NVMe): after the power cut; tampered updates; $UPDATE_V2"
  vm_start "$IMAGE" "$VMS/main" --disk-bus nvme
  if vm_wait_ready "$BOOT_TIMEOUT"; then
    check "hardware: the box boots from an NVMe drive: its root is on an NVMe disk" vm_ssh "
      disk=$BOOT_DISK; echo \"\$disk: \$(lsblk -ndo TRAN,MODEL \$disk)\"; [ \"\$(lsblk -ndo TRAN \$disk)\" = nvme ]"
    check "update: after the power cut the box runs $version, and no $UPDATE_V2 UKI or slot label exists" vm_ssh "
      . /usr/lib/os-release; [ \"\$IMAGE_VERSION\" = '$version' ] &&
      ! ls /efi/EFI/Linux | grep -q '$UPDATE_V2' && ! lsblk -nro PARTLABEL $BOOT_DISK | grep -q '$UPDATE_V2'"
    check "clawfs: after the power cut under heavy writes /clawfs mounts clean, every acknowledged file write and scratchpad note is there, and the agent's database checks consistent" \
      power_cut_survived
    log "power cut: acknowledged before it: $(wc -l < "$VMS/cut-files.acked") file writes, $(wc -l < "$VMS/cut-notes.acked") scratchpad notes"
    check "update: an update whose SHA256SUMS does not match its signature is refused, nothing changes" \
      update_refused_and_nothing_changed bad-signature
    check "update: an update with one changed byte in its root image is refused, nothing changes" \
      update_refused_and_nothing_changed bad-root
    check "update: a secret and an agent's memory are written under $version, for the updated box to read" vm_ssh "
      clawctl secret set update-canary <<<'written under $version' >/dev/null &&
      clawctl agent create vm-update >/dev/null &&
      clawctl memory store --agent vm-update --json 'Written under $version: the boat is at the north pier.' | jq -er .id > /clawfs/update-test-memory-id"
    # The extensions installed by the boot checks stay merged over /usr
    # (checks/72-extensions.sh, after-reboot/73-extensions.sh): the disk is
    # found all the same (specs/update/README.md).
    check "update: with nodejs and python merged over /usr, clawctl update check lists $UPDATE_V2 as available from the signed source" vm_ssh "
      [ \"\$(findmnt -no FSTYPE /usr)\" = overlay ] || { echo '/usr is not an extensions overlay'; exit 1; }
      clawctl update check $UPDATE_URL/v2 | tee /dev/stderr | grep -q '$UPDATE_V2'"
    check "update: $UPDATE_V2 applies into slot B (labelled, its partition UUID) and its UKI onto the ESP with 3 tries" \
      update_applied v2 "$UPDATE_V2"
    check "update: clawctl update status shows $version booted, $UPDATE_V2 on trial, and the health gate's record" vm_ssh "
      clawctl update status; clawctl update status --json | jq -e --arg v1 '$version' --arg v2 '$UPDATE_V2' '
        .booted_version == \$v1 and ([.ukis[] | select(.version == \$v2 and .state == \"trying\" and .tries_left == 3)] | length == 1)
        and ([.recent_gates[] | select(.version == \$v1 and .healthy)] | length >= 1)' >/dev/null"
    vm_poweroff
  else
    FAILED=$((FAILED + 1)); echo "  FAIL boot U2"
  fi

  log "boot U3: $UPDATE_V2"
  UPDATE_T0=$(date +%s.%N)
  vm_start "$IMAGE" "$VMS/main"
  if vm_wait_ready "$BOOT_TIMEOUT"; then
    # Blessed once the gate passed; bounded wait for it.
    VM_SSH_TIMEOUT=400 vm_ssh 'until systemctl is-active -q systemd-bless-boot.service; do sleep 2; systemctl is-failed -q clawos-update-gate.service && break; done' || true
    # shellcheck disable=SC2034  # read by the summary of run.sh
    UPDATE_BLESSED_S=$(printf '%.0f' "$(echo "$(date +%s.%N) - $UPDATE_T0" | bc)")
    check "update: $UPDATE_V2 runs and is blessed; the TPM opened /clawfs and the vault; the secret and memory written under $version are there" \
      update_runs "$UPDATE_V2"
    check "update: once $UPDATE_V2 is blessed, $version's TPM branch and keyslot are gone: the vault and /clawfs unseal under this boot alone" \
      settled_to_this_boot
    check "update: the system extensions installed under $version (nodejs, python) are merged on $UPDATE_V2, its packages and so its extension level the same" vm_ssh '
      clawctl extension list --json | jq -e "[.extensions[] | select(.merged) | .name] == [\"nodejs\", \"python\"]" >/dev/null && node --version >/dev/null'
    check "update: a source whose signed listing goes back from $UPDATE_V3 to $UPDATE_V2 is refused by check and apply, nothing changes" \
      update_source_went_backwards
    check "update: $UPDATE_V3 (a broken router) applies" update_applied v3 "$UPDATE_V3"
    vm_poweroff
  else
    FAILED=$((FAILED + 1)); echo "  FAIL boot U3 ($UPDATE_V2)"
  fi

  log "boots U4-U6: $UPDATE_V3 fails its health gate and reboots, three tries"
  ROLLBACK_T0=$(date +%s.%N)
  for try in 1 2 3; do
    vm_start "$IMAGE" "$VMS/main"
    if ! vm_wait_exit 900; then
      # What the try's console showed, kept: the next boot's starts anew.
      FAILED=$((FAILED + 1)); echo "  FAIL try $try of $UPDATE_V3 did not reboot by itself"
      vm_boot_report; cp "$VM_SERIAL" "$VMS/update-try-$try.serial.log"; break
    fi
    grep -q "ClawOS $UPDATE_V3 (" "$VM_SERIAL" || { FAILED=$((FAILED + 1)); echo "  FAIL try $try did not boot $UPDATE_V3"; break; }
  done

  log "boot U7: back on $UPDATE_V2"
  vm_start "$IMAGE" "$VMS/main"
  if vm_wait_ready "$BOOT_TIMEOUT"; then
    # shellcheck disable=SC2034  # read by the summary of run.sh
    ROLLBACK_S=$(printf '%.0f' "$(echo "$(date +%s.%N) - $ROLLBACK_T0" | bc)")
    check "update: after three failed tries of $UPDATE_V3 the box runs $UPDATE_V2 again, its data there" update_runs "$UPDATE_V2"
    check "update: clawctl update status says $UPDATE_V3 failed its health gate three times and why, try by try" vm_ssh "
      clawctl update status; clawctl update status --json | jq -e --arg v3 '$UPDATE_V3' '
        (.fell_back | test(\"^\" + \$v3 + \" used up its 3 tries \\\\(3 failed the health gate\\\\)\")) and (.fell_back | test(\"router is\"))
        and ([range(1; 4) as \$n | .fell_back | test(\"try \\(\$n) \\\\(.*router is\")] | all)
        and ([.ukis[] | select(.version == \$v3 and .state == \"bad\")] | length == 1)' >/dev/null"
    check "update: back on $UPDATE_V2, the bad $UPDATE_V3's TPM branch and keyslot are gone" settled_to_this_boot
    # Two versions are kept; the other one is the bad $UPDATE_V3.
    check "update: clawctl update rollback refuses when no older good version is on the ESP, and changes nothing" vm_ssh "
      before=\$(ls /efi/EFI/Linux); ! clawctl update rollback && [ \"\$(ls /efi/EFI/Linux)\" = \"\$before\" ]"
    # Someone at the boot menu (or renaming UKIs on the ESP) picks a version
    # whose TPM branch and keyslot were dropped: systemd-boot's one-shot
    # entry does the same without a keyboard. (The variable is read through
    # cat: efivarfs files cannot seek, which tail -c +5 on the file tries.)
    check "update: $UPDATE_V3 is picked by hand for the next boot (systemd-boot's one-shot entry)" vm_ssh "
      bootctl set-oneshot clawos_$UPDATE_V3.efi &&
      [ \"\$(cat /sys/firmware/efi/efivars/LoaderEntryOneShot-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f | tail -c +5 | tr -d '\\0')\" = clawos_$UPDATE_V3.efi ]"
    vm_poweroff
  else
    FAILED=$((FAILED + 1)); echo "  FAIL boot U7 (back on $UPDATE_V2)"
  fi

  log "boot U8: $UPDATE_V3 picked by hand, its TPM keyslot dropped"
  vm_start "$IMAGE" "$VMS/main"
  check "update: a version picked by hand after its TPM branch was dropped boots to the recovery-key prompt, /clawfs shut" \
    update_dropped_version_asks "$UPDATE_V3"
  vm_kill; vm_wait_exit 60 || true
  kill "$HTTP_PID" 2>/dev/null || true
}
