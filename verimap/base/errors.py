"""One root for the exceptions verimap raises on purpose.

`except VerimapError` catches every one of them in one clause; each keeps its standard base
too (`PlanError` is a `ValueError`, `ModelError` a `RuntimeError`), so code that caught those
keeps working. Anything else that escapes is a bug.
"""


class VerimapError(Exception):
    """A failure verimap names: bad input, an unavailable part, an exhausted budget."""
