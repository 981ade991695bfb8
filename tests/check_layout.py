#!/usr/bin/env python3
"""check_layout.py [ROOT]: the layout rules of dsolve that a compiler does not check (issue 12).

Prints every violation as `path:line: why` and exits 1 if there is one, else prints a summary and exits 0:
  (a) DSOLVE_HAVE_CUDA in a file of src/, io/ or tests/ other than src/backend/registry.c (CMakeLists.txt
      files define it; CUDA files, *.cu, *_cuda.c and backend_cuda*.c, may test it);
  (b) a backend told apart by name or by address outside src/backend/registry.c (strcmp on be->name,
      `name, "cuda")`, `== &ds_backend_cpu`, ...): code asks the backend's table instead;
  (c) an #include loop among the modules of src/, io/ and kernels/ (foo.c and foo.h of one folder are one
      module; quoted includes resolve against the including file's folder, then src, io and kernels);
  (d) a source file of src/, io/, kernels/ or tests/ over 500 lines;
  (e) a function over 80 lines (a definition at column 0 through its `}` at column 0) without the word
      "long" in the comment block right above it, saying why.
ROOT defaults to the folder above this script's. Needs only python3's standard library.
"""
import os
import re
import sys

MAX_FILE_LINES = 500
MAX_FUNC_LINES = 80
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
REGISTRY = "src/backend/registry.c"
SELF = ("tests/check_layout.py", "tests/check_layout.sh")


def walk(root, tops, exts=None):
    """Relative paths of the files under the folders tops (sorted), those ending in exts when given."""
    out = []
    for top in tops:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in sorted(files):
                if exts is None or f.endswith(exts):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return out


def read_lines(root, rel):
    try:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            return f.read().split("\n")
    except OSError:
        return []


def strip_comments(lines):
    """The lines with // and /* */ comments blanked (string literals kept, line numbers unchanged)."""
    out, in_block = [], False
    for line in lines:
        res, i, n, in_str = [], 0, len(line), None
        while i < n:
            c = line[i]
            if in_block:
                if line.startswith("*/", i):
                    in_block = False
                    i += 2
                else:
                    i += 1
                continue
            if in_str:
                res.append(c)
                if c == "\\" and i + 1 < n:
                    res.append(line[i + 1])
                    i += 2
                    continue
                if c == in_str:
                    in_str = None
                i += 1
                continue
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block = True
                i += 2
                continue
            if c in "\"'":
                in_str = c
            res.append(c)
            i += 1
        out.append("".join(res))
    return out


def is_cuda_file(rel):
    base = os.path.basename(rel)
    return (rel.startswith("kernels/") or base.endswith((".cu", ".cuh")) or base.endswith("_cuda.c")
            or base.startswith("backend_cuda"))


# (a) ------------------------------------------------------------------------------------------------
def check_have_cuda(root, out):
    for rel in walk(root, ("src", "io", "tests")):
        if rel == REGISTRY or rel in SELF or os.path.basename(rel) == "CMakeLists.txt" or is_cuda_file(rel):
            continue
        for no, line in enumerate(read_lines(root, rel), 1):
            if "DSOLVE_HAVE_CUDA" in line:
                out.append((rel, no, "DSOLVE_HAVE_CUDA outside %s: ask the backend registry instead" % REGISTRY))


# (b) ------------------------------------------------------------------------------------------------
_NAMES = r'"(?:cpu|cuda|gpu|host|device)"'
_BE_NAME = r"\b(?:be|backend)\w*\s*(?:->|\.)\s*name\b"  # be->name, ctx->be->name, backend.name
_CMP = r"\bstr(?:n|case|ncase)?cmp\s*\("
BACKEND_ID = [
    (re.compile(r"(?:->|\.)\s*name\s*,\s*" + _NAMES), "a backend's name compared with a literal"),
    (re.compile(_NAMES + r"\s*,\s*[\w.\->\[\]]*(?:->|\.)\s*name\b"), "a backend's name compared with a literal"),
    (re.compile(r"\b\w*name\s*,\s*" + _NAMES + r"\s*\)"), "a name compared with a backend's name"),
    (re.compile(_BE_NAME + r"\s*(?:[!=]=|\[)"), "a backend's name compared or inspected"),
    (re.compile(r"[!=]=\s*&?\s*ds_backend_(?:cpu|cuda)\w*\b"), "a backend compared by address"),
    (re.compile(r"&\s*ds_backend_(?:cpu|cuda)\w*\s*[!=]="), "a backend compared by address"),
    (re.compile(r"[!=]=\s*ds_backend_find\s*\(|ds_backend_find\s*\([^;]*\)\s*[!=]="),
     "a backend compared with a registry look-up"),
]


def call_args(line, open_paren):
    """The text between the parenthesis at index open_paren and its match (or the line's end)."""
    depth = 0
    for k in range(open_paren, len(line)):
        depth += {"(": 1, ")": -1}.get(line[k], 0)
        if depth == 0:
            return line[open_paren + 1:k]
    return line[open_paren + 1:]


def names_backend_in_cmp(line):
    """Whether a strcmp-like call has a backend's name among its own arguments (printing one is fine)."""
    return any(re.search(_BE_NAME, call_args(line, m.end() - 1)) for m in re.finditer(_CMP, line))


def check_backend_identity(root, out):
    for rel in walk(root, ("src", "io", "tests", "kernels"), SOURCE_EXT):
        if rel == REGISTRY:
            continue
        for no, line in enumerate(strip_comments(read_lines(root, rel)), 1):
            why = next((why for rx, why in BACKEND_ID if rx.search(line)), None)
            if why is None and names_backend_in_cmp(line):
                why = "strcmp on a backend's name"
            if why:
                out.append((rel, no, why + ": give the backend's table a field or an operation instead"))


# (c) ------------------------------------------------------------------------------------------------
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def module_of(rel):
    d, base = os.path.split(rel)
    return os.path.join(d, os.path.splitext(base)[0])


def check_include_loops(root, out):
    files = walk(root, ("src", "io", "kernels"), SOURCE_EXT)
    known = set(files)
    edges = {}  # module -> {module: (file, line, included file)}
    for rel in files:
        src = module_of(rel)
        edges.setdefault(src, {})
        for no, line in enumerate(read_lines(root, rel), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            for base in (os.path.dirname(rel), "src", "io", "kernels"):
                cand = os.path.normpath(os.path.join(base, m.group(1)))
                if cand in known:
                    dst = module_of(cand)
                    if dst != src:
                        edges[src].setdefault(dst, (rel, no, cand))
                    break
    for comp in strongly_connected(edges):
        cycle = one_cycle(comp, edges)
        names = " -> ".join(cycle + [cycle[0]])
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            rel, no, inc = edges[a][b]
            out.append((rel, no, "include loop %s (this line includes %s)" % (names, inc)))


def strongly_connected(edges):
    """Tarjan's components of more than one module, each sorted (iterative: no recursion limit)."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def one_cycle(comp, edges):
    """A shortest cycle through the first module of a component (breadth-first within it)."""
    inside, start = set(comp), comp[0]
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges.get(v, {})):
            if w not in inside:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


# (d) ------------------------------------------------------------------------------------------------
def check_file_sizes(root, out):
    for rel in walk(root, ("src", "io", "kernels", "tests"), SOURCE_EXT):
        n = len(read_lines(root, rel))
        if n and read_lines(root, rel)[-1] == "":
            n -= 1
        if n > MAX_FILE_LINES:
            out.append((rel, 1, "%d lines (limit %d): split the file by concern" % (n, MAX_FILE_LINES)))


# (e) ------------------------------------------------------------------------------------------------
NOT_FUNC = re.compile(r"^(?:typedef\b|struct\b|union\b|enum\b|namespace\b|extern\s+\"C\"\s*\{?\s*$|class\b)")
SAYS_LONG = re.compile(r"(?<!\bas )(?<!\blong )\blong\b(?! as\b)(?! long\b)", re.I)


def is_comment(line):
    s = line.strip()
    return s.startswith(("//", "/*", "*")) or s.endswith("*/")


def header_start(lines, brace):
    """The first line of the declarator whose body opens at line index brace (a col-0 `{` or a col-0
    line ending in `{`), or None where it is no function (a struct, an initializer, a namespace)."""
    start = brace if lines[brace].strip() != "{" else brace - 1
    if start < 0:
        return None
    i = start
    while i > 0:
        prev = lines[i - 1]
        s = prev.strip()
        if not s or is_comment(prev) or s.startswith("#") or s.endswith((";", "}", "{")) or s.endswith("*/"):
            break
        i -= 1
    head = " ".join(l.strip() for l in lines[i:start + 1])
    head = re.sub(r"\{\s*$", "", head).strip()
    if lines[i][:1].isspace() or NOT_FUNC.match(head) or "(" not in head:
        return None
    if not re.search(r"\)\s*(?:const|noexcept|override|final|\s)*$", head):
        return None  # `= {`, `[] =` and the like: data, not a function
    return i


def check_function_sizes(root, out):
    for rel in walk(root, ("src", "io", "kernels", "tests"), SOURCE_EXT):
        lines = read_lines(root, rel)
        code = strip_comments(lines)
        i = 0
        while i < len(code):
            line = code[i]
            if line.startswith("{") or (line[:1] not in ("", " ", "\t", "#", "}") and line.rstrip().endswith("{")):
                start = header_start(code, i)
                end = next((k for k in range(i + 1, len(code)) if code[k].startswith("}")), None)
                if start is not None and end is not None:
                    n = end - start + 1
                    if n > MAX_FUNC_LINES and not says_long(lines, start):
                        out.append((rel, start + 1, "function of %d lines (limit %d) with no comment above "
                                    "saying why it is long" % (n, MAX_FUNC_LINES)))
                    i = end + 1
                    continue
            i += 1


def says_long(lines, start):
    """Whether the comment block right above line index start contains the word "long"."""
    k = start - 1
    block = []
    while k >= 0 and lines[k].strip() and is_comment(lines[k]):
        block.append(lines[k])
        k -= 1
    return bool(SAYS_LONG.search(" ".join(block)))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    root = os.path.abspath(root)
    if not os.path.isdir(os.path.join(root, "src")):
        print("check_layout: %s has no src/" % root)
        return 2
    out = []
    for check in (check_have_cuda, check_backend_identity, check_include_loops, check_file_sizes,
                  check_function_sizes):
        check(root, out)
    for rel, no, why in sorted(set(out)):
        print("%s:%d: %s" % (rel, no, why))
    if out:
        print("check_layout: %d violation(s)" % len(set(out)))
        return 1
    print("check_layout: OK (DSOLVE_HAVE_CUDA, backend identity, include loops, file and function sizes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
