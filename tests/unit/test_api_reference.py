"""The API reference renders: Markdown cross-references, links, one page per family.

The site's reference (docs/api/*.md) is rendered by mkdocstrings from the docstrings:
Sphinx roles (``:class:`X```) and ``docs/<page>.md`` citations would show as literal
text there, so public docstrings use autorefs cross-references (``[`X`][pytest_dsh_replay.X]``)
and Markdown links relative to the API pages.
"""

from __future__ import annotations

import ast
import inspect
import re

from support.paths import REPO
from support.public_docs import PUBLIC_MODULES, public_docstrings

import pytest_dsh_replay
from pytest_dsh_replay._fixture.dsh_replay import DshReplay

API_PAGES = REPO / "docs" / "api"
PACKAGE = REPO / "pytest_dsh_replay"
# A Sphinx role, or the "~" of a Sphinx target: neither means anything to mkdocstrings.
_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|data|attr|exc|mod|obj|const):`|`~pytest_dsh_")
_ENTRY = re.compile(r"^::: pytest_dsh_replay\.(\w+)\s*$", re.M)
# A docstring's link to a page: [docs/<page>.md#<anchor>](<relative target>).
_PAGE_LINK = re.compile(r"\[docs/([\w/-]+\.md(?:#[\w.:-]+)?)\]\(([^)]*)\)")
# A citation of a page that is not a link's text.
_BARE_CITATION = re.compile(r"(?<![\[/\w])docs/[\w/-]+\.md")


def _roles(named_docs: list[tuple[str, str]]) -> list[str]:
    return [name for name, doc in named_docs if _ROLE.search(doc)]


def test_no_public_docstring_has_a_sphinx_role() -> None:
    docs = list(public_docstrings())
    assert len(docs) > 300  # the walk reaches the members, not only the names
    assert _roles(docs) == []


def test_the_role_rule_sees_a_role_and_a_tilde_target() -> None:
    class Sample:
        """Built by :func:`load_scenario`; see `~pytest_dsh_replay.Scenario`."""

    plain = "Built by [`load_scenario`][pytest_dsh_replay.load_scenario]."
    assert _roles([("Sample", inspect.getdoc(Sample) or ""), ("plain", plain)]) == ["Sample"]


def test_no_module_of_the_package_has_a_sphinx_role() -> None:
    """Comments and private docstrings too: no role is left to leak into the reference."""
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if _ROLE.search(line)
    ]
    assert found == []


def _relative_from_api(citation: str) -> str:
    """Where ``docs/<citation>`` is from a page of docs/api/."""
    return citation[len("api/") :] if citation.startswith("api/") else f"../{citation}"


def _link_problems(named_docs: list[tuple[str, str]]) -> list[str]:
    problems = []
    for name, doc in named_docs:
        for m in _PAGE_LINK.finditer(doc):
            if m.group(2) != _relative_from_api(m.group(1)):
                problems.append(f"{name}: {m.group(0)}")
        if _BARE_CITATION.search(_PAGE_LINK.sub("", doc)):
            problems.append(f"{name}: a docs/ citation that is not a link")
    return problems


def test_public_docstrings_link_the_pages_they_cite() -> None:
    assert _link_problems(list(public_docstrings())) == []


def _package_docstrings() -> list[tuple[str, str]]:
    """(``file:line``, text) of every docstring of the package, attribute docstrings too."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if not isinstance(body, list):
                continue
            for stmt in body:
                if (
                    isinstance(stmt, ast.Expr)
                    and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)
                ):
                    found.append((f"{path.name}:{stmt.lineno}", stmt.value.value))
    return found


def test_every_docstring_of_the_package_links_the_pages_it_cites() -> None:
    # Private modules' docstrings are read in editors and by the architecture page's readers.
    assert _link_problems(_package_docstrings()) == []


def test_the_link_rule_sees_plain_text_and_a_wrong_target() -> None:
    docs = [
        (
            "good",
            "See [docs/wires.md#clients](../wires.md#clients) and [docs/api/store.md](store.md).",
        ),
        ("plain", "See docs/wires.md#clients."),
        ("wrong", "See [docs/wires.md#clients](wires.md#clients)."),
    ]
    assert _link_problems(docs) == [
        "plain: a docs/ citation that is not a link",
        "wrong: [docs/wires.md#clients](wires.md#clients)",
    ]


def _entries() -> list[tuple[str, str]]:
    """(page, name) of every ``::: pytest_dsh_replay.<name>`` of the API pages."""
    return [
        (page.name, name)
        for page in sorted(API_PAGES.glob("*.md"))
        for name in _ENTRY.findall(page.read_text(encoding="utf-8"))
    ]


def test_every_api_entry_names_a_public_name_on_a_page_of_its_family() -> None:
    entries = _entries()
    assert len({page for page, _ in entries}) >= 8  # one page per family, not one page
    public = set(pytest_dsh_replay.__all__) | set(PUBLIC_MODULES)
    assert [f"{page}: {name}" for page, name in entries if name not in public] == []


def test_the_reference_shows_constructors_and_wrapped_signatures() -> None:
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    for option in ("merge_init_into_class: true", "separate_signature: true", "line_length:"):
        assert option in config, option
    nav = config.split("\nnav:\n", 1)[1].split("\n\n", 1)[0]
    pages = sorted(p.name for p in API_PAGES.glob("*.md"))
    assert [p for p in pages if f"api/{p}" not in nav] == []


def test_the_client_methods_name_their_sdk_types() -> None:
    # Annotations stay strings (the SDKs are imported for type checkers only).
    returns = {
        name: inspect.signature(getattr(DshReplay, name)).return_annotation
        for name in (
            "openai_client",
            "async_openai_client",
            "anthropic_client",
            "async_anthropic_client",
            "gemini_client",
            "async_gemini_client",
        )
    }
    assert returns == {
        "openai_client": "OpenAI",
        "async_openai_client": "AsyncOpenAI",
        "anthropic_client": "Anthropic",
        "async_anthropic_client": "AsyncAnthropic",
        "gemini_client": "GeminiClient",
        "async_gemini_client": "AsyncGeminiClient",
    }
    source = (PACKAGE / "_fixture" / "dsh_replay.py").read_text(encoding="utf-8")
    type_checking = source.split("if TYPE_CHECKING:", 1)[1].split("\n\n\n", 1)[0]
    assert "from openai import" in type_checking  # not imported at run time
    assert DshReplay.__annotations__["model"] == "RecordingModel"


def test_the_error_classes_declare_their_attributes() -> None:
    errors = [
        getattr(pytest_dsh_replay, name)
        for name in pytest_dsh_replay.__all__
        if name.endswith("Error")
    ]
    for error in errors:
        doc = inspect.getdoc(error) or ""
        if "Attributes:" not in doc:
            continue
        section = doc.split("Attributes:", 1)[1]
        documented = re.findall(r"^    (\w+):", section, re.M)
        declared = {k for cls in error.__mro__ for k in getattr(cls, "__annotations__", {})}
        assert set(documented) <= declared, error.__name__


# Names a signature may show that are not this package's: the standard library's, typing's
# and the SDK clients' (whose own docs describe them).
_FOREIGN = frozenset(
    {
        "Any", "AsyncIterator", "Awaitable", "Callable", "Final", "Generator", "Iterable",
        "Iterator", "Literal", "Mapping", "None", "Path", "PathLike", "Sequence", "Self",
        "TypeVar", "True", "False", "Exception", "BaseException", "Pattern",
        "ForwardRef",  # a NamedTuple's fields as Python shows them
        "OpenAI", "AsyncOpenAI", "Anthropic", "AsyncAnthropic", "GeminiClient",
        "AsyncGeminiClient",
    }
)  # fmt: skip


def _signatures() -> list[tuple[str, str]]:
    """``(name, signature)`` of every public callable and of its public methods."""
    found = []
    for name in pytest_dsh_replay.__all__:
        value = getattr(pytest_dsh_replay, name)
        members = [(name, value)]
        if inspect.isclass(value):
            members += [
                (f"{name}.{attr}", member)
                for attr, member in vars(value).items()
                if not attr.startswith("_") and callable(member)
            ]
        for shown, member in members:
            try:
                found.append((shown, str(inspect.signature(member))))
            except (TypeError, ValueError):  # no signature (a type alias, a constant)
                continue
    return found


def test_every_type_a_signature_names_is_public() -> None:
    public = set(pytest_dsh_replay.__all__)
    private = sorted(
        f"{shown}: {word}"
        for shown, signature in _signatures()
        for word in set(re.findall(r"\b[A-Z]\w+", signature))
        if word not in public and word not in _FOREIGN
    )
    assert private == []


def test_the_client_method_names_every_wire() -> None:
    from pytest_dsh_replay._wire.table import WIRES

    doc = DshReplay.client.__doc__ or ""
    assert [w.name for w in WIRES if f'``"{w.name}"``' not in doc] == []
