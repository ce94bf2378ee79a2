"""`python3 -c "import fpgallm"` without PYTHONPATH after the build (README, Python and
PyTorch): the default build target fpgallm_python_pth writes fpgallm.pth, naming this
checkout's python/ folder, into the site-packages folders CMake found (FPGALLM_PTH_DIRS:
/usr/bin/python3's and that of the python3 first on PATH when it has the extension's ABI)."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

PACKAGE = REPO / "python"


def pth_dirs() -> list:
    dirs = [d for d in os.environ.get("FPGALLM_PTH_DIRS", "").split(":") if d]
    if not dirs:
        pytest.skip("this build writes no fpgallm.pth (-DFPGALLM_PYTHON_PTH=OFF, or run outside ctest)")
    writable = [d for d in dirs if os.access(d, os.W_OK)]
    if not writable:
        pytest.skip(f"no writable site-packages among {dirs}: PYTHONPATH={PACKAGE} is the documented way")
    return writable


def purelib(interpreter: str) -> str:
    out = subprocess.run([interpreter, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip() if out.returncode == 0 else ""


def test_the_build_wrote_fpgallm_pth():
    for folder in pth_dirs():
        pth = pathlib.Path(folder) / "fpgallm.pth"
        assert pth.is_file(), f"{pth} missing: build the default target (fpgallm_python_pth writes it)"
        assert pth.read_text(encoding="utf-8").strip() == str(PACKAGE), \
            f"{pth} names another checkout; the last checkout built is the one imported"


def test_import_fpgallm_without_pythonpath(tmp_path):
    folders = {os.path.realpath(d) for d in pth_dirs()}
    interpreters = {sys.executable}
    on_path = shutil.which("python3")
    if on_path:
        interpreters.add(on_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    checked = 0
    for interpreter in sorted(interpreters):
        site = purelib(interpreter)
        if not site or os.path.realpath(site) not in folders:
            continue
        out = subprocess.run([interpreter, "-c", "import fpgallm, fpgallm._core as c; print(fpgallm.__file__); "
                              "print(c.__file__); print(fpgallm.BOS)"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"{interpreter}: {out.stderr.strip()}"
        package_file, core_file, bos = out.stdout.split()
        assert pathlib.Path(package_file) == PACKAGE / "fpgallm" / "__init__.py", interpreter
        assert pathlib.Path(core_file).parent == PACKAGE / "fpgallm", interpreter
        assert bos == "1"
        checked += 1
    assert checked >= 1
