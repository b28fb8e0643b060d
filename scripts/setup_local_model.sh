#!/usr/bin/env bash
# Installs the local model runtime (llama-cpp-python[server], built once into a
# reusable wheelhouse) and pulls the local model weights.
#   --runtime-only   install the runtime, skip the weights
#   --model NAME     which catalog model to pull (default: $VERIMAP_LOCAL_MODEL or qwen2.5-coder-0.5b)
# Wheelhouse: $VERIMAP_WHEELHOUSE or ${XDG_CACHE_HOME:-$HOME/.cache}/verimap/wheelhouse.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION="0.3.36"
MODEL="${VERIMAP_LOCAL_MODEL:-qwen2.5-coder-0.5b}"
RUNTIME_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime-only) RUNTIME_ONLY=1 ;;
    --model) MODEL="$2"; shift ;;
    --model=*) MODEL="${1#--model=}" ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done
PY="${PYTHON:-python3}"
WHEELHOUSE="${VERIMAP_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/verimap/wheelhouse}"
mkdir -p "$WHEELHOUSE"

have_runtime() {
  "$PY" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_VERSION')" 2>/dev/null \
    && "$PY" -c "import llama_cpp.server.app, uvicorn, fastapi, sse_starlette, pydantic_settings" 2>/dev/null
}

if have_runtime; then
  echo "llama-cpp-python $LLAMA_VERSION already installed"
else
  if ! ls "$WHEELHOUSE"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    echo "building llama-cpp-python $LLAMA_VERSION into $WHEELHOUSE (once, ~5-8 min)"
    if ! command -v cmake >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
      if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
      $SUDO apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq build-essential cmake >/dev/null
    fi
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" \
      "$PY" -m pip wheel -q --no-deps -w "$WHEELHOUSE" "llama-cpp-python[server]==$LLAMA_VERSION"
  fi
  echo "installing llama-cpp-python $LLAMA_VERSION from $WHEELHOUSE"
  "$PY" -m pip install -q --find-links "$WHEELHOUSE" "llama-cpp-python[server]==$LLAMA_VERSION"
fi

if [ "$RUNTIME_ONLY" -eq 1 ]; then
  exit 0
fi
"$PY" -c "import verimap" 2>/dev/null || "$PY" -m pip install -q -e . >/dev/null
"$PY" -m verimap model pull --model "$MODEL"
