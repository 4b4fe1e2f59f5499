"""The course's glossary (glossary.json): one word for one idea, in English, 简体 and 繁體.

Two checks use it: an English prose cell that uses a term needs the term's Chinese word in its Chinese
twin (`missing_terms`), and no Chinese text may use a known wrong variant of a term or a known calque
(`wrong_words`).
"""
import json
import re
from functools import cache
from importlib import resources


@cache
def _data() -> dict:
    return json.loads(resources.files(__package__).joinpath("glossary.json").read_text("utf-8"))


def terms() -> list[dict]:
    return _data()["terms"]


def english_pattern(term: dict) -> re.Pattern:
    return re.compile(rf"\b(?:{term['en']})\b", re.IGNORECASE)


def missing_terms(english: str, chinese: str) -> list[str]:
    """Glossary terms the English text uses whose Chinese word (or an accepted noun form) the Chinese twin lacks."""
    return [f"{term['en']} → {term['zh']}" for term in terms()
            if english_pattern(term).search(english)
            and not any(word in chinese for word in [term["zh"], *term.get("also", [])])]


@cache
def _wrong() -> list[tuple[re.Pattern, str]]:
    """(pattern of a wrong variant, what to write instead), from the terms' `avoid` lists and the calques."""
    wrong = [(re.compile(avoid), term["zh"]) for term in terms() for avoid in term.get("avoid", [])]
    wrong += [(re.compile(calque["avoid"]), calque["use"]) for calque in _data().get("calques", [])]
    return wrong


def wrong_words(chinese: str) -> list[str]:
    """Wrong variants and calques the Chinese text uses, each as 'found → use instead'."""
    return [f"{match.group()} → {use}" for pattern, use in _wrong() for match in pattern.finditer(chinese)]
