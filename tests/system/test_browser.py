"""The student's path in a real browser: JupyterLab, a release notebook, one right and one wrong answer.

JupyterLab runs from the project environment on a free loopback port with temporary settings; Debian's
Chromium is driven by Playwright (no browser download). Screenshots land in build/test-artifacts/browser/.
"""
import json
import shutil

import pytest
import torch

from course import classroom
from support.services import jupyter

# the student's path, under the student's usual build (README, "CI and GPU runners"): .ci/run runs it there
pytestmark = pytest.mark.ci_cuda_build_only

ASSIGNMENT = "a1_tensor_to"
# one folder per PyTorch build: a plain `make test` runs it under whichever build it is given
ARTIFACTS = classroom.ROOT / "build" / "test-artifacts" / "browser" / f"{'cuda' if torch.version.cuda else 'cpu'}-build"
RIGHT_PICK_DEVICE = '''def pick_device(prefer=None):
    """Right answer typed by the student."""
    if prefer is not None:
        return torch.device(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")'''
WRONG_TO_DEVICE = '''def to_device(x, device):
    """The classic mistake: the result of x.to(device) is thrown away."""
    x.to(device)
    return x'''


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on loopback, in a temporary folder holding the student's release notebook."""
    base = tmp_path_factory.mktemp("lab")
    work, settings = base / "work", base / "settings"
    work.mkdir()
    shutil.copy(classroom.notebook_path(classroom.ROOT, "release", ASSIGNMENT), work)
    news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({"fetchNews": "false"}))  # no "Would you like news?" pop-up, no network
    with jupyter("lab", work, base, f"--LabApp.user_settings_dir={settings}",
                 f"--LabApp.workspaces_dir={base / 'workspaces'}") as server:
        yield {**server, "settings": settings, "work": work}


def open_notebook(page, lab):
    page.goto(f"{lab['url']}/lab/tree/{ASSIGNMENT}.ipynb?token={lab['token']}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)


def type_into_cell(page, starts_with: str, code: str):
    """Replace the source of the code cell whose first line is `starts_with`, as a student would."""
    editor = page.locator(".jp-CodeCell .cm-content", has_text=starts_with).first
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(code)


def code_cell(page, cell_text: str):
    """The code cell whose source contains `cell_text`."""
    return page.locator(".jp-CodeCell", has=page.locator(".cm-content", has_text=cell_text)).first


def screenshot(page, cell, name):
    cell.scroll_into_view_if_needed()
    page.wait_for_timeout(500)  # let the windowed notebook render the cells now in view
    page.screenshot(path=ARTIFACTS / name)


def test_student_sees_passing_and_failing_tests_with_bilingual_diagnostic(page, lab):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    open_notebook(page, lab)
    type_into_cell(page, "def pick_device(prefer=None):", RIGHT_PICK_DEVICE)
    type_into_cell(page, "def to_device(x, device):", WRONG_TO_DEVICE)
    page.locator(".lm-MenuBar-itemLabel").get_by_text("Run", exact=True).click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
    passed = code_cell(page, 'print("pick_device: tests passed')
    failed = code_cell(page, 'print("to_device: tests passed')
    passed.locator(".jp-OutputArea").get_by_text("pick_device: tests passed / 测试通过").wait_for(timeout=120_000)
    failed.locator(".jp-OutputArea").get_by_text("came back unchanged", exact=False).wait_for(timeout=120_000)
    # textContent, not innerText: JupyterLab does not paint cells scrolled out of view
    shown = "\n".join(failed.locator(".jp-OutputArea-output").all_text_contents())
    assert "AssertionError" in shown
    assert "Tensor.to` is out-of-place" in shown and "返回的是原来那个张量" in shown
    screenshot(page, passed, "en-right-answer.png")
    screenshot(page, failed, "en-wrong-answer.png")


def test_jupyterlab_speaks_chinese_when_the_language_is_zh_cn(page, lab):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    settings = lab["settings"] / "@jupyterlab" / "translation-extension" / "plugin.jupyterlab-settings"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"locale": "zh_CN"}))
    try:
        open_notebook(page, lab)
        menus = page.locator(".lm-MenuBar-itemLabel")
        menus.filter(has_text="文件").first.wait_for(timeout=30_000)
        labels = menus.all_inner_texts()
        assert "文件" in labels and "编辑" in labels, labels
        page.locator(".lm-MenuBar-itemLabel").get_by_text("文件", exact=True).click()
        page.wait_for_timeout(300)
        page.screenshot(path=ARTIFACTS / "zh-cn-menus.png")
    finally:
        settings.unlink()
