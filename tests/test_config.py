"""RunConfig in parts: flat and nested input mean the same config, it is written out flat as
before the parts, and what the user set stays visible to the policies."""

import typing

import pytest
from pydantic import ValidationError

from verimap.config import FLAT, PARTS, WHOLE, Loop, RunConfig, RunConfigArgs, given
from verimap.wiring import resolve

# The flat names config.json, `run_start` and Inspect hold: every config's before the parts, and
# the ballot since.
OLD_NAMES = {
    "max_retries",
    "max_iterations",
    "max_parallel",
    "sequential",
    "reuse_verified",
    "fail_accepted",
    "verification",
    "context_generations",
    "structured_io",
    "vf_timeout_s",
    "checks",
    "vacuity_check",
    "plan_reasoning",
    "full_feedback",
    "batch_judge",
    "judge_tools",
    "agreement",
    "unverified_answer",
    "plan_repairs",
    "max_nodes",
    "max_plan_repeats",
    "executor_max_steps",
    "temperature",
    "retry_temperature",
    "fresh_code_retries",
    "opening_calls",
    "top_p",
    "seed",
    "budget",
    "policies",
    "ballot",
}


def test_a_run_config_has_a_few_parts():
    assert len(RunConfig.model_fields) <= 12


def test_flat_and_nested_settings_give_the_same_config():
    flat = RunConfig(
        max_retries=2,
        temperature=0.3,
        checks=[],
        max_nodes=2,
        structured_io=False,
        verification="none",
        budget={"max_cost": 1.0},
    )
    nested = RunConfig.model_validate(
        {
            "loop": {"max_retries": 2},
            "sampling": {"temperature": 0.3},
            "verify": {"checks": [], "verification": "none"},
            "planning": {"max_nodes": 2},
            "execution": {"structured_io": False},
            "budget": {"max_cost": 1.0},
        }
    )
    mixed = RunConfig(
        loop=Loop(max_retries=2),
        temperature=0.3,
        verify={"checks": []},
        verification="none",
        max_nodes=2,
        structured_io=False,
        budget={"max_cost": 1.0},
    )
    assert flat == nested == mixed
    assert flat.loop.max_retries == 2 and flat.sampling.temperature == 0.3
    assert given(flat) == given(nested) == given(mixed)


def test_a_config_is_written_out_flat_under_the_old_names_and_reads_back():
    cfg = RunConfig(max_retries=2, seed=7)
    dumped = cfg.model_dump(mode="json")
    assert set(dumped) == OLD_NAMES == {*FLAT, "budget", "policies"}
    assert RunConfig.model_validate(dumped) == cfg
    assert given(cfg) == {"max_retries": 2, "seed": 7}


def test_a_setting_given_both_flat_and_nested_is_an_error_naming_it():
    with pytest.raises(ValidationError, match=r"'max_retries' \(loop.max_retries\)"):
        RunConfig.model_validate({"max_retries": 2, "loop": {"max_retries": 3}})


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"max_retires": 2}, "'max_retires'"),
        ({"loop": {"temperature": 0.2}}, "'loop.temperature'"),
        ({"models_factory": "x:y"}, "'models_factory'"),
    ],
)
def test_an_unknown_setting_is_an_error_naming_it(data, named):
    with pytest.raises(ValidationError, match=named):
        RunConfig.model_validate(data)
    with pytest.raises(ValueError, match=named):
        given(data)


def test_a_part_keeps_its_validators():
    with pytest.raises(ValidationError, match="unknown check"):
        RunConfig(checks=["nope"])
    with pytest.raises(ValidationError, match="max_retries"):
        RunConfig(loop={"max_retries": 0})
    with pytest.raises(ValidationError, match="named outputs"):
        RunConfig(execution={"structured_io": False})


def test_policies_fill_only_the_nested_settings_the_user_left_unset():
    mine = RunConfig.model_validate(
        {"sampling": {"retry_temperature": 0.5}, "loop": {"max_retries": 2}}
    )
    cfg = resolve(mine, local=True).config
    assert cfg.loop.max_retries == 2 and cfg.loop.max_iterations == 2  # mine, the policy's
    assert cfg.sampling.retry_temperature == 0.5 and cfg.sampling.temperature == 0.0
    assert cfg.planning.max_nodes == 1 and cfg.execution.fresh_code_retries
    # A default the user wrote out is a setting of theirs, whichever way it was written.
    assert (
        resolve(RunConfig(planning={"max_nodes": None}), local=True).config.planning.max_nodes
        is None
    )
    assert resolve(RunConfig(max_nodes=None), local=True).config.planning.max_nodes is None


def test_the_typed_keyword_arguments_are_the_settings_with_their_types():
    """`RunConfigArgs` is what a type checker allows in `RunConfig(...)`: every flat name with its
    part's type, and the parts and whole settings, so that a new knob cannot be left out."""
    hints = typing.get_type_hints(RunConfigArgs)
    assert set(hints) == set(FLAT) | set(PARTS) | set(WHOLE)
    for name, part in FLAT.items():
        assert hints[name] == PARTS[part].model_fields[name].annotation, name
    assert hints["policies"] == RunConfig.model_fields["policies"].annotation
