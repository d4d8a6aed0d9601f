# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# AppArmor (specs/apparmor/README.md): the profiles of the eight components,
# the in-box model and the web console are loaded in enforce mode at boot,
# every running daemon is confined by its own, and each is refused an
# access outside it, with the denial in the journal. The checks before this one (agents,
# tools, vault, metrics) ran with every daemon under its profile.

# A profile per component, clawos-<component>, the model server's and the
# console's.
AA_COMPONENTS="agent-loop ebpf-agent fs-engine observability router scheduler security-agent wasm-daemon"
AA_PROFILES="clawos-${AA_COMPONENTS// / clawos-} clawos-model clawos-console"

check "apparmor: the ten ClawOS profiles are loaded in enforce mode" \
  vm_ssh 'for p in '"$AA_PROFILES"'; do
            grep -qx "$p (enforce)" /sys/kernel/security/apparmor/profiles || { echo "$p not loaded in enforce mode"; grep clawos /sys/kernel/security/apparmor/profiles; exit 1; }
          done'

# The model server and the console start at their sockets' first
# connections (the turns checks and 73-console.sh made them); started here
# in case they have stopped since.
check "apparmor: every running component, the model server and the console are confined by their own profiles, in enforce mode" \
  vm_ssh 'systemctl start clawos-model.service clawos-console.service || exit 1
          for p in '"$AA_PROFILES"'; do
            pid=$(systemctl show -P MainPID "$p.service"); label=$(cat /proc/$pid/attr/apparmor/current 2>&1)
            [ "$pid" != 0 ] && [ "$label" = "$p (enforce)" ] || { echo "$p.service: pid $pid, label $label"; exit 1; }
          done'

# Each component's own binary, run here by root (the profile attaches by
# its path, as systemd's AppArmorProfile= does for the service), is told to
# read its configuration from /run/clawos-test, which no profile grants: it
# must fail on that read with EACCES, and the kernel's audit record of the
# denial (profile, operation, path) must reach the journal. The model
# server and the console are told to bind their sockets there instead.
check "apparmor: each component is refused a file outside its profile, and the denial is in the journal" \
  vm_ssh 'd=/run/clawos-test/apparmor-check; mkdir -p $d; since=$(date +%s); sleep 1
          for c in '"$AA_COMPONENTS"'; do
            : > $d/$c.toml
            out=$(CLAWOS_CONFIG_DIR=$d timeout 20 /usr/bin/clawos-$c 2>&1) && { echo "clawos-$c started"; exit 1; }
            echo "$out" | grep -q "$d/$c.toml: Permission denied" || { echo "clawos-$c: $out"; exit 1; }
          done
          out=$(timeout 20 clawos-model-server --socket $d/model.sock 2>&1) && { echo "clawos-model-server started"; exit 1; }
          echo "$out" | grep -q "Permission denied" || { echo "clawos-model-server: $out"; exit 1; }
          out=$(timeout 20 clawos-console --socket $d/console.sock 2>&1) && { echo "clawos-console started"; exit 1; }
          echo "$out" | grep -q "Permission denied" || { echo "clawos-console: $out"; exit 1; }
          for _ in $(seq 10); do
            denied=$(journalctl --since @$since -o cat _TRANSPORT=audit | grep "apparmor=\"DENIED\"")
            missing=""
            for c in '"$AA_COMPONENTS"'; do
              echo "$denied" | grep "profile=\"clawos-$c\"" | grep -q "name=\"$d/$c.toml\"" || missing="$missing clawos-$c"
            done
            echo "$denied" | grep "profile=\"clawos-model\"" | grep -q "name=\"$d/model.sock\"" || missing="$missing clawos-model"
            echo "$denied" | grep "profile=\"clawos-console\"" | grep -q "name=\"$d/console.sock\"" || missing="$missing clawos-console"
            [ -z "$missing" ] && exit 0; sleep 1
          done; echo "no denial in the journal for:$missing"; echo "$denied" | tail -n 5; exit 1'

# The image's binary cache (apparmor.service.d/10-clawos.conf): the parser
# said "Cache hit" for each of the ten and compiled none from its text.
check "apparmor: the ten profiles were loaded at boot from the binary cache the image was built with" \
  vm_ssh 'out=$(journalctl -b -u apparmor -o cat)
          for p in '"$AA_PROFILES"'; do
            echo "$out" | grep -q "^Cache hit: /usr/lib/clawos/apparmor-cache/[^/]*/$p$" || { echo "$p: no cache hit"; echo "$out"; exit 1; }
          done
          ! echo "$out" | grep "^Cache miss"'

# What loading the profiles at boot costs.
AA_LOAD_MS=$(vm_ssh 'echo $(( ($(systemctl show -P ExecMainExitTimestampMonotonic apparmor) - $(systemctl show -P ExecMainStartTimestampMonotonic apparmor)) / 1000 ))') &&
  log "apparmor: the ten profiles loaded at boot in $AA_LOAD_MS ms"
