"""The package's house rules (issue 68), checked on the installed package's source as the
engine's are by scripts/long_functions.sh: no module over 400 lines, no function over 80 lines
of code (its docstring aside), and no private name imported from another module (a module's
helpers that others use are public names of a private module, e.g. recycle._inputs)."""
import ast
import pathlib

import recycle

PACKAGE = pathlib.Path(recycle.__file__).parent
MAX_LINES, MAX_FUNCTION = 400, 80


def modules():
    found = sorted(p for p in PACKAGE.glob("*.py") if p.name != "_build_info.py")
    assert len(found) > 10, found
    return found


def code_lines(node):
    """The lines of a function's code: its span less its docstring's."""
    lines = node.end_lineno - node.lineno + 1
    doc = node.body[0] if node.body else None
    if isinstance(doc, ast.Expr) and isinstance(getattr(doc, "value", None), ast.Constant) and \
            isinstance(doc.value.value, str):
        lines -= doc.end_lineno - doc.lineno + 1
    return lines


def test_no_module_is_long():
    long = {p.name: n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_function_is_long():
    long = []
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    code_lines(node) > MAX_FUNCTION:
                long.append(f"{p.name}:{node.lineno} {node.name} ({code_lines(node)} lines)")
    assert not long, f"functions over {MAX_FUNCTION} lines of code: {long}"


def test_no_private_name_is_imported_from_another_module():
    private = []
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                private += [f"{p.name}: from .{node.module} import {a.name}" for a in node.names
                            if a.name.startswith("_")]
    assert not private, private
