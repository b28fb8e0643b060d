#!/usr/bin/env bash
# Installs everything verimap needs on a fresh Debian machine, idempotently:
# Python packages, the Docker engine (and starts its daemon), the sandbox image
# (built offline), the llama.cpp runtime and the local model weights.
# Each step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# The catalog default (the 1.5B) unless VERIMAP_LOCAL_MODEL picks another (CI: the 0.5B).
LOCAL_MODEL="${VERIMAP_LOCAL_MODEL:-qwen2.5-coder-1.5b}"

log "system packages (Docker engine, debootstrap, Graphviz, Chromium for the report tests)"
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null || ! command -v dot >/dev/null \
    || ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq docker.io debootstrap graphviz \
    chromium chromium-driver >/dev/null
fi

log "Docker daemon"
if ! docker info >/dev/null 2>&1; then
  mkdir -p "${XDG_STATE_HOME:-$HOME/.local/state}/verimap"
  dlog="${XDG_STATE_HOME:-$HOME/.local/state}/verimap/dockerd.log"
  as_root setsid nohup dockerd --iptables=false --ip6tables=false --bridge=none >"$dlog" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see $dlog" >&2; tail -20 "$dlog" >&2; exit 1; }
fi
docker version --format 'docker server {{.Server.Version}}'

log "Python packages"
python3 -m pip install -q --upgrade pip >/dev/null 2>&1 || true
bash scripts/setup_local_model.sh --runtime-only
bash scripts/setup_eval.sh
python3 -m pip install -q -e ".[dev]"

log "sandbox image (offline build, reused when its inputs are unchanged)"
verimap sandbox build --offline

log "local model weights ($LOCAL_MODEL)"
verimap model pull --model "$LOCAL_MODEL"

log "setup done"
