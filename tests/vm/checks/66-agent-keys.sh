# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# A provider's API key (specs/agent/providers.md): kept in the vault (set
# up by 65-vault.sh), fetched by agent-loop for each request, sent only in
# the request's header; after a session that used it, the key is nowhere
# on /clawfs (the agents' files, transcripts, databases, the index), in the
# journal or in an agent's answer. The scripted provider of
# 59-agent-turns.sh answers again on the guest's loopback.

check "agent keys: a turn with a key from the vault sends it to the provider and leaves it nowhere else" vm_ssh '
  set -e
  canary="sk-vm-canary-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")"
  printf %s "$canary" | clawctl secret set provider-vm-canary
  reply=$(jq -cn "{status: 200, events: [
    ({id: \"c\", object: \"chat.completion.chunk\", created: 0, model: \"m\", choices: [{index: 0, delta: {content: \"keyed answer\"}, finish_reason: \"stop\"}]} | tojson), \"[DONE]\"]}")
  jq -cn --argjson r "$reply" "{replies: [\$r, {status: 401, body: {error: {message: (\"Incorrect API key provided: \" + \"$canary\")}}}]}" > /run/clawos-test/keyed.json
  systemd-run --unit clawos-test-keyed --property=Type=exec /run/clawos-test/clawos-scripted-provider --script /run/clawos-test/keyed.json \
    --listen 127.0.0.1:18081 --requests-log /run/clawos-test/keyed.jsonl >/dev/null
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18081) 2>/dev/null && break; sleep 0.2; done
  printf "[model]\nprovider = \"keyed\"\nmodel = \"m\"\nmax_retries = 0\n[providers.keyed]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:18081/v1\"\napi_key_secret = \"provider-vm-canary\"\n" > /run/clawos-test/keyed.toml
  clawctl agent create vm-keyed --config /run/clawos-test/keyed.toml >/dev/null
  clawctl chat --agent vm-keyed -m "first" --json | jq -e ".answer == \"keyed answer\"" >/dev/null
  # The provider echoes the key in its error; the operator sees it redacted.
  out=$(clawctl chat --agent vm-keyed -m "second" --json || true)
  echo "$out" | jq -e ".status == \"failed\" and (.message | test(\"401\")) and (.message | test(\"redacted\"))" >/dev/null || { echo "$out"; exit 1; }
  test "$(jq -r ".headers[] | select(.[0] == \"authorization\") | .[1]" /run/clawos-test/keyed.jsonl | head -1)" = "Bearer $canary"
  rc=0
  if grep -rlaF -e "$canary" /clawfs /var/lib/clawos /var/log; then echo "the key is on disk"; rc=1; fi
  if journalctl -b -o export | grep -qaF -e "$canary"; then echo "the key is in the journal"; rc=1; fi
  if echo "$out" | grep -qF -e "$canary"; then echo "the key is in an answer"; rc=1; fi
  systemctl stop clawos-test-keyed; clawctl agent rm vm-keyed >/dev/null; clawctl secret rm provider-vm-canary >/dev/null
  exit $rc'
