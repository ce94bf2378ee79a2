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

The II rules: what a pipelined loop needs for the II that arch::unit_work charges (II=1, or
the II its PIPELINE pragma states). They read every pipelined loop in context: from each
top (or, without one, each function nothing calls) down the call graph, every argument
bound to its parameter (lambdas and brace-initialized structs included), so an access in
a callee is seen as the caller's array or port plus the caller's offsets. Inside the loop
(its body and everything it calls, all of which Vitis inlines and unrolls) an expression
is compile-time (literals, template parameters, constexpr names, CFG::x), unrolled (the
variable of a loop inside the region: one copy per iteration), invariant (a name not
assigned in the loop; an enclosing loop's variable that starts at 0 is a known multiple of
its step), varying (a name assigned in the loop other than the loop variable v) or data (a
value read or computed in the loop). An index is affine when it is c*v + invariant +
unrolled + compile-time terms, c compile-time or invariant, with no division, modulo or
shift of v, no product of v with v, and no ?: whose condition is not compile-time.
  burst          an m_axi port (a parameter of the top named by an INTERFACE m_axi pragma)
                 read or written inside a pipelined loop at an address that is not affine
                 (varying, data-dependent, divided, chosen by ?:), or under a condition
                 (if, ?:) that changes inside the loop; the `if (i >= n) break;` trip-count
                 exit is not a condition. A stride c != 1 is accepted as affine.
  partition      an on-chip array (a local or static array) accessed at more places per
                 iteration than its banks have ports: places = distinct (index, read or
                 write) per iteration, times the trip counts of the unrolled loops in the
                 index; banks = the product of the ARRAY_PARTITION factors of the
                 dimensions the accesses differ in (cyclic/block: factor; complete: registers,
                 never a finding); 2 ports per bank. The finding states II >= places / ports.
  accumulation   a floating-point (float/double) value updated as x += e, x -= e,
                 x = x + e or x = e + x inside a pipelined loop and carried across its
                 iterations: a scalar declared outside the loop, or an array element whose
                 index does not hold v. Justified only by PIPELINE II >= the adder latency
                 (FADD_LATENCY = 8 cycles, kernels::kAddSlots) or by a DEPENDENCE
                 variable=x inter distance=D true with D >= that latency (the kAddSlots
                 partial sums used in turn of kernels::lane_reduce).
  runtime-index  an index into a cyclic/block partitioned dimension of an on-chip array
                 inside a pipelined loop, on a dimension the iteration's accesses spread
                 over (an unrolled variable in the index, or different indices), that is
                 not c*v + unrolled + compile-time: a run-time offset (an invariant or
                 varying name, unless multiplied by a multiple of the factor), a data index,
                 or v with a run-time stride. Vitis cannot prove the lanes hit different
                 banks. One run-time index shared by every access (a row picked per loop)
                 is a multiplexer, not a conflict, and completely partitioned dimensions
                 (registers) are exempt.
What the II rules cannot see: types (every overload of a called name with enough
parameters is followed, e.g. kv_write's int8 body in a design whose KV cache is fp16);
pointer dereference by * and aliasing through pointers stored in arrays; accesses through
hls::stream; function-level PIPELINE; loop-carried dependences other than fp accumulation
(integer recurrences, running max/compare chains, RAW through arrays); how wide Vitis makes
a port (max_widen_bitwidth) or whether a stride != 1 bursts; which m_axi bundles share a
port; trip counts of unrolled loops it cannot evaluate (those accesses are not counted);
partition factors it cannot evaluate (that array is not checked); and the latency of an
adder at a given clock (FADD_LATENCY is fixed). Findings on the shipped kernels that are
real but not fixed are listed in KNOWN_FINDINGS (rule, loop id, arrays, call-chain
function, issue): they print as "known" and do not fail.

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
    # int parameters of function templates from their explicit instantiations with literal
    # arguments (attention<A, 8>(...) gives KV_BITS 8; the largest wins, as above).
    function_params = {}
    for m in re.finditer(r"template\s*<([^<>]*)>\s*(?:inline\s+)?[\w:<>,\s*&]*?\b([A-Za-z_]\w*)\s*\(", code):
        function_params.setdefault(m.group(2), [re.findall(r"[A-Za-z_]\w*", p.split("=")[0])[-1]
                                                for p in m.group(1).split(",") if p.strip()])
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*<([^<>;{}()]*)>\s*\(", code):
        params = function_params.get(m.group(1))
        args = [a.strip() for a in m.group(2).split(",")]
        if params and len(params) == len(args):
            for param, arg in zip(params, args):
                if re.fullmatch(r"\d+", arg):
                    put(param, int(arg))
    # Template parameters of function templates named after a config member (LANES for
    # lanes), and local constants defined from known values (constexpr int D = CFG::x;).
    for name, v in list(values.items()):
        values.setdefault(name.upper(), v)
    # constexpr int functions whose body is one return statement (attention_lanes), evaluated
    # with their arguments and the constants above.
    for m in re.finditer(r"\bconstexpr\s+int\s+([A-Za-z_]\w*)\s*\(([^)]*)\)\s*\{\s*return\s+([^;]+);\s*\}", code):
        params = [re.findall(r"[A-Za-z_]\w*", p)[-1] for p in m.group(2).split(",") if p.strip()]

        def function(*args, params=params, expr=m.group(3)):
            return evaluate(expr, {**values, **dict(zip(params, args))})

        CONSTEXPR_FUNCTIONS.setdefault(m.group(1), function)
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


# ---------------------------------------------------------------------------------------
# The II rules (burst, partition, accumulation, runtime-index): what a pipelined loop needs
# so that Vitis HLS can schedule it at the II the performance model charges.
#
# They read the kernels context by context: from each root (the top functions, or without
# one every function no other calls) down the call graph, every call's arguments bound to
# the callee's parameters (lambdas included), so that an address inside kv_read() is seen
# as the KV port plus the offsets attention() adds. Inside a pipelined loop every
# expression is classified against the loop variable v:
#   compile-time   literals, template parameters, constexpr names, CFG::x
#   unrolled       the variable of a loop inside the pipelined region (Vitis unrolls it):
#                  one copy per iteration of it, each at a compile-time offset
#   invariant      any other name not assigned inside the loop (a run-time value fixed
#                  for the loop: a parameter, an outer loop's variable, a local set before)
#   varying        a name assigned inside the loop other than v (key, col, slot, sf)
#   data           a value read from memory or an array, or a call result, inside the loop
# and an index is affine when it is  c*v + invariant + unrolled + compile-time  with c
# compile-time or invariant, and no division, modulo, product of v with v, or ?: whose
# condition is not compile-time.

FADD_LATENCY = 8  # cycles of Vitis HLS's binary32 adder assumed by accumulation (kAddSlots)
CAST_NAMES = {"static_cast", "reinterpret_cast", "const_cast", "int", "long", "float", "double", "unsigned", "short",
              "char", "bool", "i8", "u8", "i32", "u32", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t",
              "uint32_t", "int64_t", "uint64_t", "size_t", "ptrdiff_t"}

# Findings of the II rules on the shipped kernels that are real and not fixed (a fix would
# change computed bits or loop trip counts, or is issue 27 item 3's rebuild of attention).
# Each entry: (rule, pipelined loop id (its FPGALLM_TRIP id, or the function of a loop
# without one), the arrays or m_axi ports, a function the finding's call chain must pass
# through, why it is known). A matching finding is printed as "known" and does not fail;
# every entry is listed with the II expected of Vitis HLS in docs/accelerator.md.
KNOWN_FINDINGS = (
    # Attention's loads, in the scores loop of the first query that sees a block: the KV
    # address (p0 + j) * kv_dim + kvh * head_dim + c * A + e follows the counters j and c,
    # not the loop variable, and each lane's read is conditional (load, j < nb,
    # c * A + e < head_dim): no burst, no widening to one 512-bit beat; and the lanes write
    # kblk/vblk at c * A + e, a bank known only at run time. Expected II about LANES or more,
    # not 1 (issue 27 item 3: contiguous per-head KV blocks read in bursts). On each key's
    # first beat its int8 scales, at (p0 + j) * kv_heads + kvh: a request of 4 bytes per key,
    # consecutive only where kv_heads is 1 (in a loop of their own they were strided just
    # the same).
    ("burst", "attention_scores", ("kv_k", "kv_v", "kv_k_scale", "kv_v_scale"), "attention",
     "issue 27 item 3: attention's KV loads, conditional and not affine in the loop variable"),
    ("runtime-index", "attention_scores", ("kblk", "vblk"), "attention",
     "issue 27 item 3: the KV block written at the run-time column c * A + e"),
    # The same head offset in the per-head vector operations on the top's q and k arrays:
    # Qwen3's head norms (sum of squares and scale), RoPE of every head, and the int8 KV
    # store's max |x| and codes (kv_write<int8>, only where the design's kv_bits is 8).
    # Expected II about LANES / 2 (reads only) to LANES (read and write of the same array).
    ("runtime-index", "lane_reduce", ("q", "k"), "head_rmsnorm",
     "issue 27 item 5: head norm of q/k at a run-time head offset"),
    ("runtime-index", "rmsnorm_scale", ("q", "k"), "head_rmsnorm",
     "issue 27 item 5: head norm of q/k at a run-time head offset"),
    ("runtime-index", "rope", ("q", "k"), "rope_heads",
     "issue 27 item 5: RoPE of q/k at a run-time head offset"),
    ("runtime-index", "max_abs", ("k", "v"), "kv_write",
     "issue 27 item 5: int8 KV store reads k/v at a run-time head offset"),
    ("runtime-index", "quantize_codes", ("k", "v"), "kv_write",
     "issue 27 item 5: int8 KV store reads k/v at a run-time head offset"),
    # The int8 KV store writes the codes lane by lane under `if (i + l < n)`: the tail mask
    # keeps Vitis from widening the LANES byte writes into one beat. Expected about LANES
    # cycles per iteration (one byte write per cycle), not 1.
    ("burst", "quantize_codes", ("kv_k", "kv_v"), "kv_write",
     "issue 27 item 5: int8 KV store writes conditional (tail-masked) lanes"),
    # The tiled matrix unit (matmul_w8a8 / matmul_w4a8, not in the emitted top, which
    # streams): the tile loads zero-pad the matrix edge per byte (c + k < valid_cols ? ...),
    # the int4 load addresses (c0 + c) / 32 and the int4 group scale is read at
    # first / group under the group-end condition. Expected: no widening, about SIMD
    # (int8) or 16 (int4) cycles per iteration instead of 1.
    ("burst", "load_weight_tile", ("w",), "load_weight_tile_i8",
     "issue 27 item 4: tiled int8 weight load zero-pads per byte"),
    ("burst", "load_weight_tile", ("p",), "load_weight_tile_i4",
     "issue 27 item 4: tiled int4 weight load, conditional and divided address"),
    ("burst", "compute_tile", ("s4",), "compute_tile_i4",
     "issue 27 item 4: tiled int4 group scale read at first / group, conditional"),
    # The tiled int4 unit adds each finished group into one fp32 sum per (token, row):
    # when a group ends every iteration (group == 32 == SIMD) the sum is a recurrence of
    # the adder. Expected II about the fadd latency (4 to 8 cycles), not 1.
    ("accumulation", "compute_tile", ("sum",), "compute_tile_i4",
     "issue 27 item 4: tiled int4 group sums, one running fp32 sum per row"),
    # The emitted top's int4 matmul (overlay::matmul_int4) runs the tiled unit at one token:
    # its activation tile reads the top's codes array at the tile's run-time column offset,
    # and move_rows reads a row's bias word at r / PE under `bias_word >= 0`. Expected:
    # about SIMD / 2 cycles per activation word, one request per bias word.
    ("runtime-index", "load_activation_tile", ("codes",), "matmul_w4a8",
     "issue 27 item 4: int4 decode reads the codes at a run-time tile offset"),
    ("burst", "move_rows", ("params",), "move_rows",
     "issue 27 item 4: int4 decode reads each row's bias word, conditional"),
    # The emitted top's prompt call runs the tiled unit (overlay::matmul_block) on a block of
    # tokens: its activation tile reads the codes at the tile's run-time column offset c0 (a
    # multiple of tile_cols, hence of SIMD, the codes' partition factor, which the checker
    # cannot prove), as int4 decode does. Expected: as above, about SIMD / 2 cycles per
    # activation word unless Vitis proves the alignment.
    ("runtime-index", "load_activation_tile", ("codes",), "matmul_w8a8",
     "issue 28 item 4: the prompt call's tiled unit reads the codes at a run-time tile offset"),
)


class Lin:
    """The shape of one expression inside a pipelined loop. v: coefficient of the loop
    variable (None, 'ct' compile-time, 'rt' run-time invariant); terms: (kind, mult) for
    the other terms, kind in c (compile-time), u (unrolled), rt (invariant), var (varying),
    data; mult: a compile-time factor they are known to be multiplied by (1 if none);
    bad: why the expression is not affine; uvars: the unrolled variables it depends on;
    val: the value when compile-time and known."""
    __slots__ = ("v", "terms", "bad", "uvars", "val", "text")

    def __init__(self, v=None, terms=(), bad=None, uvars=frozenset(), val=None, text=""):
        self.v, self.terms, self.bad, self.uvars, self.val, self.text = v, tuple(terms), bad, uvars, val, text

    def kinds(self):
        return {k for k, _ in self.terms}

    def pure(self):  # no v, nothing unrolled, varying or data dependent
        return self.bad is None and self.v is None and self.kinds() <= {"c", "rt"}

    def compile_time(self):
        return self.bad is None and self.v is None and self.kinds() <= {"c"}


def lin_c(val=None, text=""):
    return Lin(terms=[("c", 1)], val=val, text=text)


def lin_bad(reason, text=""):
    return Lin(bad=reason, text=text)


def worst_coef(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return "rt" if "rt" in (a, b) else "ct"


def lin_add(a, b, op="+"):
    text = f"{a.text} {op} {b.text}"
    if a.bad or b.bad:
        return lin_bad(a.bad or b.bad, text)
    val = None
    if a.val is not None and b.val is not None:
        val = a.val + b.val if op == "+" else a.val - b.val
    return Lin(worst_coef(a.v, b.v), a.terms + b.terms, None, a.uvars | b.uvars, val, text)


def lin_mul(a, b):
    text = f"({a.text}) * ({b.text})"
    if a.bad or b.bad:
        return lin_bad(a.bad or b.bad, text)
    if a.v and b.v:
        return lin_bad("a product of the loop variable with itself", text)
    if a.uvars and b.uvars:
        return lin_bad("a product of unrolled variables", text)
    val = a.val * b.val if a.val is not None and b.val is not None else None
    if b.v or (not a.v and b.terms and not a.terms):
        a, b = b, a
    # b multiplies a: its kind is the worst of its terms.
    bk = b.kinds()
    rank = {"c": 0, "u": 1, "rt": 2, "var": 3, "data": 4}
    bkind = max(bk, key=lambda k: rank[k]) if bk else "c"
    if a.v and bkind in ("var", "data", "u"):
        return lin_bad("the loop variable times a value that changes inside the loop", text)
    v = None if not a.v else (a.v if bkind == "c" else "rt")
    terms = []
    for k, m in a.terms:
        kk = k if rank[k] >= rank[bkind] else bkind
        terms.append((kk, m * b.val if b.val is not None else m))
    if not a.terms and not a.v:
        terms = list(b.terms)
    return Lin(v, terms, None, a.uvars | b.uvars, val, text)


def lin_other(a, b, op):
    """/, %, >>, <<, &, |, ^ : fine on values that do not change with v."""
    text = f"({a.text}) {op} ({b.text})"
    if a.bad or b.bad:
        return lin_bad(a.bad or b.bad, text)
    if op == "<<" and b.val is not None and not b.v:
        return lin_mul(a, lin_c(1 << b.val, b.text))
    if a.v or b.v:
        return lin_bad(f"'{op}' applied to the loop variable", text)
    val = None
    if a.val is not None and b.val is not None:
        try:
            val = {"/": lambda x, y: int(x / y), "%": lambda x, y: x % y, ">>": lambda x, y: x >> y,
                   "<<": lambda x, y: x << y, "&": lambda x, y: x & y, "|": lambda x, y: x | y,
                   "^": lambda x, y: x ^ y}[op](a.val, b.val)
        except Exception:  # noqa: BLE001: division by zero and the like: unknown
            val = None
    kinds = a.kinds() | b.kinds()
    rank = {"c": 0, "u": 1, "rt": 2, "var": 3, "data": 4}
    k = max(kinds, key=lambda x: rank[x]) if kinds else "c"
    return Lin(None, [(k, 1)], None, a.uvars | b.uvars, val, text)


def lin_merge(a, b, text):
    if a.bad or b.bad:
        return lin_bad(a.bad or b.bad, text)
    return Lin(worst_coef(a.v, b.v), a.terms + b.terms, None, a.uvars | b.uvars, a.val if a.val == b.val else None,
               text)


def lin_data(a_list, text):
    """A value computed from operands (a comparison, a read, a call result)."""
    for a in a_list:
        if a.bad:
            return lin_bad(a.bad, text)
    if all(a.pure() for a in a_list):
        kinds = set().union(*(a.kinds() for a in a_list)) if a_list else {"c"}
        return Lin(None, [("rt" if "rt" in kinds else "c", 1)], None, frozenset(), None, text)
    return Lin(None, [("data", 1)], None, frozenset().union(*(a.uvars for a in a_list)), None, text)


TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+[uUlL]*|\d+\.\d*(?:[eE][-+]?\d+)?[fF]?|\.\d+(?:[eE][-+]?\d+)?[fF]?|"
                   r"\d+[eE][-+]?\d+[fF]?|\d+[uUlL]*)|([A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)|"
                   r"(->|<<|>>|<=|>=|==|!=|&&|\|\||\+\+|--|[-+*/%<>=!&|^~?:()\[\],.{}]))")
TEMPLATE_ARGS = re.compile(r"(\b[A-Za-z_][\w:]*)\s*<(?:[^<>;(){}]|<[^<>;(){}]*>)*>\s*(?=\()")


def tokenize(text):
    text = TEMPLATE_ARGS.sub(r"\1", text)
    out, i = [], 0
    while i < len(text):
        m = TOKEN.match(text, i)
        if not m or m.end() == i:
            if text[i:].strip() == "":
                break
            raise ValueError(f"cannot read {text[i:i + 20]!r}")
        i = m.end()
        if m.group(1):
            out.append(("num", m.group(1)))
        elif m.group(2):
            out.append(("name", re.sub(r"\s+", "", m.group(2))))
        else:
            out.append(("op", m.group(3)))
    return out


class Parser:
    """C expressions as tuples: ('num', text) ('name', n) ('member', base, field)
    ('index', base, idx) ('call', fn_ast, [args]) ('un', op, x) ('bin', op, a, b)
    ('?', c, a, b) ('init', [items]) ('assign', op, lhs, rhs)."""
    BIN = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"), ("+", "-"),
           ("*", "/", "%")]

    def __init__(self, text):
        self.t = tokenize(text)
        self.i = 0

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else ("end", "")

    def eat(self, op=None):
        tok = self.peek()
        if op is not None and tok != ("op", op):
            raise ValueError(f"expected {op}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self):
        e = self.assign()
        if self.peek()[0] != "end":
            raise ValueError(f"trailing {self.peek()[1]!r}")
        return e

    def assign(self):
        lhs = self.ternary()
        tok = self.peek()
        if tok[0] == "op" and tok[1] == "=":
            self.eat()
            return ("assign", "=", lhs, self.assign())
        return lhs

    def ternary(self):
        c = self.binary(0)
        if self.peek() == ("op", "?"):
            self.eat()
            a = self.assign()
            self.eat(":")
            b = self.assign()
            return ("?", c, a, b)
        return c

    def binary(self, level):
        if level == len(self.BIN):
            return self.unary()
        a = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in self.BIN[level]:
            op = self.eat()[1]
            a = ("bin", op, a, self.binary(level + 1))
        return a

    def unary(self):
        tok = self.peek()
        if tok[0] == "op" and tok[1] in ("-", "+", "!", "~", "*", "&", "++", "--"):
            self.eat()
            return ("un", tok[1], self.unary())
        if tok == ("op", "(") and self.peek(1)[0] == "name" and self.peek(2) == ("op", ")") and \
                self.peek(1)[1].split("::")[-1] in CAST_NAMES:
            self.i += 3  # C-style cast
            return self.unary()
        return self.postfix(self.primary())

    def postfix(self, e):
        while True:
            tok = self.peek()
            if tok == ("op", "["):
                self.eat()
                idx = self.assign()
                self.eat("]")
                e = ("index", e, idx)
            elif tok == ("op", "("):
                self.eat()
                args = []
                while self.peek() != ("op", ")"):
                    args.append(self.assign())
                    if self.peek() == ("op", ","):
                        self.eat()
                self.eat(")")
                e = ("call", e, args)
            elif tok[0] == "op" and tok[1] in (".", "->"):
                self.eat()
                e = ("member", e, self.eat()[1])
            elif tok[0] == "op" and tok[1] in ("++", "--"):
                self.eat()
                e = ("un", tok[1], e)
            else:
                return e

    def primary(self):
        tok = self.eat()
        if tok[0] in ("num", "name"):
            return tok
        if tok == ("op", "("):
            e = self.assign()
            self.eat(")")
            return e
        if tok == ("op", "{"):
            items = []
            while self.peek() != ("op", "}"):
                items.append(self.assign())
                if self.peek() == ("op", ","):
                    self.eat()
            self.eat("}")
            return ("init", items)
        raise ValueError(f"unexpected {tok[1]!r}")


PARSED = {}


def parse_expr(text):
    if text not in PARSED:
        try:
            PARSED[text] = Parser(text).parse()
        except (ValueError, IndexError):
            PARSED[text] = None
    return PARSED[text]


def split_args(text):
    """Top-level comma-separated parts of an argument list (brackets of every kind nest)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


LAMBDA = re.compile(r"\[[^\]]*\]\s*\(([^)]*)\)\s*(?:->\s*[\w:]+\s*)?\{")


class Lambda:
    def __init__(self, params, body, scope):
        self.params, self.body, self.scope = params, body, scope


def param_names(sig):
    """(name, type, dims) of each parameter in a parameter-list text."""
    out = []
    for p in split_args(sig):
        p = p.split("=")[0].strip()
        m = re.match(r"(.*?)\b([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", p)
        if not m or not m.group(1).strip():
            out.append((None, p, []))  # unnamed parameter
            continue
        out.append((m.group(2), m.group(1).strip(), re.findall(r"\[([^\]]*)\]", m.group(3))))
    return out


DECL = re.compile(r"^\s*(?:static\s+)?(?:const\s+)?(?:constexpr\s+)?(?:typename\s+)?"
                  r"((?:[A-Za-z_][\w:]*)(?:\s*<[^;{}()]*>)?(?:\s*::\s*\w+)*\s*[*&]*)\s+(?=[A-Za-z_])")


def local_decls(code, begin, end):
    """Declarations in code[begin:end] at statement level: name -> (type, dims, init text
    or None, position). Loop headers and lambdas' inner statements are included (names do
    not clash within the kernels' functions)."""
    out = {}
    pos = begin
    for stmt in statements(code[begin:end]):
        s = stmt
        start = pos
        pos += len(stmt)
        s = re.sub(r"^[\s{}]*", "", s).rstrip(";").strip()
        loop_var = re.match(r"for\s*\(", s) is not None
        s = re.sub(r"^for\s*\(", "", s)
        if not s or re.match(r"(return|if|else|break|continue|switch|case|default)\b", s):
            continue
        m = DECL.match(s)
        if not m:
            continue
        typ = m.group(1).strip()
        if typ.split("::")[-1] in KEYWORDS or typ in ("return", "else", "using", "typedef", "namespace"):
            continue
        for part in split_args(s[m.end():]):
            dm = re.match(r"([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)(?:=\s*(.*)|(\{.*\}))?$", part, re.S)
            if not dm:
                continue
            init = dm.group(3) if dm.group(3) is not None else dm.group(4)
            if loop_var:
                init = "@loop:" + stmt  # a loop variable: its start value says nothing about it later
            out.setdefault(dm.group(1), (typ, re.findall(r"\[([^\]]*)\]", dm.group(2)), init, start))
    return out


def statements(text):
    """text cut after every ';' and every block brace; the braces of an initializer list
    (after '=', ',', '(' or '{' of another list, or a name: T x{...}) stay in their statement."""
    out, cur, init = [], [], 0
    for k, ch in enumerate(text):
        cur.append(ch)
        if ch == "{":
            prev = text[:k].rstrip()[-1:] if text[:k].strip() else ""
            if init or prev in ("=", ",", "(") or (prev and (prev.isalnum() or prev == "_") and
                                                     not re.search(r"(\belse|\)|\bconst|\bnoexcept|\bdo)\s*$", text[:k])):
                init += 1
                continue
        elif ch == "}" and init:
            init -= 1
            continue
        if not init and ch in ";{}":
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


def assigned_names(code, begin, end):
    text = code[begin:end]
    names = set(re.findall(r"\b([A-Za-z_]\w*)\s*(?:\+\+|--|(?:[-+*/%&|^]|<<|>>)?=(?!=))", text))
    names |= set(re.findall(r"(?:\+\+|--)\s*([A-Za-z_]\w*)", text))
    return names


class Scope:
    """One function (or lambda) body as reached along one call chain."""

    def __init__(self, fn, body, params, parent=None, chain=()):
        self.fn, self.body, self.params, self.parent, self.chain = fn, body, params, parent, chain
        self.decls = {}
        self.varying = set()
        self.unrolled = {}
        self.lambdas = {}
        self.region = None  # the region whose loop variable lives here


class Region:
    def __init__(self, var, scope, loop_id, ii, pos, dep_pragmas):
        self.var, self.scope, self.loop_id, self.ii, self.pos = var, scope, loop_id, ii, pos
        self.dependences = dep_pragmas  # variable -> distance text
        self.accesses = []  # (ptr, idx Lins, is_write, conds, pos, chain, scope, stmt)
        self.accums = []


class IIChecker:
    def __init__(self, code, pragmas, defs, loops, values, constants):
        self.code, self.pragmas, self.defs, self.loops, self.values = code, pragmas, defs, loops, values
        self.constants = constants
        self.by_name = {}
        for d in defs:
            self.by_name.setdefault(d[0], []).append(d)
        self.findings = {}

    # -- names ------------------------------------------------------------------------
    def is_compile_time_name(self, name):
        return name in self.constants or "::" in name or name in ("true", "false", "nullptr", "INFINITY", "NAN")

    def value_of(self, name):
        v = self.values.get(name.split("::")[-1])
        if v is None and name.split("::")[-1] in self.constants:
            v = evaluate(name, self.values)
        return v

    def signature(self, d):
        name, sig, body, _ = d
        open_p = self.code.index("(", sig)
        return param_names(self.code[open_p + 1:matching(self.code, open_p)])

    def make_scope(self, d, bindings, parent_chain):
        name, sig, body, end = d
        params = {}
        for k, (pname, ptype, dims) in enumerate(self.signature(d)):
            if pname is None:
                continue
            params[pname] = (bindings[k] if k < len(bindings) else ("root", ptype, dims), ptype, dims)
        s = Scope(name, (body, end), params, None, parent_chain + (name,))
        s.decls = local_decls(self.code, body + 1, end)
        for lm in LAMBDA.finditer(self.code, body, end):
            # auto name = [&](...) { ... };
            head = self.code[max(body, lm.start() - 60):lm.start()]
            nm = re.search(r"\b([A-Za-z_]\w*)\s*=\s*$", head)
            if nm:
                bend = matching(self.code, lm.end() - 1, "{", "}")
                s.lambdas[nm.group(1)] = Lambda([p[0] for p in param_names(lm.group(1))], (lm.end() - 1, bend), s)
        return s

    def lambda_scope(self, lam, bindings, chain):
        params = {p: (bindings[k] if k < len(bindings) else ("root", "", []), "", []) for k, p in enumerate(lam.params)}
        s = Scope("lambda", lam.body, params, lam.scope, chain + ("lambda",))
        s.decls = local_decls(self.code, lam.body[0] + 1, lam.body[1])
        return s

    def lookup(self, scope, name):
        """(kind, payload, scope) for a name: kind in v, unrolled, param, varying, decl, lambda."""
        s = scope
        while s is not None:
            if s.region is not None and s.region.var == name:
                return ("v", None, s)
            if name in s.unrolled:
                return ("unrolled", s.unrolled[name], s)
            if name in s.params:
                return ("param", s.params[name], s)
            if name in s.lambdas:
                return ("lambda", s.lambdas[name], s)
            if name in s.varying:
                return ("varying", None, s)
            if name in s.decls:
                return ("decl", s.decls[name], s)
            s = s.parent
        return (None, None, None)

    # -- classification ---------------------------------------------------------------
    def classify_text(self, text, scope, depth=0):
        ast = parse_expr(text)
        if ast is None:
            return lin_bad(f"an expression this checker cannot read ({text.strip()[:40]})", text)
        return self.classify(ast, scope, depth)

    def classify(self, e, scope, depth=0):
        if depth > 40:
            return lin_bad("too deep", "")
        kind = e[0]
        if kind == "num":
            t = e[1].rstrip("uUlL")
            try:
                return lin_c(int(t, 0), e[1])
            except ValueError:
                return lin_c(None, e[1])
        if kind == "name":
            return self.classify_name(e[1], scope, depth)
        if kind == "member":
            base = self.classify(e[1], scope, depth + 1)
            if base.bad:
                return base
            return lin_data([base], f"{base.text}.{e[2]}") if not base.pure() else \
                Lin(None, [("rt", 1)] if not base.compile_time() else [("c", 1)], None, frozenset(), None,
                    f"{base.text}.{e[2]}")
        if kind == "index":
            base = self.classify(e[1], scope, depth + 1)
            idx = self.classify(e[2], scope, depth + 1)
            return lin_data([base, idx], f"{base.text}[{idx.text}]")
        if kind == "un":
            x = self.classify(e[2], scope, depth + 1)
            if e[1] in ("-", "+"):
                if e[1] == "-" and x.val is not None:
                    return Lin(x.v, x.terms, x.bad, x.uvars, -x.val, "-" + x.text)
                return x
            return lin_data([x], e[1] + x.text)
        if kind == "bin":
            op = e[1]
            a = self.classify(e[2], scope, depth + 1)
            b = self.classify(e[3], scope, depth + 1)
            if op in ("+", "-"):
                return lin_add(a, b, op)
            if op == "*":
                return lin_mul(a, b)
            if op in ("/", "%", "<<", ">>", "&", "|", "^"):
                return lin_other(a, b, op)
            return lin_data([a, b], f"{a.text} {op} {b.text}")
        if kind == "?":
            c = self.classify(e[1], scope, depth + 1)
            a = self.classify(e[2], scope, depth + 1)
            b = self.classify(e[3], scope, depth + 1)
            text = f"{c.text} ? {a.text} : {b.text}"
            if c.compile_time():
                if c.val is not None:
                    return a if c.val else b
                return lin_merge(a, b, text)
            if c.pure():
                return lin_merge(a, b, text)
            return lin_bad(f"a choice by a condition that changes inside the loop ({c.text})", text)
        if kind == "call":
            return self.classify_call(e, scope, depth)
        if kind == "init":
            return lin_data([self.classify(x, scope, depth + 1) for x in e[1]], "{...}")
        if kind == "assign":
            return self.classify(e[3], scope, depth + 1)
        return lin_bad("unknown", "")

    def classify_name(self, name, scope, depth):
        what, payload, s = self.lookup(scope, name)
        if what == "v":
            return Lin("ct", [], None, frozenset(), None, name)
        if what == "unrolled":
            return Lin(None, [("u", 1)], None, frozenset({(id(s), name, payload)}), None, name)
        if what == "param":
            binding = payload[0]
            if binding[0] == "expr":
                return self.classify_text(binding[1], binding[2], depth + 1)
            if binding[0] == "lambda":
                return Lin(None, [("rt", 1)], None, frozenset(), None, name)
            return Lin(None, [("rt", 1)], None, frozenset(), None, name)
        if what == "varying":
            return Lin(None, [("var", 1)], None, frozenset(), None, name)
        if what == "decl":
            typ, dims, init, _ = payload
            if init is not None and init.startswith("@loop:"):
                # an enclosing loop's variable: invariant here; a multiple of its step when
                # it starts at 0 (Vitis knows an induction variable's stride)
                parts = [""]
                for l in self.loops:
                    if payload[3] <= l[0] < payload[3] + 300 and re.search(r"\b" + name + r"\s*=", l[1].split(";")[0]):
                        parts = l[1].split(";")
                        break
                step = re.search(r"\+=\s*([^;)]+)", parts[2] if len(parts) > 2 else "")
                start = re.search(r"=\s*([^;]+)$", parts[0])
                mult = 1
                if start and evaluate(start.group(1), self.values) == 0:
                    mult = evaluate(step.group(1), self.values) if step else 1
                return Lin(None, [("rt", mult or 1)], None, frozenset(), None, name)
            if dims or init is None or name == init.strip():
                return Lin(None, [("rt", 1)], None, frozenset(), None, name)
            return self.classify_text(init, s, depth + 1)
        if self.is_compile_time_name(name):
            return lin_c(self.value_of(name), name)
        return Lin(None, [("rt", 1)], None, frozenset(), None, name)

    def callee_defs(self, fname, nargs):
        out = []
        for d in self.by_name.get(fname.split("::")[-1], []):
            params = [p for p in self.signature(d) if p[1].strip() not in ("", "void")]
            if len(params) >= nargs:
                out.append(d)
        return out

    def classify_call(self, e, scope, depth):
        fn = e[1]
        args = e[2]
        fname = fn[1] if fn[0] == "name" else None
        if fname and fname.split("::")[-1] in CAST_NAMES and len(args) == 1:
            return self.classify(args[0], scope, depth + 1)
        argl = [self.classify(a, scope, depth + 1) for a in args]
        if fname:
            what, payload, s = self.lookup(scope, fname)
            lam = payload if what == "lambda" else (payload[0][1] if what == "param" and payload[0][0] == "lambda" else None)
            if lam is not None:
                ret = re.fullmatch(r"\s*\{\s*return\s+([^;]+);\s*\}\s*", self.code[lam.body[0]:lam.body[1] + 1])
                if ret:
                    ls = self.lambda_scope(lam, [("expr", unparse(a), scope) for a in args], scope.chain)
                    return self.classify_text(ret.group(1), ls, depth + 1)
            for d in self.callee_defs(fname, len(args)):
                ret = re.fullmatch(r"\s*\{\s*return\s+([^;]+);\s*\}\s*", self.code[d[2]:d[3] + 1])
                if ret:
                    cs = self.make_scope(d, [("expr", unparse(a), scope) for a in args], scope.chain)
                    return self.classify_text(ret.group(1), cs, depth + 1)
        return lin_data(argl, f"{fname or 'call'}(...)")

    # -- pointers ---------------------------------------------------------------------
    def resolve_ptr(self, e, scope, depth=0):
        """What an expression points into: (kind, root, decl, indices, offset Lin) with kind
        'maxi' (an m_axi port of a top) or 'chip' (an on-chip array), or None."""
        if e is None or depth > 40:
            return None
        kind = e[0]
        if kind == "name":
            what, payload, s = self.lookup(scope, e[1])
            if what == "param":
                binding, ptype, dims = payload
                if binding[0] == "expr":
                    return self.resolve_ptr(parse_expr(binding[1]), binding[2], depth + 1)
                if binding[0] == "maxi":
                    return ("maxi", e[1], None, [], lin_c(0, ""))
                if binding[0] == "root" and binding[2]:
                    return ("chip", e[1], (s, ptype, dims), [], None)
                return None
            if what == "decl":
                typ, dims, init, _ = payload
                if dims:
                    if re.search(r"\b(Fifo|stream)\b", typ):
                        return None
                    return ("chip", e[1], (s, typ, dims), [], None)
                if init and not init.startswith("@loop:") and ("*" in typ or "&" in typ or "KvCache" in typ or init.strip().startswith("{")
                             or typ in ("auto",)):
                    return self.resolve_ptr(parse_expr(init), s, depth + 1)
            return None
        if kind == "member":
            field = self.struct_field(e[1], e[2], scope, depth + 1)
            if field is not None:
                return self.resolve_ptr(parse_expr(field[0]), field[1], depth + 1)
            base = self.resolve_ptr(e[1], scope, depth + 1)
            if base and base[0] == "maxi":
                return base
            return None
        if kind == "bin" and e[1] in ("+", "-"):
            a = self.resolve_ptr(e[2], scope, depth + 1)
            if a is not None:
                off = self.classify(e[3], scope, depth + 1)
                return (a[0], a[1], a[2], a[3], off if a[4] is None else lin_add(a[4], off, e[1]))
            if e[1] == "+":
                b = self.resolve_ptr(e[3], scope, depth + 1)
                if b is not None:
                    off = self.classify(e[2], scope, depth + 1)
                    return (b[0], b[1], b[2], b[3], off if b[4] is None else lin_add(b[4], off))
            return None
        if kind == "index":
            base = self.resolve_ptr(e[1], scope, depth + 1)
            if base is None or base[0] != "chip":
                return None
            idx = self.classify(e[2], scope, depth + 1)
            if base[4] is not None:
                idx = lin_add(base[4], idx)
            return ("chip", base[1], base[2], base[3] + [idx], None)
        if kind in ("call", "init"):
            args = e[2] if kind == "call" else e[1]
            if kind == "call" and e[1][0] == "name" and e[1][1].split("::")[-1] in CAST_NAMES and args:
                return self.resolve_ptr(args[0], scope, depth + 1)
            for a in args:
                p = self.resolve_ptr(a, scope, depth + 1)
                if p is not None and p[0] == "maxi":
                    return ("maxi", p[1], None, [], Lin(None, [("rt", 1)], None, frozenset(), None, "..."))
            return None
        if kind == "un" and e[1] == "&":
            return self.resolve_ptr(e[2], scope, depth + 1)
        return None

    def struct_fields(self, typ):
        """The data members of struct `typ` in declaration order."""
        name = re.sub(r"<.*", "", typ.split("::")[-1] if "<" not in typ else typ.split("<")[0].split("::")[-1]).strip()
        m = re.search(r"\bstruct\s+" + re.escape(name) + r"\s*\{", self.code)
        if not m:
            return None
        end = matching(self.code, m.end() - 1, "{", "}")
        body = self.code[m.end():end]
        return [f.group(1) for f in re.finditer(r"^\s*(?!static|using|typedef)[\w:<>]+\s*[*&]?\s*([A-Za-z_]\w*)\s*;", body, re.M)]

    def struct_field(self, e, field, scope, depth):
        """(initializer text, its scope) of member `field` of the struct value `e` when it is
        built by a brace list the code shows (through parameters and returned locals)."""
        if depth > 40 or e is None:
            return None
        if e[0] == "name":
            what, payload, s = self.lookup(scope, e[1])
            if what == "param" and payload[0][0] == "expr":
                return self.struct_field(parse_expr(payload[0][1]), field, payload[0][2], depth + 1)
            if what == "decl" and payload[2] and payload[2].strip().startswith("{"):
                fields = self.struct_fields(payload[0])
                items = split_args(payload[2].strip()[1:-1])
                if fields and field in fields and fields.index(field) < len(items):
                    return items[fields.index(field)], s
            return None
        if e[0] == "call" and e[1][0] == "name":
            for d in self.callee_defs(e[1][1], len(e[2])):
                ret = re.search(r"\breturn\s+([A-Za-z_]\w*)\s*;", self.code[d[2]:d[3]])
                if ret:
                    cs = self.make_scope(d, [("expr", unparse(a), scope) for a in e[2]], scope.chain)
                    return self.struct_field(("name", ret.group(1)), field, cs, depth + 1)
        return None


def unparse(e):
    k = e[0]
    if k in ("num", "name"):
        return e[1]
    if k == "member":
        return f"{unparse(e[1])}.{e[2]}"
    if k == "index":
        return f"{unparse(e[1])}[{unparse(e[2])}]"
    if k == "call":
        return f"{unparse(e[1])}({', '.join(unparse(a) for a in e[2])})"
    if k == "un":
        return f"{e[1]}({unparse(e[2])})" if e[1] not in ("++", "--") else f"{e[1]}{unparse(e[2])}"
    if k == "bin":
        return f"({unparse(e[2])} {e[1]} {unparse(e[3])})"
    if k == "?":
        return f"({unparse(e[1])} ? {unparse(e[2])} : {unparse(e[3])})"
    if k == "init":
        return "{" + ", ".join(unparse(a) for a in e[1]) + "}"
    if k == "assign":
        return f"{unparse(e[2])} = {unparse(e[3])}"
    return "?"


class IIWalker(IIChecker):
    """Walks the call graph from the roots and checks every pipelined loop reached."""

    def __init__(self, *args, trip_id=None, **kw):
        super().__init__(*args, **kw)
        self.trip_id = trip_id

    def pipelined_loops(self, b, e):
        """The outermost pipelined loops in code[b:e] (the PIPELINE pragma directly in them)."""
        out = []
        for pos, text in self.pragmas:
            if not (b < pos < e) or not is_pipeline(text):
                continue
            loop = enclosing(self.loops, pos)
            if loop is None or not (b < loop[0] < e):
                continue
            out.append((loop, text))
        outer = [(l, t) for l, t in out if not any(o[0][2] < l[0] < o[0][3] for o in out if o[0] is not l)]
        return outer

    def loop_vars(self, b, e):
        out = {}
        for l in self.loops:
            if b < l[0] < e:
                m = re.match(r"\s*(?:[\w:<>]+\s+)*([A-Za-z_]\w*)\s*=", l[1].split(";")[0])
                if m:
                    out[m.group(1)] = trip_count(l[1], self.values)
        return out

    def varying_in(self, b, e):
        names = assigned_names(self.code, b, e)
        decls = local_decls(self.code, b, e)
        out = set()
        text = self.code[b:e]
        for n in names:
            if n in decls:
                k = len(re.findall(r"\b" + n + r"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)", text))
                k += len(re.findall(r"(?:\+\+|--)\s*" + n + r"\b|\b" + n + r"\s*(?:\+\+|--)", text))
                if k <= 1 and decls[n][2] is not None:
                    continue
                if k == 0:
                    continue
            out.add(n)
        return out

    def calls_at(self, b, e, skip):
        for m in re.finditer(r"\b([A-Za-z_][\w:]*)\s*(?:<(?:[^<>;(){}]|<[^<>;(){}]*>)*>)?\s*\(", self.code[b:e]):
            p = b + m.start()
            name = m.group(1)
            if any(s <= p <= t for s, t in skip) or name.split("::")[-1] in KEYWORDS | CAST_NAMES:
                continue
            if self.code[max(0, p - 2):p] == "->" or self.code[p - 1:p] == ".":
                continue  # a member function (fifo.read())
            open_p = b + m.end() - 1
            close = matching(self.code, open_p)
            yield p, name, split_args(self.code[open_p + 1:close])

    def bindings(self, args, scope):
        out = []
        for a in args:
            lm = LAMBDA.match(a)
            if lm:
                # find the lambda in the code to get its body span
                out.append(("lambda", None, a))
                continue
            what, payload, _ = self.lookup(scope, a.strip()) if re.fullmatch(r"\s*[A-Za-z_]\w*\s*", a) else (None, None, None)
            if what == "lambda":
                out.append(("lambda", payload))
            elif what == "param" and payload[0][0] == "lambda":
                out.append(payload[0])
            else:
                out.append(("expr", a, scope))
        return out

    def lambdas_in_args(self, call_pos, scope, binds):
        """Binds literal lambda arguments to their bodies in the code."""
        open_p = self.code.index("(", call_pos)
        close = matching(self.code, open_p)
        spans = []
        for lm in LAMBDA.finditer(self.code, open_p, close):
            bend = matching(self.code, lm.end() - 1, "{", "}")
            spans.append(Lambda([p[0] for p in param_names(lm.group(1))], (lm.end() - 1, bend), scope))
        k = 0
        out = []
        for bnd in binds:
            if bnd[0] == "lambda" and bnd[1] is None:
                out.append(("lambda", spans[k] if k < len(spans) else None))
                k += 1
            else:
                out.append(bnd)
        return out

    def callees(self, p, name, args, scope):
        """(scope, span) of each function or lambda a call may run."""
        binds = self.lambdas_in_args(p, scope, self.bindings(args, scope))
        what, payload, _ = self.lookup(scope, name) if "::" not in name else (None, None, None)
        lam = payload if what == "lambda" else (payload[0][1] if what == "param" and payload[0][0] == "lambda" else None)
        if lam is not None:
            return [(self.lambda_scope(lam, binds, scope.chain), lam.body)]
        out = []
        if len(scope.chain) > 14:
            return out
        for d in self.callee_defs(name, len(args)):
            if d[0] in scope.chain:
                continue
            out.append((self.make_scope(d, binds, scope.chain), (d[2], d[3])))
        return out

    def lambda_spans(self, b, e):
        out = []
        for lm in LAMBDA.finditer(self.code, b, e):
            out.append((lm.start(), matching(self.code, lm.end() - 1, "{", "}")))
        return out

    # -- walking ----------------------------------------------------------------------
    def run(self, roots, maxi):
        for d in roots:
            scope = self.make_scope(d, [], ())
            for pname in list(scope.params):
                if pname in maxi.get(d[0], ()):
                    binding, ptype, dims = scope.params[pname]
                    scope.params[pname] = (("maxi",), ptype, dims)
            self.walk(scope, (d[2], d[3]))

    def walk(self, scope, span):
        b, e = span
        regions = self.pipelined_loops(b, e)
        skip = [(l[0], l[3]) for l, _ in regions] + self.lambda_spans(b, e)
        for loop, text in regions:
            self.analyze_region(scope, loop, text)
        for p, name, args in self.calls_at(b, e, skip):
            for cs, cspan in self.callees(p, name, args, scope):
                self.walk(cs, cspan)

    def analyze_region(self, scope, loop, pipeline_text):
        start, header, lb, le = loop
        m = re.match(r"\s*(?:[\w:<>]+\s+)*([A-Za-z_]\w*)\s*=", header.split(";")[0])
        if not m:
            return
        iim = re.search(r"\bII\s*=\s*([\w:]+)", pipeline_text)
        ii = evaluate(iim.group(1), self.values) if iim else 1
        deps = {}
        for pos, text in self.pragmas:
            if lb < pos < le and enclosing(self.loops, pos) is loop:
                dm = re.match(r"DEPENDENCE\b.*\bvariable\s*=\s*([\w.]+)", text, re.IGNORECASE)
                dist = re.search(r"\bdistance\s*=\s*([\w:]+)", text)
                if dm and dist and re.search(r"\binter\b", text) and re.search(r"\btrue\b", text):
                    deps[dm.group(1)] = evaluate(dist.group(1), self.values)
        loop_id = self.trip_id(lb, le) or f"{scope.fn}()"
        region = Region(m.group(1), scope, loop_id, ii, start, deps)
        saved = (scope.region, scope.varying, scope.unrolled)
        scope.region = region
        scope.varying = self.varying_in(lb, le) - {m.group(1)}
        scope.unrolled = dict(scope.unrolled)
        scope.unrolled.update(self.loop_vars(lb, le))
        self.scan(scope, (lb, le), region, [])
        scope.region, scope.varying, scope.unrolled = saved
        self.check_region(region)

    def conditions_at(self, scope, b, e, p):
        out = []
        text = self.code
        for m in re.finditer(r"\bif\s*\(", text[b:e]):
            o = b + m.end() - 1
            c = matching(text, o)
            k = c + 1
            while k < e and text[k].isspace():
                k += 1
            if k < e and text[k] == "{":
                end = matching(text, k, "{", "}")
            else:
                end = text.find(";", k)
            stmt = text[k:end + 1].strip().strip("{};").strip()
            if stmt in ("break", "continue"):
                continue
            cond = text[o + 1:c]
            if k <= p <= end:
                out.append(cond)
                continue
            j = end + 1
            while j < e and text[j].isspace():
                j += 1
            if text.startswith("else", j):
                j += 4
                while j < e and text[j].isspace():
                    j += 1
                eend = matching(text, j, "{", "}") if j < e and text[j] == "{" else text.find(";", j)
                if j <= p <= eend:
                    out.append(cond)
        # a ?: whose branch holds p
        s0 = max(text.rfind(";", b, p), text.rfind("{", b, p), text.rfind("}", b, p), b)
        prefix = text[s0 + 1:p]
        q = prefix.rfind("?")
        if q >= 0 and ":" not in prefix[q:].replace("::", ""):
            head = prefix[:q]
            cut, depth = 0, 0
            for k in range(len(head) - 1, -1, -1):
                ch = head[k]
                if ch == ")":
                    depth += 1
                elif ch == "(":
                    if depth == 0:
                        cut = k + 1
                        break
                    depth -= 1
                elif depth == 0 and ch == "=" and head[k - 1:k] not in ("=", "!", "<", ">") and head[k + 1:k + 2] != "=":
                    cut = k + 1
                    break
                elif depth == 0 and ch == ",":
                    cut = k + 1
                    break
            out.append(re.sub(r"^\s*return\b", "", head[cut:]))
        return [(c, self.classify_text(c, scope)) for c in out]  # classified while the region is active

    def scan(self, scope, span, region, conds):
        b, e = span
        skip = self.lambda_spans(b + 1, e)
        code = self.code
        for m in re.finditer(r"([A-Za-z_]\w*(?:\s*(?:\.|->)\s*[A-Za-z_]\w*)*)\s*\[", code[b:e]):
            p = b + m.start()
            if any(s <= p <= t for s, t in skip):
                continue
            before = code[max(0, p - 40):p]
            if re.search(r"(\.|->|::)\s*$", before):
                continue
            pw = re.search(r"([A-Za-z_]\w*|[>*&])\s*$", before)
            if pw and pw.group(1) not in ("return", "else", "case") and not re.search(r"\b(return|else)\s*$", before):
                if pw.group(1) in ("*", "&"):
                    pass  # a product or an address: an access
                elif pw.group(1) == ">":
                    if re.search(r"\w\s*<[^<>;]*>\s*$", before):
                        continue  # a declaration: "Fifo<T, 4> name[N]"
                else:
                    continue  # a declaration: "float acc[...]"
            k = b + m.end() - 1
            idx = []
            while k < e and code[k] == "[":
                close = matching(code, k, "[", "]")
                idx.append(code[k + 1:close])
                k = close + 1
                while k < e and code[k] == " ":
                    k += 1
            after = code[k:k + 3]
            is_write = bool(re.match(r"\s*(=(?!=)|[-+*/%&|^]=|\+\+|--)", after)) or before.rstrip().endswith(("++", "--"))
            ptr = self.resolve_ptr(parse_expr(m.group(1)), scope)
            if ptr is None:
                continue
            lins = [self.classify_text(t, scope) for t in idx]
            here = conds + self.conditions_at(scope, b, e, p)
            region.accesses.append((ptr, lins, is_write, here, p, scope.chain, code[p:k]))
        # accumulations: x += e, x -= e, x = x + e, x = e + x
        for m in re.finditer(r"([A-Za-z_]\w*)\s*((?:\[[^\[\];]*(?:\[[^\[\];]*\][^\[\];]*)*\]\s*)*)(\+=|-=|=(?!=))([^;]*);",
                             code[b:e]):
            p = b + m.start()
            if any(s <= p <= t for s, t in skip):
                continue
            prev = code[max(b, p - 30):p]
            if re.search(r"[\w.>]\s*$", prev) and not re.search(r"\belse\s*$", prev):
                continue  # a declaration (float s = ...) or a member (a.x += ...)
            lhs = (m.group(1) + m.group(2)).replace(" ", "")
            rhs = m.group(4)
            if m.group(3) == "=":
                r = rhs.replace(" ", "")
                if not (r.startswith(lhs + "+") or r.startswith(lhs + "-") or r.endswith("+" + lhs)):
                    continue
            self.note_accumulation(scope, region, m.group(1), m.group(2), p, (b, e))
        for p, name, args in self.calls_at(b, e, skip):
            here = conds + self.conditions_at(scope, b, e, p)
            for cs, cspan in self.callees(p, name, args, scope):
                cs.varying = self.varying_in(cspan[0], cspan[1])
                cs.unrolled = self.loop_vars(cspan[0], cspan[1])
                self.scan(cs, cspan, region, here)

    def float_type(self, scope, name):
        what, payload, s = self.lookup(scope, name)
        if what == "decl":
            return re.search(r"\b(float|double)\b", payload[0]) is not None, s, "decl"
        if what == "param":
            binding, ptype, dims = payload
            if binding[0] == "expr":
                base = re.match(r"\s*([A-Za-z_]\w*)", binding[1])
                if base and re.search(r"\b(float|double)\b", ptype):
                    return True, s, "param"
                return bool(re.search(r"\b(float|double)\b", ptype)), s, "param"
            return bool(re.search(r"\b(float|double)\b", ptype)), s, "param"
        if what == "varying":
            # a local assigned in the loop: its declaration is in an enclosing scope
            ss = s
            while ss is not None and name not in ss.decls:
                ss = ss.parent
            if ss is not None:
                return re.search(r"\b(float|double)\b", ss.decls[name][0]) is not None, s, "decl"
        return False, s, None

    def note_accumulation(self, scope, region, name, index_text, p, span):
        is_float, s, how = self.float_type(scope, name)
        if not is_float:
            return
        if not index_text.strip():
            # a scalar: carried if it lives outside the region (declared before the loop in
            # the region's own function, or a parameter there)
            if s is not region.scope:
                return
            decl = s.decls.get(name)
            if decl is not None and region.pos < decl[3]:
                return  # declared inside the loop: a new value each iteration
            root = name
        else:
            ptr = self.resolve_ptr(parse_expr(name), scope)
            if ptr is None or ptr[0] != "chip":
                return
            idx = [self.classify_text(t, scope) for t in re.findall(r"\[([^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*)\]", index_text)]
            if ptr[4] is not None and idx:
                idx[0] = lin_add(ptr[4], idx[0])
            if any(x.v or x.bad for x in idx):
                return  # a different element each iteration
            decl_scope = ptr[2][0]
            decl = decl_scope.decls.get(ptr[1]) if isinstance(decl_scope, Scope) else None
            if decl_scope is region.scope and decl is not None and region.pos < decl[3]:
                return  # an array declared inside the loop body: new elements each iteration
            if decl_scope is not region.scope and not any(decl_scope is ss for ss in self.scopes_up(region.scope)):
                if isinstance(decl_scope, Scope) and decl_scope.chain[:len(region.scope.chain)] == region.scope.chain \
                        and len(decl_scope.chain) > len(region.scope.chain):
                    return  # an array of a callee: per iteration
            root = ptr[1]
        dist = region.dependences.get(root)
        if region.ii is not None and region.ii >= FADD_LATENCY:
            return
        if dist is not None and dist >= FADD_LATENCY:
            return
        region.accums.append((p, root, scope.chain, dist))

    def scopes_up(self, s):
        while s is not None:
            yield s
            s = s.parent

    # -- the rules --------------------------------------------------------------------
    def add(self, rule, pos, msg, loop_id, target, chain):
        key = (rule, pos, loop_id, target, msg)
        if key not in self.findings:
            self.findings[key] = (rule, pos, msg, loop_id, target, chain)

    def array_partitions(self, ptr):
        s, typ, dims = ptr[2]
        name = ptr[1]
        b, e = s.body if isinstance(s, Scope) else (0, 0)
        found = {}
        for pos, text in self.pragmas:
            if not (b <= pos <= e) and not (s.parent is None and b <= pos <= e):
                continue
            # A cyclic ARRAY_RESHAPE by f packs f elements in one word: f per access, as f banks.
            m = re.match(r"ARRAY_(?:PARTITION|RESHAPE)\b(.*)", text, re.IGNORECASE)
            if not m or not re.search(r"\bvariable\s*=\s*" + re.escape(name) + r"\b(?![.\w])", m.group(1)):
                continue
            rest = m.group(1)
            dm = re.search(r"\bdim\s*=\s*(\d+)", rest)
            dim = int(dm.group(1)) if dm else 1
            fm = re.search(r"\bfactor\s*=\s*([\w:]+)", rest)
            kind = "complete" if re.search(r"\bcomplete\b", rest) else ("block" if re.search(r"\bblock\b", rest) else "cyclic")
            targets = range(1, len(dims) + 1) if dim == 0 else [dim]
            for d in targets:
                if kind == "complete":
                    size = evaluate(dims[d - 1], self.values) if d - 1 < len(dims) else None
                    found[d] = ("complete", size)
                else:
                    found[d] = (kind, evaluate(fm.group(1), self.values) if fm else None)
        return found

    def check_region(self, region):
        where = f"pipelined loop {region.loop_id}"
        chip = {}
        for ptr, lins, is_write, conds, pos, chain, text in region.accesses:
            via = " > ".join(chain)
            if ptr[0] == "maxi":
                addr = lins[0] if lins else lin_c(0)
                if ptr[4] is not None:
                    addr = lin_add(ptr[4], addr)
                reason = addr.bad
                if not reason and addr.kinds() & {"var", "data"}:
                    names = "a value set inside the loop" if "var" in addr.kinds() else "a value read inside the loop"
                    reason = f"the address depends on {names}, not on the loop variable alone"
                if not reason:
                    for c, cl in conds:
                        if not cl.pure():
                            reason = f"the access is conditional on '{' '.join(c.split())}'"
                            break
                if reason:
                    self.add("burst", pos, f"m_axi port '{ptr[1]}' {'written' if is_write else 'read'} at "
                                           f"{' '.join(text.split())} in the {where} ({via}): {reason}; no burst "
                                           "can be inferred", region.loop_id, ptr[1], chain)
                continue
            full = list(ptr[3])
            if lins:
                first = lins[0] if ptr[4] is None else lin_add(ptr[4], lins[0])
                full += [first] + lins[1:]
            chip.setdefault((id(ptr[2][0]), ptr[1]), []).append((ptr, full, is_write, pos, chain, text))
        for (_, name), accs in chip.items():
            ptr = accs[0][0]
            parts = self.array_partitions(ptr)
            # The dimensions the iteration's accesses spread over: an unrolled variable in
            # the index, or different indices at different places.
            spread = set()
            texts_at = {}
            for p, full, is_write, pos, chain, text in accs:
                for d, lin in enumerate(full, start=1):
                    texts_at.setdefault(d, set()).add(lin.text)
                    if lin.uvars:
                        spread.add(d)
            spread |= {d for d, ts in texts_at.items() if len(ts) > 1}
            # runtime-index: every index on a cyclic/block partitioned dimension the accesses
            # spread over (one run-time bank for all of them is a multiplexer, not a conflict)
            for p, full, is_write, pos, chain, text in accs:
                for d, lin in enumerate(full, start=1):
                    part = parts.get(d)
                    if not part or part[0] == "complete" or d not in spread:
                        continue
                    factor = part[1]
                    reason = lin.bad
                    if not reason and "data" in lin.kinds():
                        reason = "the index is a value read inside the loop"
                    if not reason and lin.v == "rt":
                        reason = "the loop variable has a run-time stride"
                    if not reason:
                        for k, mult in lin.terms:
                            if k in ("rt", "var") and not (factor and mult % factor == 0):
                                reason = "it adds a run-time offset (" + ("a value set inside the loop" if k == "var"
                                                                         else "a value fixed only at run time") + \
                                         f") whose bank is not known at compile time"
                                break
                    if reason:
                        self.add("runtime-index", pos, f"'{name}' ({part[0]} factor {factor} on dim {d}) indexed at "
                                                       f"{' '.join(text.split())} in the {where} "
                                                       f"({' > '.join(chain)}): {reason}", region.loop_id, name, chain)
            # partition: ports needed per cycle against the banks
            distinct = {}
            for p, full, is_write, pos, chain, text in accs:
                key = (tuple(l.text for l in full), is_write)
                copies = 1
                unknown = False
                for l in full:
                    for _, uname, trip in l.uvars:
                        if trip is None:
                            unknown = True
                        else:
                            copies *= trip
                if unknown:
                    continue
                distinct[key] = (copies, full, pos, chain, text)
            ports = sum(v[0] for v in distinct.values())
            if ports <= 2:
                continue
            varying_dims = set()
            for copies, full, pos, chain, text in distinct.values():
                for d, l in enumerate(full, start=1):
                    if l.uvars:
                        varying_dims.add(d)
            texts_by_dim = {}
            for key in distinct:
                for d, t in enumerate(key[0], start=1):
                    texts_by_dim.setdefault(d, set()).add(t)
            varying_dims |= {d for d, ts in texts_by_dim.items() if len(ts) > 1}
            banks, unknown = 1, False
            for d in varying_dims:
                part = parts.get(d)
                if part is None:
                    continue
                if part[0] == "complete":
                    banks = None  # registers: any number of accesses per cycle
                    break
                if part[1] is None:
                    unknown = True
                else:
                    banks *= part[1]
            if unknown or banks is None or ports <= 2 * banks:
                continue
            first = min(distinct.values(), key=lambda v: v[2])
            self.add("partition", first[2], f"'{name}' is accessed at {ports} places per iteration of the {where} "
                                            f"({' > '.join(first[3])}) but has {banks} bank(s) of 2 ports "
                                            f"({', '.join(f'dim {d}: {parts[d][0]} {parts[d][1]}' for d in sorted(parts)) or 'not partitioned'}): "
                                            f"II >= {-(-ports // (2 * banks))}", region.loop_id, name, first[3])
        for p, root, chain, dist in region.accums:
            self.add("accumulation", p, f"floating-point accumulation into '{root}' carried across iterations of the "
                                        f"{where} ({' > '.join(chain)}) at II={region.ii} with "
                                        f"{'a dependence distance of ' + str(dist) if dist else 'one running sum'}, "
                                        f"fewer partial sums than the adder's latency ({FADD_LATENCY}): "
                                        f"II >= {FADD_LATENCY}", region.loop_id, root, chain)


def check_ii(code, pragmas, defs, loops, values, constants, top, report, trip_id):
    tops = set(top) if top else {m.group(1) for m in re.finditer(r'extern\s*""\s*(?:[\w:<>\s\*&]+?)\b([A-Za-z_]\w*)\s*\(', code)}
    calls = call_graph(code, defs)
    called = set().union(*calls.values()) if calls else set()
    roots = [d for d in defs if d[0] in tops] if tops else [d for d in defs if d[0] not in called]
    maxi = {}
    for pos, text in pragmas:
        m = re.match(r"INTERFACE\s+m_axi\b.*\bport\s*=\s*(\w+)", text, re.IGNORECASE)
        fn = enclosing(defs, pos)
        if m and fn is not None and fn[0] in tops:
            maxi.setdefault(fn[0], set()).add(m.group(1))
    w = IIWalker(code, pragmas, defs, loops, values, constants, trip_id=trip_id)
    w.run(roots, maxi)
    for rule, pos, msg, loop_id, target, chain in sorted(w.findings.values(), key=lambda f: (f[1], f[0], f[2])):
        known = [k for k in KNOWN_FINDINGS if k[0] == rule and k[1] == loop_id and target in k[2] and k[3] in chain]
        report(rule, pos, msg, known[0][4] if known else None)


def check_sources(texts, findings, top, budget, known=None):
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

    def trip_id(b, e):
        first, last = locate(b), locate(e)
        path, lb = first.rsplit(":", 1)
        if last.rsplit(":", 1)[0] != path:
            return None
        lines = texts[path].split("\n")[int(lb) - 1:int(last.rsplit(":", 1)[1])]
        m = re.search(r'FPGALLM_TRIP\("([^"]+)"\)', "\n".join(lines))
        return m.group(1) if m else None

    def report_ii(rule, pos, msg, known_why):
        if known_why is None:
            report(rule, pos, msg)
        elif known is not None:
            known.append((rule, f"{locate(pos)}: [{rule}] known: {msg} ({known_why})"))

    check_ii(code, pragmas, defs, loops, values, compile_time_names(code), top, report_ii, trip_id)


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
    findings, known = [], []
    check_sources(texts, findings, top, budget, known)
    if expect:
        hit = [msg for rule, msg in findings if rule == expect]
        for msg in hit:
            print("caught as expected:", msg)
        if not hit:
            print(f"rule '{expect}' was not caught in {', '.join(files)}", file=sys.stderr)
        return 0 if hit else 1
    for _, msg in known:
        print(msg)
    for _, msg in findings:
        print(msg, file=sys.stderr)
    print(f"{len(files)} file(s) checked, {len(findings)} finding(s)" +
          (f", {len(known)} known finding(s) allowed (KNOWN_FINDINGS)" if known else ""))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
