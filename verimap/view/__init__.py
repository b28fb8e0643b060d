"""`verimap view`: a run's trace, or eval directories, as one static, offline HTML file."""

from verimap.view.report import build_report, default_output, render_html, write_report
from verimap.view.svg import ViewError

__all__ = ["ViewError", "build_report", "default_output", "render_html", "write_report"]
