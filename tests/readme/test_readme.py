"""README.md as a test, in the spirit of doctest: every fenced ```sh and ```python block
runs, in the order of the README, in one temporary folder (so a block may use the files an
earlier one wrote) that holds links to the build folder (as build/), models/, data/ and
docs/: the commands run exactly as written for a fresh clone. A block fails the test when it
exits non-zero, or when a marker before it says what it prints and the output lacks it.

Markers are HTML comments on the line(s) just before a block (invisible on GitHub):
  <!-- readme-test: skip: REASON -->     the block does not run here; the reason is required
  <!-- readme-test: prints: TEXT -->     its standard output must contain TEXT
Every other fenced block must be tagged sh, python or text (text: shown output, not run).

Environment (set by tests/readme/CMakeLists.txt): FPGALLM_BUILD_DIR, FPGALLM_README_PYTHON
(the interpreter the extension was built for), FPGALLM_README_EXTENSION (1 when built),
FPGALLM_MPIEXEC (empty when built without MPI)."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
README = REPO / "README.md"
LINKED = ("models", "data", "docs", "python")
BLOCK_TIMEOUT_S = 600

FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*readme-test:\s*(skip|prints):\s*(.+?)\s*-->\s*$")


class Block:
    def __init__(self, line, lang, code, markers):
        self.line, self.lang, self.code, self.markers = line, lang, code, markers

    def id(self):
        first = next((l for l in self.code.splitlines() if l.strip() and not l.startswith("#")), "")
        return f"L{self.line}-{self.lang}-{first[:40]}"

    def skip_reason(self):
        return next((v for k, v in self.markers if k == "skip"), None)

    def expected(self):
        return [v for k, v in self.markers if k == "prints"]


def parse(text):
    """The fenced blocks of a Markdown text with the markers just before each."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        markers, j = [], i - 1
        while j >= 0 and (MARKER.match(lines[j]) or not lines[j].strip()):
            mm = MARKER.match(lines[j])
            if mm:
                markers.insert(0, (mm.group(1), mm.group(2)))
            j -= 1
        start, i = i, i + 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"README.md:{start + 1}: code block never closed")
        blocks.append(Block(start + 1, m.group(1), "\n".join(body) + "\n", markers))
        i += 1
    return blocks


BLOCKS = parse(README.read_text())


def test_every_block_says_what_it_is():
    untagged = [f"README.md:{b.line}" for b in BLOCKS if b.lang not in ("sh", "python", "text")]
    assert not untagged, "tag each block sh, python (they run) or text (shown output): " + ", ".join(untagged)
    assert [b for b in BLOCKS if b.lang in ("sh", "python")], "README.md has no block to run"


def test_markers_parse():
    # The parser itself, on a hand-written README: markers attach to the next block only.
    blocks = parse("a\n<!-- readme-test: skip: needs 8 ranks -->\n\n```sh\nx\n```\n"
                   "<!-- readme-test: prints: hi -->\n```python\nprint('hi')\n```\n```text\nhi\n```\n")
    assert [(b.lang, b.skip_reason(), b.expected()) for b in blocks] == [
        ("sh", "needs 8 ranks", []), ("python", None, ["hi"]), ("text", None, [])]
    with pytest.raises(ValueError):
        parse("```sh\nx\n")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder that looks like a fresh clone: build/ is this build, the bundled files linked."""
    d = tmp_path_factory.mktemp("readme")
    build = os.environ.get("FPGALLM_BUILD_DIR", str(REPO / "build"))
    if not os.path.exists(os.path.join(build, "fpgallm")):
        pytest.fail(f"no fpgallm in {build} (FPGALLM_BUILD_DIR)")
    (d / "build").symlink_to(build)
    for name in LINKED:
        (d / name).symlink_to(REPO / name)
    return d


def environment():
    env = dict(os.environ)
    # What README.md's MPI section says containers and CI need.
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_btl="self,vader",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


RUNNABLE = [b for b in BLOCKS if b.lang in ("sh", "python")]


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id() for b in RUNNABLE])
def test_block_runs(block, folder):
    reason = block.skip_reason()
    if reason:
        pytest.skip(f"README.md:{block.line}: {reason}")
    if block.lang == "python":
        if os.environ.get("FPGALLM_README_EXTENSION", "1") != "1":
            pytest.skip(f"README.md:{block.line}: the Python extension was not built (no pybind11)")
        script = folder / f"block_{block.line}.py"
        script.write_text(block.code)
        cmd = [os.environ.get("FPGALLM_README_PYTHON", sys.executable), str(script)]
    else:
        if re.search(r"^\s*mpirun\b", block.code, re.M) and not os.environ.get("FPGALLM_MPIEXEC", "x"):
            pytest.skip(f"README.md:{block.line}: this build has no MPI")
        cmd = ["bash", "-euo", "pipefail", "-c", block.code]
    r = subprocess.run(cmd, cwd=folder, env=environment(), capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    where = f"README.md:{block.line} ({block.lang} block)"
    assert r.returncode == 0, f"{where} exited {r.returncode}\n--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-4000:]}"
    for text in block.expected():
        assert text in r.stdout, f"{where} should print {text!r}; it printed\n{r.stdout[-4000:]}"
