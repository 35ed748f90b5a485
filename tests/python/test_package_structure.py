"""The Python package's structure, read from its source with ast: no import
circle among its modules (imports inside functions counted too, so none can
hide one), and one dtype table, made from the native module's list."""

import ast
from pathlib import Path

import torch

import tdstore
from tdstore import _dtypes, _native

PACKAGE = Path(tdstore.__file__).parent


def _modules() -> dict:
    """Every module of the package by its dotted name below it ("_store",
    "torchrl._rows"; a subpackage's __init__ as "torchrl")."""
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = list(p.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts) or "__init__"] = ast.parse(p.read_text(), str(p))
    return out


def _imports(tree, name: str = "") -> set:
    """The package's modules this module (``name``) imports, anywhere in it,
    as dotted names below the package. (A module of a subpackage imports
    the subpackage's __init__ first, but that one is importing it already:
    not counted.)"""
    here = name.split(".")[:-1] if name else []  # the subpackage ``name`` is in
    if name in _SUBPACKAGES:
        here = name.split(".")
    out = set()

    def add(dotted: list) -> None:
        out.add(".".join(dotted))

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
            if node.module:
                add(base + node.module.split("."))
            else:
                for alias in node.names:
                    add(base + [alias.name])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tdstore."):
            add(node.module.split(".")[1:])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("tdstore."):
                    add(a.name.split(".")[1:])
    return out


_SUBPACKAGES = {p.parent.relative_to(PACKAGE).as_posix().replace("/", ".")
                for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}


def test_the_package_has_no_import_circle():
    modules = _modules()
    graph = {name: _imports(tree, name) & set(modules) - {name}
             for name, tree in modules.items()}
    assert graph["_store"], "the walk found no imports: it is broken"
    assert {"torchrl._rows", "_store"} <= graph["torchrl._storage"], graph["torchrl._storage"]
    state, path = {}, []

    def visit(name):
        state[name] = "open"
        path.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == "open":
                raise AssertionError("import circle: " + " -> ".join(path[path.index(dep):] + [dep]))
            if dep not in state:
                visit(dep)
        path.pop()
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_no_module_imports_the_package_inside_a_function():
    for name, tree in _modules().items():
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = ast.Module(body=fn.body, type_ignores=[])
                assert not _imports(inner, name), (name, fn.name, _imports(inner, name))


def test_one_dtype_table_taken_from_the_native_module():
    assert list(_dtypes.DTYPES) == [n for n in _native.dtype_names()
                                    if isinstance(getattr(torch, n, None), torch.dtype)]
    assert all(_dtypes.DTYPES[name] is getattr(torch, name) for name in _dtypes.DTYPES)
    assert {torch.float32, torch.bfloat16, torch.uint64, torch.float8_e4m3fn} <= set(
        _dtypes.DTYPE_NAMES)
    # No other module spells a table of torch dtypes out.
    for name, tree in _modules().items():
        if name == "_dtypes":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                spelled = [k for k in node.keys if isinstance(k, ast.Attribute)
                           and isinstance(k.value, ast.Name) and k.value.id == "torch"]
                assert len(spelled) < 3, f"{name}.py spells a dtype table at line {node.lineno}"
