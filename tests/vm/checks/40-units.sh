# systemd reports no failed unit and every ClawOS unit is active.
check "units: no failed units" vm_ssh 'test -z "$(systemctl --failed --no-legend --plain)" || { systemctl --failed; false; }'
check "units: every enabled ClawOS socket and long-running service is active" vm_ssh '
  rc=0
  for unit in $(systemctl list-unit-files --no-legend --plain "clawos-*" | awk "\$2==\"enabled\" {print \$1}"); do
    [ "$(systemctl show -P Type "$unit")" = oneshot ] && continue
    systemctl is-active -q "$unit" || { echo "$unit is $(systemctl is-active "$unit")"; rc=1; }
  done
  exit $rc'
check "ssh: host key was generated on this box, not baked into the image" \
  vm_ssh 'test -s /var/lib/clawos/ssh/ssh_host_ed25519_key && ! ls /etc/ssh/ssh_host_* 2>/dev/null'
