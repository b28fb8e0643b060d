"""Shared test fixtures. Each section belongs to one area; add yours as a new section."""

# ---- local model server (owner: local-model area) ---------------------------------------------
# Session-scoped fixtures `local_model_file`, `local_server`, `local_model`, `local_models` for
# tests marked `localmodel` (see verimap/local/pytest_plugin.py).
pytest_plugins = ["verimap.local.pytest_plugin"]
# ---- end local model server ------------------------------------------------------------------
