"""Helpers the tests import (`from support.paths import BIN`): plain modules, no fixtures. Fixtures and hooks
live in tests/conftest.py, where pytest finds them without an import. `support` is importable because
pyproject.toml's pytest settings put tests/ on sys.path (`pythonpath`), under any import mode."""
