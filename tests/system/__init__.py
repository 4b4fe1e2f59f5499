"""tests/system/ as a package, so that a test file may have the name of one in another tier (pytest: "Choosing a
test layout"); its tier marker comes from tests/conftest.py."""
