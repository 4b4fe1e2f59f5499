"""The course's glossary (glossary.json): one word for one idea, in English, 简体 and 繁體."""
import json
import re
from functools import cache
from importlib import resources


@cache
def terms() -> list[dict]:
    data = json.loads(resources.files(__package__).joinpath("glossary.json").read_text("utf-8"))
    return data["terms"]


def english_pattern(term: dict) -> re.Pattern:
    return re.compile(rf"\b(?:{term['en']})\b", re.IGNORECASE)


def missing_terms(english: str, chinese: str) -> list[str]:
    """Glossary terms the English text uses whose Chinese word the Chinese twin lacks."""
    return [f"{term['en']} → {term['zh']}" for term in terms()
            if english_pattern(term).search(english) and term["zh"] not in chinese]
