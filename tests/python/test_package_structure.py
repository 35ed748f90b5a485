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
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in PACKAGE.glob("*.py")}


def _imports(tree) -> set:
    """The package's modules this module imports, anywhere in it."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tdstore."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("tdstore."))
    return out


def test_the_package_has_no_import_circle():
    modules = _modules()
    graph = {name: _imports(tree) & set(modules) for name, tree in modules.items()}
    assert graph["_store"], "the walk found no imports: it is broken"
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
                assert not _imports(inner), (name, fn.name, _imports(inner))


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
