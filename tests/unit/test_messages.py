import re
import string

import pytest

from autograder.messages import CHINESE_SETTING, Bilingual, catalogue, message, text
from course.authoring.monolingual import to_traditional


CJK = re.compile(r"[\u4e00-\u9fff]")
KEYS = sorted(catalogue())


@pytest.mark.parametrize("key", KEYS)
def test_every_message_has_english_and_chinese(key):
    entry = catalogue()[key]
    assert set(entry) == {"en", "zh", "zh-hant"}, f"{key}: languages {sorted(entry)}"
    assert entry["en"].strip() and not CJK.search(entry["en"]), f"{key}: English text missing or not English"
    assert CJK.search(entry["zh"]), f"{key}: Chinese text missing or untranslated"


@pytest.mark.parametrize("key", KEYS)
def test_both_languages_use_the_same_fields(key):
    fields = {lang: {f for _, f, _, _ in string.Formatter().parse(t) if f} for lang, t in catalogue()[key].items()}
    assert fields["en"] == fields["zh"] == fields["zh-hant"], key


@pytest.mark.parametrize("key", KEYS)
def test_traditional_form_is_the_conversion_of_the_simplified_one(key):
    entry = catalogue()[key]
    assert entry["zh-hant"] == to_traditional(entry["zh"]), (
        f"{key}: messages.json's zh-hant is not its zh converted: run `make messages`\n"
        f"{key}：messages.json 的 zh-hant 不是其 zh 的转换结果，请运行 `make messages`")


def test_course_chinese_setting_shows_traditional_messages(monkeypatch):
    monkeypatch.setenv(CHINESE_SETTING, "zh-Hant")
    hint = text("dtype_hint_keep")
    shown = text("wrong_dtype", what="w", expected="float32", found="float16", hint=hint)
    assert shown.zh == catalogue()["wrong_dtype"]["zh-hant"].format(
        what="w", expected="float32", found="float16", hint=catalogue()["dtype_hint_keep"]["zh-hant"])
    assert shown.en == catalogue()["wrong_dtype"]["en"].format(
        what="w", expected="float32", found="float16", hint=catalogue()["dtype_hint_keep"]["en"])
    assert "資料型別" in shown.zh and "数据类型" not in shown.zh


@pytest.mark.parametrize("value", [None, "", "zh", "zh-hans", "traditional"])
def test_messages_are_simplified_unless_traditional_is_asked_for(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(CHINESE_SETTING, raising=False)
    else:
        monkeypatch.setenv(CHINESE_SETTING, value)
    assert text("wrong_dtype", what="w", expected="a", found="b", hint="").zh == catalogue()["wrong_dtype"]["zh"].format(
        what="w", expected="a", found="b", hint="")


def test_message_is_english_line_then_chinese_line():
    shown = message("wrong_device", what="f(x)", expected="meta", found="cpu")
    english, chinese = shown.split("\n")
    assert english.startswith("f(x): expected device meta, found cpu.")
    assert chinese.startswith("f(x)：期望设备为 meta，实际为 cpu。")


def test_bilingual_fields_fill_each_language_with_its_own_text():
    hint = text("dtype_hint_keep")
    shown = text("wrong_dtype", what="w", expected="float32", found="float16", hint=hint)
    assert shown.en.endswith(hint.en) and shown.zh.endswith(hint.zh)
    assert isinstance(shown, Bilingual)
