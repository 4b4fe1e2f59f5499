"""System packages some tests need (README, "CI and GPU runners"): `make test` installs them; a test that
finds one missing fails, unless COURSE_SKIP_<NAME>=1 says to skip it on purpose."""
import os

import pytest


def missing(name: str, install: str, skip_variable: str):
    """Fail (or skip, when `skip_variable` is set) because `name` is not installed; `install` says how."""
    message = (f"{name} is missing: `make test` installs it ({install}); "
               f"set {skip_variable}=1 to skip this test on purpose.\n"
               f"缺少 {name}：`make test` 会安装它（{install}）；如果有意跳过这个测试，请设置 {skip_variable}=1。")
    if os.environ.get(skip_variable, "") not in ("", "0"):
        pytest.skip(message)
    pytest.fail(message)  # a missing tool never passes silently
