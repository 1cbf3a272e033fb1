#!/usr/bin/env bash
# Lists every function longer than 80 lines and every file longer than 700 lines in the C++
# sources (.cc, .h) under engine/, cache/ and keyers/ (or under the folders given), one per line:
#   FILE:LINE: function NAME is N lines      FILE: file is N lines
# and exits 1 when it listed any. Usage: scripts/long_functions.sh [--max-function N]
# [--max-file N] [DIR...]
#
# Its limits (a brace-matching heuristic, not a C++ parser): comments, string and character
# literals (raw strings too) and preprocessor lines are skipped; a '{' opened at namespace or
# class level whose text since the last ';', '{' or '}' has a '(' and no '=' before it starts a
# function (a lambda stored in a namespace-level variable is not one); braces inside its
# parentheses and a constructor's brace initializers ('a_{x}' after ') :') belong to its head.
# A function's length runs from the first line of its head (a template<> line above it included)
# to its closing brace, both included; a lambda or local class counts in the function around it.
# Macros that open or close braces unevenly, or a '#if' with two versions of a function head, can
# confuse it; the sources have none today.
set -euo pipefail
cd "$(dirname "$0")/.."
max_function=80
max_file=700
while [ $# -gt 0 ]; do
  case "$1" in
    --max-function) max_function="$2"; shift 2 ;;
    --max-file) max_file="$2"; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- engine cache keyers
# The Python program below reads the file names on its standard input.
program=$(cat <<'PY'
import re
import sys

max_function, max_file = int(sys.argv[1]), int(sys.argv[2])
KINDS_WITH_FUNCTIONS = ("namespace", "class")


def code_only(text):
    """The text with comments, literals and preprocessor lines blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        raw = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == "R" else None
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
                    or text[i - 1] in "u8LU"):
            end = text.find(")" + raw.group(1) + '"', i)
            end = n if end < 0 else end + len(raw.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        if c == "'" and i > 0 and text[i - 1].isalnum() and text[i - 1] not in "uUL8":
            i += 1  # a digit separator (1'000)
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def function_name(head):
    """The qualified name before the head's parameter list."""
    head = re.sub(r"\s+", " ", head).strip()
    op = re.search(r"([\w:]*operator\s*(\(\)|[^\s(]+))\s*\(", head)
    if op:
        return op.group(1)
    depth = 0
    for k, ch in enumerate(head):  # the first '(' at template-argument depth 0
        if ch == "<":
            depth += 1
        elif ch == ">" and depth > 0 and not head[k - 1] == "-":
            depth -= 1
        elif ch == "(" and depth == 0:
            m = re.search(r"([~\w:]+)\s*$", head[:k])
            return m.group(1) if m else head[:k].strip()
    return head


def scan(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    found = []
    if lines > max_file:
        found.append(f"{path}: file is {lines} lines")
    code = code_only(text)
    stack = []  # one kind per open brace: namespace, class, function, other
    starts = []  # (first line, name) of the function being read
    head, head_start = "", None  # the text since the last ';', '{' or '}' at this level
    line = 1
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == "\n":
            line += 1
        in_body = any(k not in KINDS_WITH_FUNCTIONS for k in stack)
        if in_body:
            if c == "{":
                stack.append("other")
            elif c == "}":
                kind = stack.pop()
                if kind == "function" and not any(k not in KINDS_WITH_FUNCTIONS for k in stack):
                    start, name = starts.pop()
                    length = line - start + 1
                    if length > max_function:
                        found.append(f"{path}:{start}: function {name} is {length} lines")
                    head, head_start = "", None
            i += 1
            continue
        if c == "{":
            h = re.sub(r"\s+", " ", head).strip()
            params_open = head.count("(") - head.count(")")
            member_init = (re.search(r"\)\s*:(?!:)", head) and re.search(r"[\w>]\s*$", head)
                           and not re.search(r"\b(const|override|final|noexcept|try)\s*$", head))
            if params_open > 0 or member_init:  # a brace in the head: skip to its match
                depth, j = 0, i
                while j < n:
                    if code[j] == "{":
                        depth += 1
                    elif code[j] == "}":
                        depth -= 1
                        if depth == 0:
                            break
                    j += 1
                head += code[i:j + 1]
                line += code[i:j + 1].count("\n")
                i = j + 1
                continue
            if re.search(r"\bnamespace\b", h) or re.match(r'^extern\s*$', h):
                stack.append("namespace")
            elif re.search(r"\b(class|struct|union|enum)\b", h) and "(" not in h:
                stack.append("class")
            elif "(" in h and "=" not in re.sub(r"operator\s*\S*", "", h.split("(")[0]):
                stack.append("function")
                starts.append((head_start or line, function_name(h)))
            else:
                stack.append("other")
            head, head_start = "", None
        elif c == "}":
            if stack:
                stack.pop()
            head, head_start = "", None
        elif c == ";":
            head, head_start = "", None
        else:
            if head_start is None and not c.isspace():
                if re.match(r"(public|private|protected)\s*:", code[i:i + 12]):  # not a head
                    m = re.match(r"\w+\s*:", code[i:])
                    i += m.end()
                    continue
                head_start = line
            head += c
        i += 1
    return found


problems = []
for path in sys.stdin.read().split():
    problems += scan(path)
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PY
)
find "$@" -type f \( -name '*.cc' -o -name '*.h' \) | LC_ALL=C sort |
  python3 -c "$program" "$max_function" "$max_file"
