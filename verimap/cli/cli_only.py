"""Settings taken from the command line only: never from a `--config` file, a `VERIMAP_*`
variable or `[tool.verimap]`. A shared file or an inherited environment is not trusted to run
code, and these settings do (docs/security.md)."""

from __future__ import annotations

# By parameter name, with why and how to give it instead.
RUNS_CODE = {
    "models_factory": "it names Python code to run; give --models-factory on the command line",
    "ray": "it joins a cluster, which can run code in this process; give --ray on the command line",
}
# A config file may not hold these either (the environment may name one).
NOT_IN_CONFIG_FILES = {**RUNS_CODE, "config_file": "a config file cannot name another"}
