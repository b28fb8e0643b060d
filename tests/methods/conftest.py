"""The methods run on the eval harness's fixtures: the same sandbox, data and environment."""

from tests.evals.conftest import _no_data_env, samples, sandbox  # noqa: F401
