"""The loader's native module (native/, Rust): built by make setup and ``pip install``."""

def float_text(value: float) -> str:
    """The text Python's ``repr`` gives ``value``."""
