"""`course view`: monolingual copies that keep code, answers and nbgrader metadata untouched."""
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import nbformat
import pytest

from course import classroom
from course.authoring import student_bundle
from course.authoring.glossary import terms
from course.authoring.monolingual import answers_to_prompts, code_to_traditional, monolingual, to_traditional


ROOT = classroom.ROOT
LESSON = ROOT / "notebooks" / "03_module_to.ipynb"
RELEASE = classroom.notebook_path(ROOT, "release", "a1_tensor_to")
CJK = re.compile(r"[\u4e00-\u9fff]")
NOTEBOOKS = student_bundle.student_notebooks(ROOT)  # the twelve lessons and the four release notebooks
ZH_HANT = json.loads((ROOT / "course" / "authoring" / "zh_hant.json").read_text("utf-8"))


def prose(notebook, tag):
    """Prose cells of one language (cells the student writes, answers and predictions, carry both language
    tags and are not prose)."""
    return [c for c in notebook.cells if {tag} == {t for t in c.metadata.get("tags", []) if t.startswith("lang-")}]


def code(source):
    """A cell's code without its comments and string literals (what a 繁體 view may convert)."""
    skipped = (tokenize.COMMENT, tokenize.STRING)
    return [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in skipped]


def untouched(notebook):
    """Everything a view must leave alone, in order: the code cells and answer cells nbgrader tracks, with
    their metadata, as they are; of every other code cell, the code."""
    return [(c.cell_type, c.source, c.metadata["nbgrader"]) if "nbgrader" in c.metadata else code(c.source)
            for c in notebook.cells if c.cell_type == "code" or c.metadata.get("nbgrader", {}).get("solution")]


@pytest.mark.parametrize("path", [LESSON, RELEASE], ids=["lesson", "release"])
@pytest.mark.parametrize("lang, kept, dropped", [("en", "lang-en", "lang-zh"), ("zh", "lang-zh", "lang-en"),
                                                 ("zh-hant", "lang-zh", "lang-en")])
def test_a_view_keeps_one_language_and_all_code(path, lang, kept, dropped):
    original = nbformat.read(path, as_version=4)
    view = monolingual(original, lang)
    assert not prose(view, dropped)
    assert len(prose(view, kept)) == len(prose(original, kept)) > 0
    assert untouched(view) == untouched(original)
    nbformat.validate(view)


def test_english_and_simplified_views_keep_the_text_as_written():
    original = nbformat.read(LESSON, as_version=4)
    for lang, tag in [("en", "lang-en"), ("zh", "lang-zh")]:
        assert [c.source for c in prose(monolingual(original, lang), tag)] == [c.source for c in prose(original, tag)]


def test_traditional_view_is_converted_and_follows_the_glossary():
    view = monolingual(nbformat.read(LESSON, as_version=4), "zh-hant")
    text = "\n".join(c.source for c in prose(view, "lang-zh"))
    assert "參數" in text and to_traditional("参数") == "參數"  # OpenCC alone would write 引數 for 参数
    for mainland in ["單元格", "當前", "“", "全域性", "行動數據"]:  # Taiwan usage (zh_hant.json), not OpenCC's
        assert mainland not in text, mainland
    assert "緩衝區" in text and "裝置" in text
    for term in terms():
        if term["zh"] != term["zh-hant"]:
            assert term["zh"] not in text, f"simplified {term['zh']} left in the Traditional view"


def test_traditional_conversion_overrides_opencc_with_glossary_terms():
    assert to_traditional("参数和叶子张量") == "參數和葉子張量"
    assert to_traditional("默认的内存") == "預設的記憶體"  # OpenCC's own conversion still applies elsewhere


@pytest.mark.parametrize("simplified, taiwan", [
    ("在单元格里运行", "在儲存格裡執行"),            # Taiwan's word for a cell, and 裡 (inside), not 里 (a mile)
    ("移动数据和改变精度都要花时间", "移動資料和改變精度都要花時間"),  # not 行動數據, "mobile data"
    ("16 位激活值", "16 位激勵值"),                 # not 啟用值, "an enabled value"
    ("全局设置", "全域設定"),
    ("“已跳过”", "「已跳過」"),
    ("函数返回一个列表", "函式傳回一個串列"),
    ("当前设备", "目前裝置"),
    ("针对当前构建所支持的", "針對目前的建置所支援的"),
    ("抛出异常", "拋出例外"),
    ("数据并行", "資料平行"),
    ("做归一化，并为评估保存", "做正規化，並為評估儲存"),
    ("实参和轮次", "引數和訓練週期"),                # the glossary's Taiwan forms
    ("不在 CPU 的列表里", "不在 CPU 的清單裡"),        # autocast's op lists are 清單; a Python list is 串列
    ("不报错，却读到错误的数据", "不報錯，卻讀到錯誤的資料"),  # 報錯 stays: 出錯 would contradict the sentence
    ("在子进程中运行", "在子行程中執行"),            # not 子程序, a subroutine
    ("布尔掩码", "布林遮罩"),
    ("有些库会", "有些函式庫會"),
    ("同一个类，是它的子类，可以单独捕获", "同一個類別，是它的子類別，可以單獨捕捉"),
    ("未归一化的特征", "未正規化的特徵"),
    ("一个标志", "一個旗標"),
    ("流水线并行", "管線平行"),
    ("一个数据先用完的 rank", "一個資料先用完的 rank"),
    ("CPU 版构建中", "CPU 建置版本中"),
    ("在每台机器上", "在每台機器上"),
    ("你自己的随机数生成器", "你自己的亂數產生器"),
    ("由两个进程构造批次", "由兩個行程建構批次"),
    ("每块 GPU 和两块 CUDA GPU", "每張 GPU 和兩張 CUDA GPU"),
])
def test_traditional_conversion_follows_taiwan_usage(simplified, taiwan):
    assert to_traditional(simplified) == taiwan


def test_traditional_code_cells_convert_comments_and_strings_only():
    source = 'x = 1  # 数据 / data\nprint(f"参数 {x}", "设备")\ndef f():\n    """返回\n    数据"""\n'
    converted = code_to_traditional(source)
    assert converted == 'x = 1  # 資料 / data\nprint(f"參數 {x}", "裝置")\ndef f():\n    """傳回\n    資料"""\n'
    assert code(converted) == code(source)
    assert code_to_traditional('s = """数据') == 's = """数据'  # a cell Python cannot tokenize: as it is


def test_traditional_view_leaves_cells_nbgrader_tracks_in_simplified():
    original = nbformat.read(RELEASE, as_version=4)
    view = monolingual(original, "zh-hant")
    tracked = [c.source for c in view.cells if c.cell_type == "code" and "nbgrader" in c.metadata]
    assert tracked == [c.source for c in original.cells if c.cell_type == "code" and "nbgrader" in c.metadata]
    assert any(CJK.search(source) for source in tracked)


def test_traditional_view_converts_prediction_cells():
    view = monolingual(nbformat.read(LESSON, as_version=4), "zh-hant")
    predictions = [c.source for c in view.cells if "prediction" in c.metadata.get("tags", [])]
    assert predictions and all("我的預測" in source and "My prediction" in source for source in predictions)


def converted_text(view) -> str:
    """What a 繁體 view converted: its Chinese prose and every other cell nbgrader does not track."""
    return "\n".join(c.source for c in view.cells if "nbgrader" not in c.metadata or c in prose(view, "lang-zh"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_traditional_view_has_no_known_wrong_conversion_or_mainland_word(path):
    text = converted_text(monolingual(nbformat.read(path, as_version=4), "zh-hant"))
    assert CJK.search(text)
    for wrong in [*ZH_HANT["fixes"], *ZH_HANT["taiwan"], *ZH_HANT["quotes"]]:
        assert wrong not in text, f"{path.name}: {wrong} in its 繁體 view"
    simplified = {term["zh"] for term in terms() if term["zh"] != term["zh-hant"]}
    assert not [word for word in simplified if word in text], f"{path.name}: 简体 terms left in the 繁體 view"


@pytest.mark.parametrize("term", terms(), ids=lambda t: t["zh"])
def test_every_glossary_term_converts_to_its_traditional_form(term):
    assert to_traditional(f"这个{term['zh']}。") == f"這個{term['zh-hant']}。"


def test_course_view_writes_copies(tmp_path):
    course = Path(sys.executable).parent / "course"
    done = subprocess.run([str(course), "view", "--lang", "zh-hant", "--out", str(tmp_path), str(LESSON)],
                          capture_output=True, text=True, check=True)
    written = tmp_path / "zh-hant" / LESSON.name
    assert done.stdout.strip() == str(written)
    assert nbformat.read(written, as_version=4).metadata["language"] == "zh-hant"
    shown = re.findall(r"\]\((figures/[^)]+\.svg)\)", written.read_text("utf-8"))
    assert shown, "lesson 3 shows figures / 第 3 课展示图"
    assert all((written.parent / figure).is_file() for figure in shown), "the copy's figures are beside it"
    view = nbformat.read(written, as_version=4)
    assert answers_to_prompts(view) and not any(cell.outputs for cell in answers_to_prompts(view)), (
        "no answer printed under a prompt / 提问下方不显示答案")


def test_a_solved_notebook_viewed_in_traditional_chinese_is_still_gradable(tmp_path):
    course = tmp_path / "course"
    classroom.prepare_course(course, "a1_tensor_to")
    solved = classroom.solved_notebook(course, "a1_tensor_to")
    classroom.submit(course, "a1_tensor_to", "student", monolingual(solved, "zh-hant"))
    classroom.nbgrader(course, "autograde", "a1_tensor_to")
    graded = classroom.scores(course, "a1_tensor_to")["student"]
    assert graded == classroom.max_points("a1_tensor_to")
