"""The paper's evaluation: benchmarks (data and scoring), method presets, the runner, reports."""
