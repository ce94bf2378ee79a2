#!/usr/bin/env python3
"""Checks that HLS kernel sources stay in the synthesizable subset of C++.

Usage: check_synthesizable.py [--expect RULE] FILE_OR_DIR...

Rules (each finding names its rule, file and line):
  allocation  new/delete, malloc/calloc/realloc/free, smart pointers, alloca
  container   standard containers and other heap-backed std types (vector, string, map, ...)
  virtual     virtual functions
  exception   throw / try / catch
  recursion   a function that calls itself, directly or through other kernel functions
  loop-bound  while / do / goto, or a for loop whose condition does not compare the loop
              variable against a compile-time bound: integer literals, template parameters,
              constexpr names and qualified config constants (CFG::max_dim); run-time trip
              counts are written as `if (i >= n) break;` inside a bounded loop

Exit status 0 when clean; 1 with one line per finding otherwise. With --expect RULE the
status is 0 only if RULE was found (used by the negative tests on deliberately bad snippets).
"""
import os
import re
import sys

CONTAINERS = ("vector", "string", "map", "set", "unordered_map", "unordered_set", "list", "deque", "queue",
              "stack", "priority_queue", "array", "function", "multimap", "multiset", "basic_string", "any",
              "variant", "optional", "span", "valarray", "forward_list")
ALLOC = re.compile(r"\b(new|delete|malloc|calloc|realloc|free|alloca|make_unique|make_shared|unique_ptr|shared_ptr)\b")
CONTAINER = re.compile(r"\bstd::(" + "|".join(CONTAINERS) + r")\b")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "static_cast", "reinterpret_cast", "const_cast",
            "bit_cast", "static_assert", "decltype", "alignof", "noexcept", "catch", "constexpr", "do", "else",
            "case", "default", "operator", "template", "typename", "using", "namespace", "struct", "class"}


def strip(text):
    """Removes comments, string and character literals, keeping line structure; drops
    #pragma and #include lines (pragmas are annotations, not code)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    lines = "".join(out).split("\n")
    return "\n".join("" if l.lstrip().startswith("#") else l for l in lines)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def matching(text, open_pos, open_c="(", close_c=")"):
    depth = 0
    for k in range(open_pos, len(text)):
        if text[k] == open_c:
            depth += 1
        elif text[k] == close_c:
            depth -= 1
            if depth == 0:
                return k
    return len(text) - 1


def compile_time_names(code):
    names = set()
    for m in re.finditer(r"template\s*<", code):
        end = matching(code, m.end() - 1, "<", ">")
        for p in code[m.end():end].split(","):
            words = re.findall(r"[A-Za-z_]\w*", p.split("=")[0])
            if words:
                names.add(words[-1])
    for m in re.finditer(r"\bconstexpr\b[^;=(]*?\b([A-Za-z_]\w*)\s*(=|\{)", code):
        names.add(m.group(1))
    for m in re.finditer(r"\benum\b[^{;]*\{([^}]*)\}", code):
        for item in m.group(1).split(","):
            w = re.findall(r"[A-Za-z_]\w*", item.split("=")[0])
            if w:
                names.add(w[0])
    return names


def bound_is_constant(expr, constants):
    expr = expr.strip()
    if not expr:
        return False
    for tok in re.findall(r"[A-Za-z_][\w:]*|\d+[uUlL]*|\S", expr):
        if re.fullmatch(r"\d+[uUlL]*", tok) or tok in "+-*/%()<>":
            continue
        if "::" in tok:  # CFG::max_dim, Config::lanes: static constexpr members
            continue
        if tok in constants:
            continue
        return False
    return True


def check_loops(code, constants, report):
    for m in re.finditer(r"\b(while|do|goto)\b", code):
        report("loop-bound", m.start(), f"'{m.group(1)}' (use a for loop with a compile-time bound)")
    for m in re.finditer(r"\bfor\s*\(", code):
        close = matching(code, m.end() - 1)
        header = code[m.end():close]
        parts = header.split(";")
        if len(parts) != 3:
            report("loop-bound", m.start(), "range-for or malformed for loop (bound not visible)")
            continue
        init, cond, _ = parts
        var = re.findall(r"([A-Za-z_]\w*)\s*=", init)
        cm = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*(<|<=|>|>=|!=)\s*(.+?)\s*", cond)
        if not var or not cm or cm.group(1) != var[-1] or not bound_is_constant(cm.group(3), constants):
            report("loop-bound", m.start(), f"for ({header.strip()}): the condition is not a compile-time bound")
        if var and not re.fullmatch(r".*=\s*(\d+|[\w:]+(\s*[-+*/]\s*[\w:]+)*)\s*", init.strip()):
            report("loop-bound", m.start(), f"for ({header.strip()}): the start is not a compile-time value")


def functions(code):
    """(name, body_start, body_end) of every function definition (template or not)."""
    out = []
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", code):
        name = m.group(1)
        if name in KEYWORDS:
            continue
        close = matching(code, m.end() - 1)
        rest = code[close + 1:close + 200]
        tail = re.match(r"\s*(const\s*)?(noexcept\s*)?(->\s*[\w:<>\s]+)?\{", rest)
        if not tail:
            continue
        # A definition starts at statement level: preceded by a type, not by an operator.
        before = code[max(0, m.start() - 80):m.start()].rstrip()
        if not before or before[-1] in "=(,!&|+-*/%?:<" and not before.endswith(">"):
            continue
        body_start = close + 1 + tail.end() - 1
        out.append((name, body_start, matching(code, body_start, "{", "}")))
    return out


def check_recursion(code, report):
    defs = functions(code)
    names = {d[0] for d in defs}
    calls = {}
    where = {}
    for name, b, e in defs:
        body = code[b:e]
        called = {c for c in re.findall(r"\b([A-Za-z_]\w*)\s*(?:<[^;(){}]*>)?\s*\(", body) if c in names}
        calls.setdefault(name, set()).update(called)
        where.setdefault(name, b)
    state = {}

    def visit(n, stack):
        state[n] = 1
        for c in calls.get(n, ()):
            if state.get(c) == 1:
                cycle = stack[stack.index(c):] + [c] if c in stack else [n, c]
                report("recursion", where[c], "call cycle " + " -> ".join(cycle))
            elif not state.get(c):
                visit(c, stack + [c])
        state[n] = 2

    for n in sorted(calls):
        if not state.get(n):
            visit(n, [n])


def check_file(path, raw, findings):
    code = strip(raw)

    def report(rule, pos, msg):
        findings.append((rule, f"{path}:{line_of(code, pos)}: [{rule}] {msg}"))

    for m in ALLOC.finditer(code):
        report("allocation", m.start(), f"dynamic allocation '{m.group(1)}'")
    for m in CONTAINER.finditer(code):
        report("container", m.start(), f"standard container 'std::{m.group(1)}'")
    for m in re.finditer(r"\bvirtual\b", code):
        report("virtual", m.start(), "virtual function")
    for m in re.finditer(r"\b(throw|try|catch)\b", code):
        report("exception", m.start(), f"exception '{m.group(1)}'")
    check_loops(code, compile_time_names(code), report)
    check_recursion(code, report)


def main(argv):
    expect = None
    if len(argv) >= 2 and argv[0] == "--expect":
        expect, argv = argv[1], argv[2:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    files = []
    for a in argv:
        if os.path.isdir(a):
            for root, _, names in os.walk(a):
                files += [os.path.join(root, f) for f in sorted(names) if f.endswith((".hpp", ".h", ".cpp"))]
        else:
            files.append(a)
    findings = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            check_file(f, fh.read(), findings)
    if expect:
        hit = [msg for rule, msg in findings if rule == expect]
        for msg in hit:
            print("caught as expected:", msg)
        if not hit:
            print(f"rule '{expect}' was not caught in {', '.join(files)}", file=sys.stderr)
        return 0 if hit else 1
    for _, msg in findings:
        print(msg, file=sys.stderr)
    print(f"{len(files)} file(s) checked, {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
