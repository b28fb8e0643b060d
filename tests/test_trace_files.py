from verimap.trace_files import trace_path


def test_trace_paths_outside_the_run_directory_are_refused(tmp_path):
    (tmp_path / "traces").mkdir()
    assert trace_path(tmp_path, "traces/a.jsonl") == (tmp_path / "traces" / "a.jsonl").resolve()
    assert trace_path(tmp_path, "../../etc/passwd") is None
    assert trace_path(tmp_path, "/etc/passwd") is None
    assert trace_path(tmp_path, None) is None
