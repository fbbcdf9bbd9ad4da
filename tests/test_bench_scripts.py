"""Every script in bench/ imports on a machine without a GPU, as CI is: a name one takes from another bench module
or from the package must still be there (the GPU runs them, after the code they import may have moved on)."""
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"

IMPORT_EACH = """
import importlib, sys
names, sys.argv = sys.argv[1:], sys.argv[:1]
failed = []
for name in names:
    try:
        importlib.import_module(name)
    except Exception as e:
        failed.append(f"{name}: {type(e).__name__}: {e}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_every_bench_script_imports():
    names = sorted(p.stem for p in BENCH.glob("*.py"))
    assert "zoo" in names and "higher_order" in names
    run = subprocess.run([sys.executable, "-c", IMPORT_EACH, *names], cwd=BENCH, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
