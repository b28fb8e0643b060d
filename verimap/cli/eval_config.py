"""What `verimap eval` reads besides its flags: config files, sample sizes, model factories."""

from __future__ import annotations

import difflib
import importlib
import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

import click

from verimap.cli.cli_only import NOT_IN_CONFIG_FILES
from verimap.cli.eval_benchmark import expand_config_benchmark

# Settings a config file may not hold: a config file (shared, checked in, downloaded) is not
# trusted to run code. The same list as [tool.verimap]'s, which is a config file too.
CLI_ONLY = NOT_IN_CONFIG_FILES
ROLES = ("planner", "executor", "judge")


def load_config_file(path: str | Path, known: Collection[str] | None = None) -> dict[str, Any]:
    """A YAML (.yaml/.yml), TOML (.toml) or JSON eval config, as a flat dict of CLI settings.

    With `known` (the command's option names), every key is checked against them and against
    `RunConfig`'s fields: an unknown key is an error naming each one (with a close match
    when there is one), and so is a command-line-only setting (`CLI_ONLY`)."""
    p = Path(path)
    data = _parse(p)
    if not isinstance(data, dict):
        raise click.BadParameter(f"{p}: expected a mapping at the top level", param_hint="--config")
    models = data.get("models") or {}
    run_config = data.get("run_config") or {}
    for name, value in (("models", models), ("run_config", run_config)):
        if not isinstance(value, dict):
            raise click.BadParameter(
                f"{p}: {name} must be a mapping, not {type(value).__name__}", param_hint="--config"
            )
    flat: dict[str, Any] = {}
    spelled: dict[str, str] = {}  # flat key -> the key as written in the file
    for k, v in data.items():
        if k not in ("models", "run_config"):
            key = str(k).replace("-", "_")
            flat[key], spelled[key] = v, str(k)
    for k, v in models.items():
        key = str(k).replace("-", "_")
        key = f"{key}_model" if key in ROLES else key
        flat[key], spelled[key] = v, f"models.{k}"
    expand_config_benchmark(flat, spelled, p)  # `benchmark:` as a mapping: a file's field map
    if "sandbox" in flat:
        flat["sandbox_kind"] = flat.pop("sandbox")
        spelled["sandbox_kind"] = spelled.pop("sandbox")
    if known is not None:
        _check_keys(p, spelled, set(known), run_config)
    flat["run_config"] = run_config
    return flat


def _parse(p: Path) -> Any:
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise click.BadParameter(f"cannot read {p}: {e}", param_hint="--config") from None
    try:
        if p.suffix in (".yaml", ".yml"):
            import yaml

            return yaml.safe_load(text)
        if p.suffix == ".toml":
            import tomllib

            return tomllib.loads(text)
        return json.loads(text)
    except Exception as e:
        raise click.BadParameter(f"{p}: {e}", param_hint="--config") from None


def _check_keys(
    p: Path, spelled: dict[str, str], known: set[str], run_config: dict[str, Any]
) -> None:
    for key, written in spelled.items():
        if key in CLI_ONLY:
            raise click.BadParameter(
                f"{p}: {written!r} is not allowed in a config file: {CLI_ONLY[key]}",
                param_hint="--config",
            )
    options = known - set(CLI_ONLY)
    vocabulary = sorted((options - {"sandbox_kind"}) | {"sandbox", "models", "run_config"})
    unknown = [_unknown(w, vocabulary) for k, w in spelled.items() if k not in options]
    from verimap.base.accounting import Budget
    from verimap.config import unknown_settings

    unknown += unknown_settings(run_config, prefix="run_config.")
    budget = run_config.get("budget")
    if isinstance(budget, dict):
        names = sorted(Budget.model_fields)
        unknown += [_unknown(f"run_config.budget.{k}", names) for k in budget if k not in names]
    if unknown:
        raise click.BadParameter(
            f"{p}: unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}",
            param_hint="--config",
        )


def _unknown(written: str, vocabulary: list[str]) -> str:
    """`written`, quoted, with the closest known name when one is close."""
    leaf = written.rsplit(".", 1)[-1].replace("-", "_")
    close = difflib.get_close_matches(leaf, vocabulary, n=1)
    return f"{written!r} (did you mean {close[0]!r}?)" if close else repr(written)


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
