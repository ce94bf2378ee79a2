#!/usr/bin/env python3
"""Checks that HLS kernel sources stay in the subset of C++ Vitis HLS synthesizes, reading
the code, its #pragma HLS lines and its call graph.

Usage: check_synthesizable.py [--top NAME] [--unroll-budget N] [--expect RULE] FILE_OR_DIR...

Rules (each finding names its rule, file and line):
  allocation     new/delete, malloc/calloc/realloc/free, smart pointers, alloca
  container      standard containers and other heap-backed std types (vector, string, map, ...)
  virtual        virtual functions
  exception      throw / try / catch
  recursion      a function that calls itself, directly or through other kernel functions
  loop-bound     while / do / goto, or a for loop whose condition does not compare the loop
                 variable against a compile-time bound (literals, template parameters,
                 constexpr names, qualified config constants such as CFG::max_dim);
                 run-time trip counts are written as `if (i >= n) break;` in a bounded loop
  interface      #pragma HLS INTERFACE outside the top function (--top NAME, or the
                 functions declared extern "C"); without a top, every INTERFACE is a finding
  nested-pipeline  #pragma HLS PIPELINE (other than `off`) inside a region that is already
                 pipelined: a later PIPELINE in a pipelined loop body or function, directly
                 or in any function called from the region (followed through the call graph)
  unroll-budget  a loop fully unrolled (UNROLL without factor, or any loop inside a
                 pipelined region, which Vitis unrolls completely) whose trip count exceeds
                 --unroll-budget (the design's widest unit, written by fpgallm emit), or
                 whose trip count cannot be bounded from the instantiations in the sources
  array-select   run-time selection of on-chip arrays: a function that returns one of
                 several arrays chosen at run time, or a conditional expression whose
                 branches are different arrays

Code under `#ifndef __SYNTHESIS__` (or the #else of `#ifdef __SYNTHESIS__`) is C simulation
only and is not checked, as Vitis HLS does not synthesize it.

Exit status 0 when clean; 1 with one line per finding otherwise. With --expect RULE the
status is 0 only if RULE was found (used by the negative tests on deliberately bad snippets).
"""
import math
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


def synthesis_lines(lines):
    """Blanks the lines Vitis HLS does not synthesize: the C-simulation branch of
    #ifdef/#ifndef __SYNTHESIS__ (nested conditionals are tracked)."""
    out, stack = [], []  # stack entries: (is_synthesis_conditional, keep_current_branch)
    for line in lines:
        s = line.strip()
        m = re.match(r"#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)", s)
        keep = all(k for _, k in stack)
        if m:
            kind, rest = m.group(1), m.group(2)
            if kind in ("ifdef", "ifndef", "if"):
                synth = "__SYNTHESIS__" in rest
                branch = True
                if synth:
                    negated = kind == "ifndef" or re.search(r"!\s*defined", rest) is not None
                    branch = not negated
                stack.append((synth, branch))
            elif kind == "else" and stack:
                synth, branch = stack[-1]
                stack[-1] = (synth, (not branch) if synth else True)
            elif kind == "endif" and stack:
                stack.pop()
            out.append("")
            continue
        out.append(line if keep else "")
    return out


def strip(text):
    """Removes comments, string and character literals and the C-simulation-only branches,
    keeping line structure. Returns (code, pragmas): #pragma HLS lines are collected as
    (offset, text) and blanked in the code; other # lines are blanked."""
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
    lines = synthesis_lines("".join(out).split("\n"))
    code_lines, pragmas, offset = [], [], 0
    for l in lines:
        s = l.strip()
        if s.startswith("#"):
            m = re.match(r"#\s*pragma\s+HLS\s+(.*)", s, re.IGNORECASE)
            if m:
                pragmas.append((offset, m.group(1).strip()))
            code_lines.append("")
        else:
            code_lines.append(l)
        offset += len(code_lines[-1]) + 1
    return "\n".join(code_lines), pragmas


LOCATE = str  # position -> "file:line", set by check_sources


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


def for_loops(code):
    """(start, header, body_start, body_end) of every for loop; a body without braces is
    the single statement up to its ';'."""
    out = []
    for m in re.finditer(r"\bfor\s*\(", code):
        close = matching(code, m.end() - 1)
        header = code[m.end():close]
        k = close + 1
        while k < len(code) and code[k].isspace():
            k += 1
        if k < len(code) and code[k] == "{":
            end = matching(code, k, "{", "}")
        else:
            end = code.find(";", k)
            end = len(code) - 1 if end < 0 else end
        out.append((m.start(), header, k, end))
    return out


def check_loops(code, constants, report):
    for m in re.finditer(r"\b(while|do|goto)\b", code):
        report("loop-bound", m.start(), f"'{m.group(1)}' (use a for loop with a compile-time bound)")
    for start, header, _, _ in for_loops(code):
        parts = header.split(";")
        if len(parts) != 3:
            report("loop-bound", start, "range-for or malformed for loop (bound not visible)")
            continue
        init, cond, _ = parts
        var = re.findall(r"([A-Za-z_]\w*)\s*=", init)
        cm = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*(<=|<|>=|>|!=)\s*(.+?)\s*", cond)
        if not var or not cm or cm.group(1) != var[-1] or not bound_is_constant(cm.group(3), constants):
            report("loop-bound", start, f"for ({header.strip()}): the condition is not a compile-time bound")
        if var and not re.fullmatch(r".*=\s*(\d+|[\w:]+(\s*[-+*/]\s*[\w:]+)*)\s*", init.strip()):
            report("loop-bound", start, f"for ({header.strip()}): the start is not a compile-time value")


def functions(code):
    """(name, signature_start, body_start, body_end) of every function definition."""
    out = []
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", code):
        name = m.group(1)
        if name in KEYWORDS:
            continue
        close = matching(code, m.end() - 1)
        rest = code[close + 1:close + 200]
        tail = re.match(r"\s*(const\s*)?(noexcept\s*)?(->\s*[\w:<>\s]+)?(:[^{;]*)?\{", rest)
        if not tail:
            continue
        # A definition starts at statement level: preceded by a type, not by an operator.
        before = code[max(0, m.start() - 80):m.start()].rstrip()
        if not before or before[-1] in "=(,!|+-/%?:<" and not before.endswith(">") and not before.endswith("::"):
            continue
        if before[-1] in "*&" and not re.search(r"[\w>]\s*[*&]+$", before):
            continue
        body_start = close + 1 + tail.end() - 1
        out.append((name, m.start(), body_start, matching(code, body_start, "{", "}")))
    return out


def calls_in(code, begin, end, names):
    return {c for c in re.findall(r"\b([A-Za-z_]\w*)\s*(?:<[^;(){}]*>)?\s*\(", code[begin:end]) if c in names}


def call_graph(code, defs):
    names = {d[0] for d in defs}
    calls = {}
    for name, _, b, e in defs:
        calls.setdefault(name, set()).update(calls_in(code, b, e, names))
    return calls


def check_recursion(code, defs, report):
    calls = call_graph(code, defs)
    where = {}
    for name, _, b, _ in defs:
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


def enclosing(defs_or_loops, pos):
    """The innermost (smallest) region (.., body_start, body_end) containing pos."""
    best = None
    for r in defs_or_loops:
        b, e = r[-2], r[-1]
        if b <= pos <= e and (best is None or e - b < best[-1] - best[-2]):
            best = r
    return best


def is_pipeline(text):
    return re.match(r"PIPELINE\b", text, re.IGNORECASE) and not re.search(r"\boff\b", text, re.IGNORECASE)


def pipelined_regions(code, pragmas, defs, loops):
    """(name, begin, end) of every region a PIPELINE pragma applies to: the loop body or the
    function body the pragma stands in."""
    regions = []
    for pos, text in pragmas:
        if not is_pipeline(text):
            continue
        loop = enclosing(loops, pos)
        fn = enclosing(defs, pos)
        if loop and (not fn or loop[2] > fn[2]):
            regions.append(("loop at " + LOCATE(loop[0]), pos, loop[2], loop[3]))
        elif fn:
            regions.append(("function " + fn[0], pos, fn[2], fn[3]))
    return regions


def reachable(start_calls, calls):
    seen, todo = set(), list(start_calls)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(calls.get(n, ()))
    return seen


def check_interface(code, pragmas, defs, top, report):
    tops = set(top) if top else {m.group(1) for m in re.finditer(r'extern\s*""\s*(?:[\w:<>\s\*&]+?)\b([A-Za-z_]\w*)\s*\(', code)}
    for pos, text in pragmas:
        if not re.match(r"INTERFACE\b", text, re.IGNORECASE):
            continue
        fn = enclosing(defs, pos)
        if fn is None or fn[0] not in tops:
            where = f"in {fn[0]}()" if fn else "outside any function"
            report("interface", pos, f"INTERFACE pragma {where}: only the top function ({', '.join(sorted(tops)) or 'none'}) "
                                     "declares interfaces")


def check_nested_pipeline(code, pragmas, defs, loops, report):
    calls = call_graph(code, defs)
    names = {d[0] for d in defs}
    bodies = {}
    for name, _, b, e in defs:
        bodies.setdefault(name, []).append((b, e))
    pipeline_pragmas = [(p, t) for p, t in pragmas if is_pipeline(t)]
    for what, own, b, e in pipelined_regions(code, pragmas, defs, loops):
        for p, t in pipeline_pragmas:
            if b <= p <= e and p != own:
                report("nested-pipeline", p, f"PIPELINE inside the pipelined {what}")
        for callee in sorted(reachable(calls_in(code, b, e, names), calls)):
            for cb, ce in bodies.get(callee, []):
                for p, t in pipeline_pragmas:
                    if cb <= p <= ce:
                        report("nested-pipeline", own, f"the pipelined {what} calls {callee}(), which has a PIPELINE")


def config_values(code):
    """Member name -> largest value over the instantiations in the sources: reads
    `template <int A, int B> struct X { static constexpr int a = A; ... };` and every
    `X<1, 2>` with literal arguments, plus `static constexpr int name = literal;`."""
    templates = {}
    for m in re.finditer(r"template\s*<([^>]*)>\s*struct\s+([A-Za-z_]\w*)\s*\{", code):
        params = [re.findall(r"[A-Za-z_]\w*", p.split("=")[0])[-1] for p in m.group(1).split(",") if p.strip()]
        body_end = matching(code, m.end() - 1, "{", "}")
        members = {}
        for mm in re.finditer(r"static\s+constexpr\s+int\s+([A-Za-z_]\w*)\s*=\s*([^;]+);", code[m.end():body_end]):
            members[mm.group(1)] = mm.group(2).strip()
        templates[m.group(2)] = (params, members)
    values = {}

    def put(name, v):
        values[name] = max(values.get(name, v), v)

    for m in re.finditer(r"\bstatic\s+constexpr\s+int\s+([A-Za-z_]\w*)\s*=\s*(\d+)\s*;", code):
        put(m.group(1), int(m.group(2)))
    for m in re.finditer(r"\bconstexpr\s+(?:int|long)\s+([A-Za-z_]\w*)\s*=\s*(\d+)\s*;", code):
        put(m.group(1), int(m.group(2)))
    for name, (params, members) in templates.items():
        for m in re.finditer(r"\b" + name + r"\s*<([^<>;{}()]*)>", code):
            args = [a.strip() for a in m.group(1).split(",")]
            if len(args) != len(params):
                continue
            env = {p: int(a) for p, a in zip(params, args) if re.fullmatch(r"\d+", a)}
            for member, expr in members.items():
                v = evaluate(expr, env)
                if v is not None:
                    env[member] = v
                    put(member, v)
    # Template parameters of function templates named after a config member (LANES for
    # lanes), and local constants defined from known values (constexpr int D = CFG::x;).
    for name, v in list(values.items()):
        values.setdefault(name.upper(), v)
    for _ in range(2):
        for m in re.finditer(r"\bconstexpr\s+int\s+([A-Za-z_]\w*)\s*=\s*([^;]+);", code):
            v = evaluate(m.group(2), values)
            if v is not None:
                put(m.group(1), v)
    return values


# constexpr helpers of the kernels that sizes are computed with.
CONSTEXPR_FUNCTIONS = {"lcm_small": math.lcm}


def evaluate(expr, env):
    if "?" in expr:  # one conditional: cond ? a : b
        m = re.fullmatch(r"(.+?)\?(.+?)(?<!:):(?!:)(.+)", expr)
        if not m:
            return None
        cond = evaluate(m.group(1), env)
        return None if cond is None else evaluate(m.group(2) if cond else m.group(3), env)
    toks = re.findall(r"[A-Za-z_][\w:]*|\d+|\S", expr)
    out = []
    for t in toks:
        if re.fullmatch(r"\d+", t):
            out.append(t)
        elif t in CONSTEXPR_FUNCTIONS:
            out.append(t)
        elif t == ",":
            out.append(t)
        elif re.fullmatch(r"[A-Za-z_][\w:]*", t):
            key = t.split("::")[-1]
            if key not in env:
                return None
            out.append(str(env[key]))
        elif t in "+-*/%()<>=!&|" and t != "!":
            out.append("//" if t == "/" else t)
        else:
            return None
    text = " ".join(out).replace("/ /", "//")
    try:
        return int(eval(text, {"__builtins__": {}}, dict(CONSTEXPR_FUNCTIONS)))
    except Exception:  # noqa: BLE001: an expression this reader does not handle is "unknown"
        return None


def trip_count(header, values):
    parts = header.split(";")
    if len(parts) != 3:
        return None
    init, cond, step = parts
    cm = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*(<=|<|>=|>)\s*(.+?)\s*", cond)
    im = re.search(r"=\s*(.+)$", init.strip())
    if not cm or not im:
        return None
    lo, hi = evaluate(im.group(1), values), evaluate(cm.group(3), values)
    if lo is None or hi is None:
        return None
    if cm.group(2) in (">", ">="):  # a counting-down loop
        return max(0, lo - hi + (1 if cm.group(2) == ">=" else 0))
    if cm.group(2) == "<=":
        hi += 1
    inc = 1
    sm = re.search(r"(\+=|-=|\*=|/=)\s*(.+)$", step.strip())
    if sm:
        if sm.group(1) != "+=":
            return None  # halving loops (tree levels): log-count, bounded below
        inc = evaluate(sm.group(2), values)
        if not inc:
            return None
    return max(0, math.ceil((hi - lo) / inc))


def check_unroll_budget(code, pragmas, defs, loops, budget, values, report):
    if budget is None:
        return
    calls = call_graph(code, defs)
    names = {d[0] for d in defs}
    unrolled = {}  # loop start -> reason
    for pos, text in pragmas:
        if re.match(r"UNROLL\b", text, re.IGNORECASE) and not re.search(r"factor\s*=", text, re.IGNORECASE):
            loop = enclosing(loops, pos)
            if loop:
                unrolled.setdefault(loop[0], "UNROLL")
    for what, _, b, e in pipelined_regions(code, pragmas, defs, loops):
        inside = [l for l in loops if b < l[0] < e]
        for callee in reachable(calls_in(code, b, e, names), calls):
            for name, _, cb, ce in defs:
                if name == callee:
                    inside += [l for l in loops if cb < l[0] < ce]
        for l in inside:
            unrolled.setdefault(l[0], f"inside the pipelined {what}")
    for start, header, _, _ in loops:
        if start not in unrolled:
            continue
        n = trip_count(header, values)
        if n is None:
            if re.search(r"/=\s*2|>>=\s*1", header):
                continue  # a halving loop runs log2 of a bounded width
            report("unroll-budget", start, f"for ({header.strip()}) is fully unrolled ({unrolled[start]}) but its trip "
                                           "count cannot be bounded from the sources")
        elif n > budget:
            report("unroll-budget", start, f"for ({header.strip()}) is fully unrolled ({unrolled[start]}) with {n} "
                                           f"iterations, over the budget of {budget}")


def check_array_select(code, defs, report):
    arrays = set(re.findall(r"\b[A-Za-z_][\w:<>]*\s+([A-Za-z_]\w*)\s*\[[^\]]+\]\s*(?:\[[^\]]+\]\s*)*[;=]", code))
    def is_array(expr):
        e = expr.strip().lstrip("&(").rstrip(")")
        return re.fullmatch(r"(?:[A-Za-z_]\w*\s*(?:\.|->)\s*)?([A-Za-z_]\w*)", e) is not None and \
            re.fullmatch(r"(?:[A-Za-z_]\w*\s*(?:\.|->)\s*)?([A-Za-z_]\w*)", e).group(1) in arrays
    for name, sig, b, e in defs:
        head = code[max(0, sig - 120):sig]
        if not re.search(r"\*\s*$", head):
            continue  # returns no pointer
        returned = {r.strip() for r in re.findall(r"\breturn\s+([^;]+);", code[b:e])}
        if len(returned) > 1 and sum(1 for r in returned if is_array(r)) > 1:
            report("array-select", sig, f"{name}() returns one of the arrays {', '.join(sorted(returned))} chosen at run time")
    for m in re.finditer(r"\?\s*([^:;?]+?)\s*:\s*([^;,)]+)", code):
        a, b2 = m.group(1), m.group(2)
        if is_array(a) and is_array(b2) and a.strip() != b2.strip():
            report("array-select", m.start(), f"conditional choice between the arrays {a.strip()} and {b2.strip()}")


def check_sources(texts, findings, top, budget):
    """Checks all files together, so that calls and config instantiations are followed
    across files (a kernel in one header calls helpers of another)."""
    parts, pragmas, starts, offset = [], [], [], 0
    for path, raw in texts.items():
        code, prag = strip(raw)
        starts.append((offset, path))
        parts.append(code)
        pragmas += [(offset + p, t) for p, t in prag]
        offset += len(code) + 1
    code = "\n".join(parts)
    defs = functions(code)
    loops = for_loops(code)
    values = config_values(code)

    def locate(pos):
        start, path = [s for s in starts if s[0] <= pos][-1]
        return f"{path}:{line_of(code, pos) - line_of(code, start) + 1}"

    global LOCATE
    LOCATE = locate

    def report(rule, pos, msg):
        findings.append((rule, f"{locate(pos)}: [{rule}] {msg}"))

    for m in ALLOC.finditer(code):
        report("allocation", m.start(), f"dynamic allocation '{m.group(1)}'")
    for m in CONTAINER.finditer(code):
        report("container", m.start(), f"standard container 'std::{m.group(1)}'")
    for m in re.finditer(r"\bvirtual\b", code):
        report("virtual", m.start(), "virtual function")
    for m in re.finditer(r"\b(throw|try|catch)\b", code):
        report("exception", m.start(), f"exception '{m.group(1)}'")
    check_loops(code, compile_time_names(code), report)
    check_recursion(code, defs, report)
    check_interface(code, pragmas, defs, top, report)
    check_nested_pipeline(code, pragmas, defs, loops, report)
    check_unroll_budget(code, pragmas, defs, loops, budget, values, report)
    check_array_select(code, defs, report)


def main(argv):
    expect, top, budget = None, [], None
    while argv and argv[0].startswith("--"):
        if argv[0] == "--expect" and len(argv) > 1:
            expect, argv = argv[1], argv[2:]
        elif argv[0] == "--top" and len(argv) > 1:
            top.append(argv[1])
            argv = argv[2:]
        elif argv[0] == "--unroll-budget" and len(argv) > 1:
            budget, argv = int(argv[1]), argv[2:]
        else:
            print(f"unknown option {argv[0]}", file=sys.stderr)
            return 2
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    files = []
    for a in argv:
        if os.path.isdir(a):
            for root, _, names in sorted(os.walk(a)):
                files += [os.path.join(root, f) for f in sorted(names) if f.endswith((".hpp", ".h", ".cpp"))]
        elif os.path.exists(a):
            files.append(a)
        else:
            print(f"{a}: no such file or folder", file=sys.stderr)
            return 2
    texts = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            texts[f] = fh.read()
    findings = []
    check_sources(texts, findings, top, budget)
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
