"""The README's code examples, as the tests that run them read them."""

from __future__ import annotations

import re

from support.paths import README


def first_test_code(heading: str = "## Your first test") -> str:
    section = README.read_text(encoding="utf-8").split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"the README lost the example under {heading}"
    return match.group(1)
