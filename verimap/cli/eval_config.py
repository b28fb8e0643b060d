"""What `verimap eval` reads besides its flags: config files, sample sizes, model factories."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import click


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML (.yaml/.yml), TOML (.toml) or JSON eval config, as a flat dict of CLI settings."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise click.BadParameter(f"cannot read {p}: {e}", param_hint="--config") from None
    try:
        if p.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif p.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except Exception as e:
        raise click.BadParameter(f"{p}: {e}", param_hint="--config") from None
    if not isinstance(data, dict):
        raise click.BadParameter(f"{p}: expected a mapping at the top level", param_hint="--config")
    flat = {k.replace("-", "_"): v for k, v in data.items() if k not in ("models", "run_config")}
    for k, v in (data.get("models") or {}).items():
        k = k.replace("-", "_")
        flat[f"{k}_model" if k in ("planner", "executor", "judge") else k] = v
    if "sandbox" in flat:
        flat["sandbox_kind"] = flat.pop("sandbox")
    flat["run_config"] = data.get("run_config") or {}
    return flat


class SampleSize(click.ParamType):
    """A positive number of tasks, or "paper" (500, or half the set when it has fewer)."""

    name = "N|paper"

    def convert(self, value: Any, param: Any, ctx: Any) -> int | str:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        text = str(value).strip().lower()
        if text == "paper":
            return text
        if text.isdigit() and int(text) >= 1:
            return int(text)
        self.fail(f"{value!r} is neither a positive number of tasks nor 'paper'", param, ctx)


def limit_or_sample(kw: dict[str, Any], from_config: set[str]) -> None:
    """A flag overrides its config file, so `--limit 5` on a config that samples runs the first
    five tasks (and `--sample` on one that limits, a sample); both from the same place is an
    error. A seed from the config goes with the config's sample."""
    if kw.get("limit") and kw.get("sample") is not None:
        config_side = {"limit", "sample"} & from_config
        if len(config_side) != 1:
            raise click.UsageError(
                "--limit (the first N tasks) and --sample (a seeded random sample) exclude each "
                "other; give one of them"
            )
        dropped = config_side.pop()
        kept = "sample" if dropped == "limit" else "limit"
        click.echo(f"note: --{kept} overrides the config's {dropped}", err=True)
        kw[dropped] = None
    if kw.get("sample") is None and kw.get("seed") is not None:
        if "seed" in from_config:
            kw["seed"] = None
        else:
            raise click.UsageError("--seed chooses a --sample; give --sample N or --sample paper")


def load_factory(spec: str):
    mod, _, attr = spec.partition(":")
    if not attr:
        raise click.BadParameter("use MODULE:FUNCTION", param_hint="--models-factory")
    return getattr(importlib.import_module(mod), attr)
