# WASM tools through the wasm-daemon (issue 6): a real call, a limit, a denial.
check "tools: text-stats runs through execute_tool" \
  vm_ssh 'clawctl ipc call wasm-daemon execute_tool '"'"'{"tool_name":"text-stats","arguments":{"text":"one two\nthree"},"agent_id":"wasm-agent"}'"'"' | jq -e ".result.words == 3"'
check "tools: spin-forever is stopped by its timeout and the daemon keeps serving" bash -c '
  vm_ssh "clawctl ipc call wasm-daemon execute_tool '"'"'{\"tool_name\":\"spin-forever\",\"agent_id\":\"wasm-agent\"}'"'"'" 2>&1 | grep -q timeout || exit 1
  vm_ssh "clawctl ipc call wasm-daemon execute_tool '"'"'{\"tool_name\":\"text-stats\",\"arguments\":{\"text\":\"x\"},\"agent_id\":\"wasm-agent\"}'"'"' | jq -e .result.bytes"'
check "tools: file-read is refused a path outside its prefix" \
  vm_ssh 'clawctl ipc call wasm-daemon execute_tool '"'"'{"tool_name":"file-read","arguments":{"path":"/clawfs/vault/x"},"agent_id":"wasm-agent"}'"'"' 2>&1 | grep -q capability_denied'
