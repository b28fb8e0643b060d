"""Tools an executor may call (the calculator, Python in the sandbox), in a registry."""
