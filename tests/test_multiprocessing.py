"""``minifused.multiprocessing``: PyTorch's ``spawn`` runs ``fn(i, *args)`` in new processes and raises the first
failure in the parent, as ``torch.multiprocessing.spawn`` does."""
import os
import time

import numpy as np
import pytest

import minifused as mf
import minifused.multiprocessing as mp


def _write_sum(rank, folder, scale):
    """A rank's work: a tensor computed in the child, its value written where the parent reads it."""
    value = (mf.arange(4, dtype=mf.float64, device="cpu") * scale + rank).sum().item()
    with open(os.path.join(folder, f"rank{rank}"), "w") as f:
        f.write(repr(value))


def _fail_on_one(rank):
    if rank == 1:
        raise ValueError("rank 1 refuses")
    time.sleep(0.2)


def _exit_quietly(rank):
    if rank == 0:
        os._exit(3)


def test_spawn_runs_every_rank_with_its_index_and_args(tmp_path):
    assert mp.spawn(_write_sum, args=(str(tmp_path), 2.0), nprocs=3) is None
    got = [float((tmp_path / f"rank{r}").read_text()) for r in range(3)]
    np.testing.assert_array_equal(got, [12.0 + 4 * r for r in range(3)])  # (0+1+2+3) * 2 + 4 * rank


def test_a_raising_rank_is_raised_in_the_parent_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException, match="Process 1 terminated with the following error") as info:
        mp.spawn(_fail_on_one, nprocs=2)
    assert info.value.error_index == 1 and "ValueError: rank 1 refuses" in info.value.msg


def test_a_rank_exiting_without_an_exception():
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 3") as info:
        mp.spawn(_exit_quietly, nprocs=1)
    assert info.value.exit_code == 3


def test_without_join_the_context_joins_later(tmp_path):
    context = mp.start_processes(_write_sum, args=(str(tmp_path), 1.0), nprocs=2, join=False)
    assert len(context.pids()) == 2
    while not context.join(timeout=5):
        pass
    assert sorted(os.listdir(tmp_path)) == ["rank0", "rank1"]


def test_pythons_names_and_bad_nprocs():
    assert mp.Process is not None and mp.get_context is not None and mf.multiprocessing is mp
    with pytest.raises(ValueError, match="nprocs must be a positive int"):
        mp.spawn(_write_sum, nprocs=0)
