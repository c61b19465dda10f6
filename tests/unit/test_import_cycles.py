"""No import cycle between the package's modules, deferred and type-checking imports included."""

from __future__ import annotations

import grimp  # import-linter's graph library (a test dependency)


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    imported = sorted(graph.find_modules_directly_imported_by(target))
                    work.append((target, iter(imported)))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _graph() -> grimp.ImportGraph:
    # grimp reads every import statement, in functions and TYPE_CHECKING blocks too.
    return grimp.build_graph("pytest_dsh_replay", cache_dir=None)


def test_no_two_modules_import_each_other_even_deferred() -> None:
    graph = _graph()
    cycles = [", ".join(component) for component in _cycles(graph)]
    assert cycles == [], "modules that import each other: " + "; ".join(cycles)


def test_the_cycle_finder_names_a_cycle_through_a_deferred_import() -> None:
    graph = _graph()
    graph.add_import(
        importer="pytest_dsh_replay._format.events",
        imported="pytest_dsh_replay._store.session",
        line_number=1,
        line_contents="from .._store.session import Session  # deferred, in a function",
    )
    (component,) = _cycles(graph)
    assert "pytest_dsh_replay._format.events" in component
    assert "pytest_dsh_replay._store.session" in component
