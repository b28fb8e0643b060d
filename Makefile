# The two commands of the README's quickstart.
.PHONY: setup demo test lint bench replay-check results-page

setup:
	bash scripts/setup.sh

# A fresh directory per demo, so every `make demo` is a real run (the runner refuses to
# mix a new run into old results).
demo: setup
	verimap eval --benchmark humaneval --method verimap --limit 3 --max-attempts 2 --max-iterations 2 \
		--out runs/demo-$$(date +%Y%m%d-%H%M%S)

# The tests serve the small model (VERIMAP_TEST_MODEL, default the 0.5B), so setup pulls that one;
# the judge test needs the default 1.5B (the 0.5B passes "Berlin" for "city is Paris").
test:
	VERIMAP_LOCAL_MODEL=$${VERIMAP_LOCAL_MODEL:-qwen2.5-coder-0.5b} bash scripts/setup.sh
	verimap model pull --model qwen2.5-coder-1.5b
	$(MAKE) lint
	CI=$${CI:-true} python3 -m pytest

# Style, formatting and types (mypy on the library, the benchmarks and the tests' annotated
# code); part of `make test`, so CI runs it.
lint:
	ruff check verimap tests benchmarks && ruff format --check verimap tests benchmarks
	mypy && mypy benchmarks && mypy --explicit-package-bases tests

bench:
	python3 benchmarks/coordinator.py
	python3 benchmarks/sandbox_latency.py
	python3 benchmarks/eval_throughput.py

# Does the code still send the requests it sent when the recording was made? The small-model
# benchmark on its development windows, served from the packed recorded replies: "0 sent to
# the server" means the same requests, task by task. A deliberate change of prompts or sampling
# shows up as requests sent (benchmarks/_replay.py).
replay-check: setup
	rm -rf runs/replay-check && mkdir -p runs/replay-check
	python3 benchmarks/small_model.py --gsm8k 20 --humaneval 20 --offset 0 \
		--methods bare,react,verimap --runs-dir runs/replay-check/runs \
		--replay eval/replays/small-model-0-19.jsonl.gz --out runs/replay-check/table.md

# eval/results.md from the compact results files in eval/draws.
results-page:
	python3 benchmarks/results_page.py
