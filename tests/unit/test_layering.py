"""The collection's layering: modules use module_utils and plugins use plugin_utils, never the other way round.
No file under plugins/module_utils or plugins/plugin_utils imports from plugins/modules, and the imports among
module_utils form no circle."""

import ast
import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREFIX = "ansible_collections.nats_edge.fleet.plugins."


def imports(path):
    """The collection's modules a file imports (anywhere in it, also inside functions), as dotted names under
    plugins/ (``module_utils._nsc``)."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            base = node.module[len(PREFIX):]
            if base.count(".") == 0:  # from ...plugins.module_utils import _x, _y
                found.update("%s.%s" % (base, alias.name) for alias in node.names)
            else:
                found.add(base)
        elif isinstance(node, ast.Import):
            found.update(alias.name[len(PREFIX):] for alias in node.names if alias.name.startswith(PREFIX))
    return found


def utils_files():
    return sorted(glob.glob(os.path.join(ROOT, "plugins", "module_utils", "**", "*.py"), recursive=True)
                  + glob.glob(os.path.join(ROOT, "plugins", "plugin_utils", "**", "*.py"), recursive=True))


@pytest.mark.parametrize("path", utils_files(), ids=lambda path: os.path.relpath(path, ROOT))
def test_no_util_imports_from_the_modules(path):
    bad = sorted(name for name in imports(path) if name.startswith("modules"))
    assert not bad, "%s imports %s" % (os.path.relpath(path, ROOT), ", ".join(bad))


def module_utils_graph():
    base = os.path.join(ROOT, "plugins", "module_utils")
    graph = {}
    for path in glob.glob(os.path.join(base, "**", "*.py"), recursive=True):
        name = "module_utils." + os.path.relpath(path, base)[:-3].replace(os.sep, ".")
        name = name[:-len(".__init__")] if name.endswith(".__init__") else name
        graph[name] = set(n for n in imports(path) if n.startswith("module_utils.") and n != name)
    return graph


def circle(graph):
    """One import circle of ``graph`` as a list of names, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_module_utils_imports_form_no_circle():
    graph = module_utils_graph()
    assert len(graph) > 10
    assert circle(graph) is None, " -> ".join(circle(graph))


def test_the_circle_finder_finds_one():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) is None


def one_letter_apart(a, b):
    """Whether ``b`` is ``a`` with one letter added, dropped or changed."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) > len(b):
        a, b = b, a
    for i in range(len(b)):
        if len(a) == len(b) and a[:i] + a[i + 1:] == b[:i] + b[i + 1:]:
            return True
        if len(a) < len(b) and a == b[:i] + b[i + 1:]:
            return True
    return False


def test_no_two_module_utils_names_differ_by_one_letter():
    base = os.path.join(ROOT, "plugins", "module_utils")
    names = sorted(set(os.path.splitext(os.path.basename(p))[0].lstrip("_")
                       for p in glob.glob(os.path.join(base, "**", "*.py"), recursive=True)
                       if not p.endswith("__init__.py"))
                   | set(os.path.basename(p).lstrip("_") for p in glob.glob(os.path.join(base, "*", ""))
                         if not p.rstrip(os.sep).endswith("__pycache__")))
    close = [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if one_letter_apart(a, b)]
    assert not close, close


def test_the_one_letter_check_finds_a_pair():
    assert one_letter_apart("nsc_export", "nsc_exports")
    assert one_letter_apart("js_info", "js_infa")
    assert not one_letter_apart("export", "export_claims")


def test_the_unit_tests_mirror_the_plugins():
    """tests/unit/plugins/<dir>/test_<name>.py tests plugins/<dir>/<name>.py (or _<name>.py); a plugin with more than
    one test file names the others test_<name>_<topic>.py."""
    base = os.path.join(ROOT, "tests", "unit", "plugins")
    tests = glob.glob(os.path.join(base, "**", "test_*.py"), recursive=True)
    assert len(tests) > 10
    for path in tests:
        folder = os.path.relpath(os.path.dirname(path), base)
        name = os.path.basename(path)[len("test_"):-len(".py")]
        plugins = [os.path.basename(p)[:-len(".py")].lstrip("_")
                   for p in glob.glob(os.path.join(ROOT, "plugins", folder, "*.py"))]
        assert any(name == plugin or name.startswith(plugin + "_") for plugin in plugins if plugin), (
            "%s tests no file of plugins/%s" % (os.path.relpath(path, ROOT), folder))
