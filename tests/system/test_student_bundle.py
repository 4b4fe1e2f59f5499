"""The student bundle (`make student-bundle`, course/authoring/student_bundle.py): what a student installs.

It must hold no solution and no hidden test, nothing from source/, tests/ or the instructor's `course`
package; its `autograder` package (copied whole) must work on its own, and `nbgrader validate` must run
a release notebook's tests from the bundle in an environment that has neither the repository nor bubblewrap.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.messages import catalogue
from course import classroom
from course.authoring import monolingual, student_bundle
from support.messages import shows
from support.notebooks import hidden_lines
from support.services import jupyter

# what a student installs and runs, under the student's usual build (README, "CI and GPU runners"): .ci/run runs it there
pytestmark = pytest.mark.ci_cuda_build_only

ROOT = classroom.ROOT


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    dest = tmp_path_factory.mktemp("bundle") / "student-bundle"
    archive = student_bundle.build(dest)
    return dest, archive


@pytest.fixture(scope="module")
def student_python(tmp_path_factory):
    """A student's environment: this environment's packages, but not the repository's `autograder`
    (its editable install is a .pth hook, which a plain path entry does not run) and no `bwrap` on PATH."""
    env = tmp_path_factory.mktemp("student-env")
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(env)],
                   check=True)
    site_packages = Path(sysconfig.get_paths(vars={"base": str(env), "platbase": str(env)})["purelib"])
    (site_packages / "packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env / "bin" / "python"


def bundle_files(dest: Path) -> list[Path]:
    return sorted(p for p in dest.rglob("*") if p.is_file())


def shown_lines(path: Path) -> set[str]:
    """Every stripped line a file holds; a notebook's lines are its cells' sources and outputs."""
    if path.suffix == ".ipynb":
        notebook = nbformat.read(path, as_version=4)
        text = "\n".join([c.source for c in notebook.cells] +
                         [json.dumps(c.get("outputs", []), ensure_ascii=False) for c in notebook.cells])
    elif path.suffix in (".svg", ".gz"):
        return set()
    else:
        text = path.read_text("utf-8")
    return {line.strip() for line in text.splitlines()}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def secret():
    """Lines that stand only inside the solutions and hidden tests of the source notebooks: never in
    their visible parts, the lessons or the `autograder` package (common idioms such as
    `def __init__(self):` appear there and give nothing away)."""
    sources = [nbformat.read(p, as_version=4) for p in sorted((ROOT / "source").glob("*/*.ipynb"))]
    hidden = set().union(*(hidden_lines(s) for s in sources))
    public = set().union(*(shown_lines(p) for p in sorted((ROOT / "notebooks").glob("*.ipynb"))),
                         *(shown_lines(p) for p in sorted((ROOT / "autograder").rglob("*.py"))))
    for source in sources:  # lines visible in any source notebook (another assignment's visible test)
        public |= {line.strip() for cell in source.cells for line in cell.source.splitlines()} - \
            hidden_lines(source)
    found = {line for line in hidden - public if len(line) > 8}
    assert len(found) > 50, "nothing to look for / 没有可检查的内容"  # the check means something only then
    return found


def leaks(folder: Path, secret: set[str]) -> dict[str, list[str]]:
    found = {str(p.relative_to(folder)): sorted(shown_lines(p) & secret)[:3] for p in bundle_files(folder)}
    return {path: lines for path, lines in found.items() if lines}


def test_bundle_holds_no_solution_or_hidden_test(built, secret):
    dest, _ = built
    assert not leaks(dest, secret), f"the bundle gives answers away / 学生包泄露了答案: {leaks(dest, secret)}"


def test_a_leaked_solution_would_be_seen(tmp_path, secret):
    (tmp_path / "a1.ipynb").write_bytes(classroom.notebook_path(ROOT, "source", "a1_tensor_to").read_bytes())
    assert leaks(tmp_path, secret), "the leak check sees nothing / 泄露检查什么也没发现"


def test_bundle_holds_nothing_from_source_tests_or_grading(built):
    dest, archive = built
    instructor_only = {digest(p): p for folder in ("source", "tests", "course") for p in (ROOT / folder).rglob("*")
                       if p.is_file() and p.stat().st_size > 0}
    copied = [f"{p.relative_to(dest)} = {instructor_only[digest(p)].relative_to(ROOT)}"
              for p in bundle_files(dest) if digest(p) in instructor_only]
    assert not copied, f"files from source/, tests/ or course/ / 来自 source/、tests/ 或 course/ 的文件: {copied}"
    assert not (dest / "course").exists(), "the instructor's package shipped / 教师端的包被打包了"
    shipped = {p.relative_to(dest / "autograder") for p in bundle_files(dest / "autograder")}
    kept = {p.relative_to(ROOT / "autograder") for p in bundle_files(ROOT / "autograder") if "__pycache__" not in p.parts}
    assert shipped == kept, f"not autograder/ as it is / 与 autograder/ 不同: {sorted(shipped ^ kept)}"
    assert "use_for_nbgrader" not in (dest / "nbgrader_config.py").read_text("utf-8")
    with tarfile.open(archive) as tar:
        names = {Path(n).relative_to("torch-to-student") for n in tar.getnames() if n != "torch-to-student"}
    assert {p.relative_to(dest) for p in bundle_files(dest)} <= names, "the archive lacks files / 压缩包缺少文件"


def test_bundle_has_every_lesson_figure_and_assignment(built):
    dest, _ = built
    for pattern in ("notebooks/*.ipynb", "notebooks/figures/*.svg", "release/*/*.ipynb"):
        expected = {p.relative_to(ROOT) for p in ROOT.glob(pattern)}
        assert expected and expected <= {p.relative_to(dest) for p in dest.glob(pattern)}, (
            f"missing / 缺少 {pattern}")


def test_the_bundles_lessons_print_no_answer_under_a_prediction(built):
    dest, _ = built
    for lesson in sorted((dest / "notebooks").glob("*.ipynb")):
        notebook = nbformat.read(lesson, as_version=4)
        answers = monolingual.answers_to_prompts(notebook)
        assert answers and not any(cell.outputs for cell in answers), lesson.name
        assert any(cell.outputs for cell in notebook.cells if cell.cell_type == "code"), "the rest keeps its outputs"


def test_package_imports_on_its_own(built, student_python):
    dest, _ = built
    outside = subprocess.run([student_python, "-c", "import autograder"], cwd="/", capture_output=True)
    assert outside.returncode != 0, "the student environment must not see the repository / 学生环境不应看到仓库"
    modules = sorted(".".join(p.relative_to(dest).with_suffix("").parts).removesuffix(".__init__")
                     for p in (dest / "autograder").rglob("*.py"))  # autograder, autograder.checks.core, ...
    code = (f"import {', '.join(modules)}\n"
            f"assert autograder.__file__.startswith({str(dest)!r}), autograder.__file__\n"
            "from autograder.messages import catalogue; assert 'not_answered' in catalogue()")
    done = subprocess.run([student_python, "-c", code], cwd="/", capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(dest)})
    assert done.returncode == 0, f"the bundle's package does not import / 学生包的模块无法导入:\n{done.stderr}"


def test_student_environment_installs_the_package_with_its_messages(built, tmp_path):
    """`pip install .` in the bundle (start.py and its Makefile do) builds the package, its data and the
    Jupyter configuration that turns the instructor tools off."""
    dest, _ = built
    shutil.copytree(dest, tmp_path / "bundle")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-w", tmp_path / "wheel", tmp_path / "bundle"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the bundle's pyproject.toml does not build / 学生包的 pyproject.toml 无法构建:\n{done.stderr}"
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        packaged = {name.removeprefix("autograder/") for name in archive.namelist() if name.startswith("autograder/")}
        configuration = {name.split(".data/data/", 1)[1] for name in archive.namelist() if ".data/data/" in name}
    assert configuration == {"etc/jupyter/jupyter_server_config.d/zz-course-students.json",
                             "etc/jupyter/labconfig/page_config.json"}, (
        f"the Jupyter configuration is not installed / Jupyter 配置没有被安装: {configuration}")
    shipped = {p.relative_to(dest / "autograder").as_posix() for p in (dest / "autograder").rglob("*") if p.is_file()}
    assert packaged == shipped, f"packaged / 打包了: {sorted(packaged ^ shipped)}"


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> Path:
    """The bundle installed the way its README says, `python start.py --install`, into its own .venv: a
    real `pip install .`, no JUPYTER_CONFIG_PATH. The environment already holds what installing the
    requirements would put there: this environment's packages (one path entry, so that pip installs
    only the course) and their Jupyter files (nbgrader's own nbgrader.json that turns its extensions on,
    nbconvert's templates)."""
    dest, _ = built
    bundle = tmp_path_factory.mktemp("installed") / "student-bundle"
    shutil.copytree(dest, bundle)
    environment = bundle / ".venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(environment)], check=True)
    site_packages = Path(sysconfig.get_paths(vars={"base": str(environment), "platbase": str(environment)})["purelib"])
    (site_packages / "packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.copytree(Path(sys.prefix) / "etc" / "jupyter", environment / "etc" / "jupyter")  # nbgrader.json, …
    (environment / "share").mkdir(exist_ok=True)
    (environment / "share" / "jupyter").symlink_to(Path(sys.prefix) / "share" / "jupyter")  # nbconvert's templates, …
    done = subprocess.run([sys.executable, "start.py", "--install"], cwd=bundle, capture_output=True, text=True,
                          env=student_env(bundle), timeout=600)
    assert done.returncode == 0, f"start.py --install:\n{done.stdout}{done.stderr}"
    return bundle


def student_env(bundle: Path) -> dict:
    """A student's shell: no JUPYTER_* variable of this test run, a home of their own."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_", "PYTHONPATH"))},
            "HOME": str(bundle)}


def test_installing_the_bundle_turns_the_instructor_tools_off(installed):
    """In the installed environment (no JUPYTER_CONFIG_PATH): nbgrader's formgrader, Create Assignment
    and course list are off, its assignment list and Validate stay on."""
    code = ("from jupyter_core.paths import jupyter_config_path\n"
            "from jupyter_server.extension.config import ExtensionConfigManager\n"
            "from jupyterlab_server.config import get_static_page_config\n"
            "import json\n"
            "server = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()\n"
            "lab = get_static_page_config(level='all')\n"
            "print(json.dumps({'server': server, 'lab': lab.get('disabledExtensions', {})}))\n")
    done = subprocess.run([installed / ".venv" / "bin" / "python", "-c", code], capture_output=True, text=True,
                          env=student_env(installed), cwd=installed)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    server = seen["server"]
    assert not server["nbgrader.server_extensions.formgrader"] and not server["nbgrader.server_extensions.course_list"], (
        f"the formgrader is on for students / 学生环境中 formgrader 是开启的: {server}")
    assert server["nbgrader.server_extensions.assignment_list"] and server["nbgrader.server_extensions.validate_assignment"], (
        f"students cannot fetch, submit or validate / 学生无法获取、提交或验证: {server}")
    assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment"} <= {
        name for name, off in seen["lab"].items() if off}, f"instructor tools on / 教师工具未关闭: {seen['lab']}"


def test_the_students_jupyterlab_has_no_formgrader(installed, tmp_path):
    """`python start.py` (what `make lab` runs) starts JupyterLab from the installed environment: the
    formgrader's API answers 404, the assignment list answers."""
    with jupyter("lab", installed, tmp_path, program=[sys.executable, "start.py"], env=student_env(installed)) as server:
        url, token = server["url"], server["token"]

        def status(path):
            try:
                return urllib.request.urlopen(f"{url}{path}?token={token}", timeout=30).status
            except urllib.error.HTTPError as error:
                return error.code

        assert status("/formgrader/api/status") == 404, "the formgrader answers students / formgrader 对学生开放"
        assert status("/assignments") != 404, "no assignment list for students / 学生没有作业列表"


def test_the_bundle_pins_the_graders_torch(built):
    dest, _ = built
    dependencies = tomllib.loads((dest / "pyproject.toml").read_text("utf-8"))["project"]["dependencies"]
    assert f"torch=={torch.__version__.split('+')[0]}" in dependencies, (
        f"students would run another PyTorch than the grader / 学生使用的 PyTorch 与评分程序不同: {dependencies}")


def test_release_notebook_validates_from_the_bundle_without_bubblewrap(built, student_python):
    """A student's solved a1 notebook in the bundle passes `nbgrader validate`: its visible tests run
    with the bundle's `autograder`, with no bwrap on PATH and no sandbox in the configuration."""
    dest, _ = built
    assignment = "a1_tensor_to"
    notebook = dest / "release" / assignment / f"{assignment}.ipynb"
    nbformat.write(classroom.solved_notebook(ROOT, assignment), notebook)
    env = {"PATH": str(student_python.parent), "HOME": str(dest), "LANG": "C.UTF-8", "PYTHONPATH": str(dest)}
    done = subprocess.run([student_python, "-m", "nbgrader", "validate", notebook.relative_to(dest)], cwd=dest,
                          capture_output=True, text=True, env=env, timeout=300)
    shown = done.stdout + done.stderr
    assert "Success! Your notebook passes all the tests." in shown, f"validate / 验证:\n{shown}"
    assert "without encryption" not in shown, f"ipykernel's TCP warning / ipykernel 的 TCP 警告:\n{shown}"


def test_validate_in_the_bundle_shows_a_diagnostic_whole(built, student_python, tmp_path):
    """nbgrader's Validator cuts each line at 90 characters unless the configuration says otherwise: the
    student's configuration (deploy/student, as the instructor's) shows the fix at the end of a hint."""
    dest, _ = built
    assignment = "a1_tensor_to"
    bundle = tmp_path / "bundle"
    shutil.copytree(dest, bundle)
    [mistake] = [a for a in classroom.load_corpus(assignment) if a.id == "to_device_forgot_assignment"]
    notebook = bundle / "release" / assignment / f"{assignment}.ipynb"
    nbformat.write(classroom.solved_notebook(ROOT, assignment, [mistake]), notebook)
    env = {"PATH": str(student_python.parent), "HOME": str(bundle), "LANG": "C.UTF-8", "PYTHONPATH": str(bundle)}
    done = subprocess.run([student_python, "-m", "nbgrader", "validate", notebook.relative_to(bundle)], cwd=bundle,
                          capture_output=True, text=True, env=env, timeout=300)
    shown = done.stdout + done.stderr
    template = catalogue()[mistake.diagnostic]["en"]
    ending = re.split(r"\{[^}]*\}", template)[-1].strip()
    assert len(template) > 90 and ending, "the check needs a long message / 检查需要一条长消息"
    assert shows(shown, mistake.diagnostic) and ending in shown, f"the hint is cut / 提示被截断:\n{shown}"
