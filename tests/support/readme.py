"""The README's steps, as the tests of the instructor's steps run them."""
import re

from course import classroom


def readme_steps(heading: str) -> list[str]:
    """The commands of the first bash block under `heading` in the README, comments dropped: what the tests
    of the instructor's steps run as written (test_instructor_workflow.py, test_exchange.py)."""
    readme = (classroom.ROOT / "README.md").read_text("utf-8")
    section = readme.split(f"\n{heading}\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]
