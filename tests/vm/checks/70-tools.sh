# WASM tools through the wasm-daemon (issue 6): a real call, a limit, a denial.
check "tools: text-stats runs through execute_tool" \
  vm_ssh 'clawctl ipc call wasm-daemon execute_tool '"'"'{"tool_name":"text-stats","arguments":{"text":"one two\nthree"},"agent_id":"wasm-agent"}'"'"' | jq -e ".result.words == 3"'
check "tools: spin-forever is stopped by its 2 s timeout and the daemon keeps serving" vm_ssh '
  restarts=$(systemctl show -P NRestarts clawos-wasm-daemon)
  start=$(date +%s)
  out=$(clawctl ipc call wasm-daemon execute_tool "{\"tool_name\":\"spin-forever\",\"agent_id\":\"wasm-agent\"}" 2>&1)
  echo "$out"; echo "$out" | grep -q "ETIMEOUT.*timed out after 2s" || exit 1
  test $(( $(date +%s) - start )) -lt 10 || { echo "the timeout took too long"; exit 1; }
  clawctl ipc call wasm-daemon execute_tool "{\"tool_name\":\"text-stats\",\"arguments\":{\"text\":\"x\"},\"agent_id\":\"wasm-agent\"}" | jq -e ".result.bytes == 1" &&
    test "$(systemctl show -P NRestarts clawos-wasm-daemon)" = "$restarts"'
check "tools: file-read is refused a path outside its prefix" \
  vm_ssh 'clawctl ipc call wasm-daemon execute_tool '"'"'{"tool_name":"file-read","arguments":{"path":"/clawfs/vault/x"},"agent_id":"wasm-agent"}'"'"' 2>&1 | grep -q capability_denied'
