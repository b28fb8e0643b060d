"""RunConfig is one nested model: a knob is given, read and written out in its part, a knob
outside its part is an error saying where it belongs, and what the user set stays visible to
the policies."""

import pytest
from pydantic import ValidationError

from verimap.config import (
    PARTS,
    WHOLE,
    Loop,
    RunConfig,
    Sampling,
    Verify,
    given,
    merge,
    nest,
    part_of,
)
from verimap.wiring import resolve


def test_a_run_config_has_a_few_parts():
    assert len(RunConfig.model_fields) <= 12
    assert set(RunConfig.model_fields) == {*PARTS, *WHOLE}


def test_parts_given_as_models_or_mappings_give_the_same_config():
    typed = RunConfig(
        loop=Loop(max_retries=2),
        sampling=Sampling(temperature=0.3),
        verify=Verify(checks=[], verification="none"),
        budget={"max_cost": 1.0},
    )
    mapped = RunConfig.model_validate(
        {
            "loop": {"max_retries": 2},
            "sampling": {"temperature": 0.3},
            "verify": {"checks": [], "verification": "none"},
            "budget": {"max_cost": 1.0},
        }
    )
    assert typed == mapped
    assert typed.loop.max_retries == 2 and typed.sampling.temperature == 0.3
    assert given(typed) == given(mapped)


def test_a_config_is_written_out_nested_and_reads_back():
    cfg = RunConfig(loop=Loop(max_retries=2), sampling=Sampling(seed=7))
    dumped = cfg.model_dump(mode="json")
    assert set(dumped) == {*PARTS, *WHOLE}
    assert dumped["loop"]["max_retries"] == 2 and dumped["sampling"]["seed"] == 7
    assert set(dumped["verify"]) == set(Verify.model_fields)
    assert RunConfig.model_validate(dumped) == cfg
    assert RunConfig.model_validate_json(cfg.model_dump_json()) == cfg
    assert given(cfg) == {"loop": {"max_retries": 2}, "sampling": {"seed": 7}}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"max_retries": 2}, "'max_retries' (it is now loop.max_retries)"),
        ({"temperature": 0.2, "loop": {}}, "'temperature' (it is now sampling.temperature)"),
        ({"loop": {"temperature": 0.2}}, "'loop.temperature' (it is sampling.temperature)"),
        ({"loop": {"max_retires": 2}}, "'loop.max_retires' (did you mean 'max_retries'?)"),
        ({"vf_timout_s": 2}, "'vf_timout_s' (did you mean 'verify.vf_timeout_s'?)"),
        ({"models_factory": "x:y"}, "'models_factory'"),
        ({"loop": 3}, "'loop' must be a mapping of its settings, not 3"),
    ],
)
def test_a_key_that_is_no_setting_where_it_stands_is_an_error_saying_so(data, said):
    with pytest.raises(ValidationError) as e:
        RunConfig.model_validate(data)
    assert said in str(e.value)
    with pytest.raises(ValueError) as e2:
        given(data)
    assert said in str(e2.value)
    with pytest.raises(ValueError) as e3:
        resolve(data, method="verimap")
    assert said in str(e3.value)


def test_every_knob_is_found_in_its_part_by_name():
    for part, model in PARTS.items():
        for name in model.model_fields:
            assert part_of(name) == part
    assert part_of("budget") is None and part_of("nope") is None
    assert nest({"max_retries": 2, "seed": 1, "policies": []}) == {
        "loop": {"max_retries": 2},
        "sampling": {"seed": 1},
        "policies": [],
    }


def test_layers_merge_knob_by_knob_and_whole_settings_whole():
    merged = merge(
        {"loop": {"max_retries": 3, "max_iterations": 5}, "budget": {"max_cost": 1.0}},
        {"loop": {"max_retries": 1}, "budget": {"max_llm_calls": 2}, "policies": []},
    )
    assert merged == {
        "loop": {"max_retries": 1, "max_iterations": 5},
        "budget": {"max_llm_calls": 2},
        "policies": [],
    }


def test_a_part_keeps_its_validators():
    with pytest.raises(ValidationError, match="unknown check"):
        RunConfig(verify=Verify(checks=["nope"]))
    with pytest.raises(ValidationError, match="max_retries"):
        RunConfig.model_validate({"loop": {"max_retries": 0}})
    with pytest.raises(ValidationError, match="named outputs"):
        RunConfig.model_validate({"execution": {"structured_io": False}})


def test_policies_fill_only_the_settings_the_user_left_unset():
    mine = RunConfig.model_validate(
        {"sampling": {"retry_temperature": 0.5}, "loop": {"max_retries": 2}}
    )
    cfg = resolve(mine, local=True).config
    assert cfg.loop.max_retries == 2 and cfg.loop.max_iterations == 2  # mine, the policy's
    assert cfg.sampling.retry_temperature == 0.5 and cfg.sampling.temperature == 0.0
    assert cfg.planning.max_nodes == 1 and cfg.execution.fresh_code_retries
    # A default the user wrote out is a setting of theirs.
    unset = RunConfig.model_validate({"planning": {"max_nodes": None}})
    assert resolve(unset, local=True).config.planning.max_nodes is None
    # Resolving a resolved config changes nothing.
    assert resolve(cfg, local=True).config == cfg
