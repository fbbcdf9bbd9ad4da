"""``jit``'s decorators and queries for scriptable model code (the decorated functions unchanged, no scripting
or tracing), its compiler entry points refused with a clear error, and ``_assert``."""
import pytest

import minifused as mf
from minifused import nn


def test_scriptable_module_code_runs_as_python():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2, device="cpu")

        @mf.jit.unused
        def checkpointed(self, x):
            return self.lin(x) * 10

        @mf.jit.ignore
        def plain(self, x):
            return x + 1

        @mf.jit.ignore(drop=True)
        def dropped(self, x):
            return x + 2

        @mf.jit.export
        def exported(self, x):
            return x + 3

        def forward(self, x):
            if mf.jit.is_scripting() or mf.jit.is_tracing():
                raise AssertionError("never scripting here")
            return self.checkpointed(x) if x.requires_grad else self.lin(x)

    b = Block()
    x = mf.ones(1, 2, device="cpu")
    assert mf.equal(b(x), b.lin(x))
    assert mf.equal(b(x.requires_grad_()), b.lin(x) * 10)
    assert [b.plain(1), b.dropped(1), b.exported(1)] == [2, 3, 4]
    assert mf.jit.annotate(list, [5]) == [5]


@pytest.mark.parametrize("name", ["script", "trace", "save", "load"])
def test_compiler_entry_points_refuse(name):
    with pytest.raises(NotImplementedError, match=f"jit.{name}: minifused has no TorchScript compiler"):
        getattr(mf.jit, name)(nn.Linear(2, 2, device="cpu"))


def test_assert_raises_on_a_false_condition():
    mf._assert(mf.tensor(True), "unused")
    mf._assert(3 > 2, "unused")
    with pytest.raises(AssertionError, match="wrong shape"):
        mf._assert(mf.tensor(False), "wrong shape")
