"""The glossary (course/authoring/glossary.json) and the checks built on it: every Chinese text in the course uses
the glossary's word for each term, never a known wrong variant or calque."""
import json
import re
from pathlib import Path

import nbformat
import pytest

from course.authoring.glossary import missing_terms, terms, wrong_words


ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"device": "设备", "tensor": "张量", "parameter": "参数", "buffer": "缓冲区", "dtype": "数据类型",
            "in-place": "原地", "leaf tensor": "叶子张量", "pinned memory": "锁页内存", "mixed precision": "混合精度",
            "non-blocking": "非阻塞",
            # issue 13: the recurring terms a native reviewer found translated in several ways
            "batch": "批次", "namedtuple": "命名元组", "notebook": "notebook", "function argument": "实参",
            "epoch": "轮次", "out-of-place": "非原地", "host": "主机", "master weights": "主权重",
            "running statistics": "滑动统计量", "submodule": "子模块", "transfer": "传输", "copy": "复制", "rank": "rank"}
NOTEBOOKS = sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("source/*/*.ipynb"), *ROOT.glob("release/*/*.ipynb")])


def chinese_texts(path: Path) -> list[tuple[str, str]]:
    """(where, text) for every place of `path` that holds Chinese a reader sees: prose and code of a
    notebook (comments and messages), the Chinese side of every message, the whole README and the students' README."""
    if path.suffix == ".ipynb":
        return [(f"cell {index}", cell.source) for index, cell in enumerate(nbformat.read(path, as_version=4).cells)
                if cell.cell_type == "code" or "lang-zh" in cell.metadata.get("tags", [])]
    if path.suffix == ".json":
        return [(key, entry["zh"]) for key, entry in json.loads(path.read_text("utf-8")).items()
                if isinstance(entry, dict) and "zh" in entry]
    return [("", path.read_text("utf-8"))]


@pytest.mark.parametrize("english, chinese", REQUIRED.items())
def test_the_briefs_terms_are_in_the_glossary(english, chinese):
    assert any(t["zh"] == chinese and not missing_terms(english, chinese) for t in terms())


@pytest.mark.parametrize("term", terms(), ids=lambda t: t["zh"])
def test_every_term_has_all_three_forms_and_its_wrong_variants_are_not_its_word(term):
    assert {"en", "zh", "zh-hant"} <= set(term) <= {"en", "zh", "zh-hant", "also", "avoid"}
    assert all(term[key] for key in ("en", "zh", "zh-hant"))
    for avoid in term.get("avoid", []):
        assert not re.search(avoid, term["zh"]), f"{avoid!r} would flag the glossary's own word {term['zh']}"


def test_an_english_term_requires_its_chinese_word():
    assert missing_terms("Move the buffers to the device.", "把缓冲区移到设备上。") == []
    assert missing_terms("Move the buffers to the device.", "把缓存移到设备上。") == ["buffers? → 缓冲区"]
    assert missing_terms("Each batch goes to every rank.", "每个批数据都送到每个进程。") == [
        "batch(?:es)? → 批次", "ranks? → rank"]


def test_a_noun_form_counts_for_its_term():
    assert missing_terms("Each device holds a copy of the model.", "每个设备上都有一份模型副本。") == []
    assert missing_terms("Each device holds a copy of the model.", "每个设备上都有一份模型。") == ["cop(?:y|ies|ied|ying) → 复制"]


def test_terms_inside_words_do_not_count():
    assert missing_terms("The leafy deviceful parameterisation", "无") == []
    assert missing_terms("BatchNorm on localhost", "无") == []


def test_a_data_race_is_not_a_race_condition():
    """数据竞争 is the standard term for a data race; a race in general stays 竞态条件."""
    assert missing_terms("reported as a possible data race", "报告为可能的数据竞争（data race）") == []
    assert missing_terms("reported as a possible data race", "报告为可能的竞态条件") == ["data races? → 数据竞争"]
    assert missing_terms("this is a race", "这是一个竞态条件") == []


def test_tensor_cores_are_hardware_not_tensors():
    """NVIDIA's Tensor Cores keep their English name in Chinese text; only a tensor needs 张量."""
    assert missing_terms("Shapes for Tensor Cores; the tensor cores in TF32", "适合 Tensor Core 的形状") == []
    assert missing_terms("A tensor on Tensor Cores", "Tensor Core 上") == ["tensors?(?! cores?\\b) → 张量"]


@pytest.mark.parametrize("wrong, found", [
    ("在这个笔记本里运行", "笔记本 → notebook"),
    ("把批数据移到设备上", "批数据 → 批次"),
    ("一个具名元组", "具名元组 → 命名元组"),
    ("用替身加速器测试", "替身加速器 → 模拟加速器"),
    ("传入关键字参数 `dtype=`", "关键字参数 → 实参"),
    ("`map_location=` 参数", "`map_location=` 参数 → 实参"),
    ("宿主内存", "宿主 → 主机"),
    ("汇合地址是 127.0.0.1", "汇合地址 → 会合地址"),
    ("报告为可能的数据竞态条件", "数据竞态 → 数据竞争"),   # the standard term for a data race (issue 46, T-3)
    ("先去缩放、再裁剪", "去缩放 → 取消缩放"),           # one word for unscale (issue 46, T-2)
    ("知道梯度已经还原", "已经还原 → 取消缩放"),
    ("第一次 `optimizer.step()` 恰好在 Adam 调用 `.item()` 的地方失败",   # exactly where, not by chance
     "恰好在 Adam 调用 `.item()` 的地方 → 当且仅当……时 / 正是在……的地方（exactly when/where: a rule, not a coincidence）"),
])
def test_wrong_variants_and_calques_are_caught(wrong, found):
    assert wrong_words(wrong) == [found]


@pytest.mark.parametrize("right", ["在这个 notebook 里运行", "我的笔记本电脑没有 GPU", "模型的参数", "`dtype=` 实参",
                                   "把批次移到主机上", "会合地址", "一个命名元组"])
def test_the_right_words_are_not_flagged(right):
    assert wrong_words(right) == []


@pytest.mark.parametrize("path", [*NOTEBOOKS, ROOT / "autograder" / "messages.json", ROOT / "README.md",
                                  ROOT / "deploy" / "student" / "README.md"],
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_no_chinese_text_uses_a_wrong_variant_or_a_calque(path):
    found = sorted({f"{where}: {wrong}" for where, text in chinese_texts(path) for wrong in wrong_words(text)})
    assert not found, f"{path.name} / use the glossary's words (course/authoring/glossary.json): {found}"
