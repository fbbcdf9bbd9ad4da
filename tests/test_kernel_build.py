"""Every CUDA source under minifused/kernels compiles with NVRTC for sm_80 and sm_90.

No GPU is needed. A source may list option sets to compile in lines of the form
``// nvrtc-check: -DBLOCK=256 -DT=float`` (``// nvrtc-check[sm_90]: ...`` for one architecture
only; ``[sm_90a]`` lines, Hopper-only code such as wgmma, are the only ones compiled for sm_90a);
without such lines it is compiled once with no extra options, and a source with ``[sm_90a]`` lines only
is Hopper's alone (compiled for sm_90a only). New ``.cu`` files are found by the
glob below.
"""
import re
from pathlib import Path

import pytest

nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
pathfinder = pytest.importorskip("cuda.pathfinder")

KERNELS = Path(__file__).resolve().parent.parent / "minifused" / "kernels"
SOURCES = sorted(KERNELS.rglob("*.cu"))


def _include_dir():
    found = pathfinder.find_nvidia_header_directory("cudart")
    if found is None:
        pytest.fail("CUDA headers not found: install the cuda-toolkit[cudart] wheel (a dependency)")
    return found


def option_sets(path, arch):
    """Option sets of ``// nvrtc-check: ...`` lines, and of ``// nvrtc-check[sm_90]: ...`` lines
    when ``arch`` is that one (code that needs a newer GPU, e.g. thread-block clusters)."""
    sets, archs = [], set()
    for line in path.read_text().splitlines():
        m = re.search(r"nvrtc-check(?:\[(\w+)\])?:(.*)", line)
        if m:
            archs.add(m.group(1))
        if m and (m.group(1) == arch or (m.group(1) is None and arch != "sm_90a")):
            sets.append(m.group(2).split())
    return sets if sets or arch == "sm_90a" or archs == {"sm_90a"} else [[]]


def compile_source(path, arch, options):
    src = path.read_text().encode()
    err, prog = nvrtc.nvrtcCreateProgram(src, path.name.encode(), 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
    try:
        opts = [f"--gpu-architecture={arch}", "--std=c++17", f"-I{_include_dir()}", f"-I{KERNELS}",
                *options]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        return err, log.decode(errors="replace").strip()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def test_kernel_sources_exist():
    assert SOURCES, f"no .cu files under {KERNELS}"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a"])
@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_nvrtc_compiles(path, arch):
    for options in option_sets(path, arch):
        err, log = compile_source(path, arch, options)
        assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, f"{path.name} {arch} {options}:\n{log}"
        assert not re.search(r"\berror\b", log), log
