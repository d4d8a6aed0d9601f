# shellcheck shell=bash
# Agents (specs/agent/README.md): a fresh box has `default`; the operator
# creates others through agent-loop, which has fs-engine make the directory;
# a config typo names the key and stops only that agent. The agents the
# later checks act as (files, identity, tools) are created here.

default_agent_idle() {
  clawctl agent list | grep -Eq "^default +idle +local/smollm2-135m-instruct$"
}
check "agents: a fresh box has the agent default, idle on the in-box model" default_agent_idle

agents_created() {
  for a in kernel-engine fs-engine wasm-agent; do clawctl agent create $a >/dev/null || exit 1; done
  for a in kernel-engine fs-engine wasm-agent; do
    d=/clawfs/agents/$a
    test -s $d/workspace.db && test -s $d/identity.json && test -d $d/logs || exit 1
    # fs-engine made it; the group lets agent-loop and wasm-daemon in; the config is read-only to all but fs-engine.
    test "$(stat -c "%U:%G %a" $d)" = "clawos-fs-engine:clawos-agents 770" || { stat -c "%n %U:%G %a" $d; exit 1; }
    test "$(stat -c "%U %a" $d/config.toml $d/workspace.db | tr '\n' ' ')" = "clawos-fs-engine 640 clawos-fs-engine 660 " ||
      { stat -c "%n %U:%G %a" $d/config.toml $d/workspace.db; exit 1; }
  done
  grep -q "agent=wasm-agent operation=agent_create path=/clawfs/agents/wasm-agent caller=agent-loop$" /var/log/clawos/clawfs-audit.log
}
check "agents: clawctl agent create makes the agents' directories (kernel-engine, fs-engine, wasm-agent)" agents_created

duplicate_and_bad_names_refused() {
  clawctl agent create wasm-agent 2>&1 | grep -q "already exists" && clawctl agent create ../x 2>&1 | grep -q "agent name"
}
check "agents: a second agent of the same name and a bad name are refused" duplicate_and_bad_names_refused

unknown_config_key_refused() {
  printf "[limits]\nmax_step = 3\n" > /run/bad.toml
  ! clawctl agent create typo --config /run/bad.toml 2>/run/err && grep -q "max_step" /run/err && test ! -e /clawfs/agents/typo
}
check "agents: a config with an unknown key is refused at create, naming the key" unknown_config_key_refused

config_typo_stops_one_agent() {
  clawctl agent create typo >/dev/null &&
  # Edited in place: the file keeps its owner, group and mode.
  sed "s/^provider = \"local\"/provder = \"local\"/" /clawfs/agents/typo/config.toml > /run/typo.toml && cat /run/typo.toml > /clawfs/agents/typo/config.toml
  clawctl agent list | grep -E "^typo +stopped +.*provder" &&
  clawctl chat --agent typo -m hi 2>&1 | grep -q "stopped" &&
  clawctl agent list | grep -Eq "^default +idle" &&
  ! clawctl agent resume typo 2>/dev/null &&
  clawctl agent rm typo >/dev/null && test ! -e /clawfs/agents/typo
}
check "agents: a typo written into config.toml over SSH stops that agent with the key named; the others run" config_typo_stops_one_agent

broken_database_listed() {
  clawctl agent create broken-db >/dev/null &&
  rm /clawfs/agents/broken-db/workspace.db && mkdir /clawfs/agents/broken-db/workspace.db &&
  clawctl agent list | grep -E "^broken-db +stopped +.*workspace.db" &&
  clawctl agent list | grep -Eq "^default +idle" &&
  clawctl agent rm broken-db >/dev/null && test ! -e /clawfs/agents/broken-db
}
check "agents: an agent whose database does not open is listed as stopped, with why; the others are listed" broken_database_listed

pause_survives_restart() {
  clawctl agent pause kernel-engine >/dev/null && systemctl restart clawos-agent-loop &&
  clawctl agent list | grep -Eq "^kernel-engine +paused" &&
  clawctl chat --agent kernel-engine -m hi 2>&1 | grep -q "paused" &&
  clawctl agent resume kernel-engine | grep -q "\"idle\""
}
check "agents: a pause is kept across a restart of agent-loop and refuses turns" pause_survives_restart

# A small model drowns in a long prompt (specs/agent/README.md, "System
# prompt"): the default agent, on the in-box model, which calls no tool
# reliably, describes none; an agent given a remote model (no [tools] either)
# may call every tool, all described within 1,500 tokens.
default_prompt_within_budget() {
  clawctl agent show default | jq -e ".system_prompt_tokens <= 200 and .tools == []" >/dev/null || return 1
  printf '[model]\nprovider = "remote"\nmodel = "m"\n[providers.remote]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n' > /run/clawos-test-remote.toml
  clawctl agent create vm-remote --config /run/clawos-test-remote.toml >/dev/null || return 1
  clawctl agent show vm-remote | jq -e ".system_prompt_tokens <= 1500 and (.tools | length) >= 4" >/dev/null
  local shown=$?
  clawctl agent rm vm-remote >/dev/null && return $shown
}
check "agents: the default agent on the in-box model describes no tools (system prompt at most 200 tokens); one on a remote model gets every tool within 1,500 tokens" default_prompt_within_budget
# specs/agent/README.md, "Persona" and "Soul guard": the brain files a new
# agent gets are in its prompt; a small rule the operator writes over SSH
# counts at once, a large new one waits for the operator's approval (the
# guard cannot tell who wrote it), and one over the budget is left out and
# named.
brain_files_in_prompt() {
  clawctl agent show default | jq -e ".persona == [\"soul.md\", \"identity.md\", \"user.md\"] and .persona_left_out == []" >/dev/null &&
  grep -q "I am default," /clawfs/agents/default/identity.md &&
  clawctl agent create persona-test >/dev/null &&
  printf "# Short\nAnswer in English.\n" > /clawfs/agents/persona-test/instructions/a.md &&
  head -c 6000 /dev/zero | tr "\0" x > /clawfs/agents/persona-test/instructions/big.md &&
  clawctl agent list | grep -Eq "^persona-test +halted +held by the soul guard \(instructions/big.md: a large change" &&
  clawctl agent guard persona-test --approve | jq -e ".state == \"idle\"" >/dev/null &&
  clawctl agent show persona-test | jq -e ".persona[-1] == \"instructions/a.md\" and (.persona_left_out | length == 1 and (.[0] | startswith(\"instructions/big.md: \")))" >/dev/null &&
  clawctl agent rm persona-test >/dev/null
}
check "agents: the brain files are in the system prompt; an operator's file over the budget is left out and named" brain_files_in_prompt

agent_loop_idle_rss() {
  test "$(ps -o rss= -p "$(systemctl show -P MainPID clawos-agent-loop)")" -le 32768
}
check "agents: agent-loop's idle RSS is at most 32 MB" agent_loop_idle_rss
log "agent-loop idle RSS: $(ps -o rss= -p "$(systemctl show -P MainPID clawos-agent-loop)" | tr -d ' ') KiB; default agent's system prompt: $(clawctl agent show default | jq .system_prompt_tokens) tokens"

# The in-box model must not slow the boot (specs/agent/local-model.md):
# systemd listens on its socket and starts the server at the first
# connection (no agent has asked yet: 59-agent-turns is the first).
model_not_started_at_boot() {
  test "$(systemctl is-active clawos-model.socket)" = active && test -S /run/clawos-model/api.sock &&
  test "$(stat -c "%U:%G %a" /run/clawos-model/api.sock)" = "clawos-model:clawos-model-clients 660" &&
  test "$(systemctl show -P ActiveState clawos-model.service)" = inactive
}
check "agents: the in-box model costs the boot nothing: its socket listens, its server is not started" model_not_started_at_boot

# A new agent's database opened by agent-loop (its sessions) and by
# wasm-daemon (three tool calls) at the same moment, twelve times: each
# opener makes the -wal and -shm files under its 0077 umask and widens
# them at once, and an open in between used to fail with "unable to open
# database file" (agentfs::retry_cantopen).
concurrent_first_opens() {
  for i in $(seq 12); do
    a=race-$i; clawctl agent create "$a" >/dev/null || exit 1
    for j in 1 2 3; do clawctl tool run text-stats "{\"text\":\"a b\"}" --agent "$a" > "/tmp/race-$i-$j" 2>&1 & done
    clawctl session list "$a" > "/tmp/race-$i-s" 2>&1 & wait
    for f in "/tmp/race-$i-"*; do grep -q "unable to open" "$f" && { cat "$f"; exit 1; }; done
    clawctl agent rm "$a" >/dev/null || exit 1
  done
}
check "agents: a new agent's database opened by agent-loop and wasm-daemon at once opens for every caller" concurrent_first_opens
