"""``ZeroRedundancyOptimizer``: optimizer state sharded across ranks (ZeRO stage 1), PyTorch's API.

Every rank holds all parameters and (through DDP) the averaged gradients, but creates the wrapped optimizer
for its own shard of the parameters only, so each rank keeps about 1/world of the optimizer state. A step
updates the local shard; then every parameter is broadcast from the rank that owns it. Parameters go to
ranks largest first, each to the rank with the fewest elements so far (PyTorch's greedy partition), so the
shards are balanced and the same on every rank.

``state_dict()`` needs ``consolidate_state_dict(to)`` first (a collective: every rank sends its shard's
state to rank ``to``) and returns the whole optimizer's state indexed as an unsharded optimizer's would be;
``load_state_dict`` takes such a state (from any world size) and keeps the entries of this rank's shard.
"""
from __future__ import annotations

from ..autograd import no_grad
from ..tensor import Tensor


def _partition(params, world):
    """{id(p): rank}: largest first, each to the rank holding the fewest elements (ties: the lowest rank)."""
    load = [0] * world
    owner = {}
    for i in sorted(range(len(params)), key=lambda i: (-params[i].numel(), i)):
        rank = min(range(world), key=lambda r: (load[r], r))
        owner[id(params[i])] = rank
        load[rank] += params[i].numel()
    return owner


class ZeroRedundancyOptimizer:
    """``optimizer_class(local_params, **defaults)`` on this rank's shard of ``params``; after each step the
    parameters are broadcast from their owners. Use it with gradients that are already averaged across ranks
    (``DistributedDataParallel`` does that)."""

    def __init__(self, params, optimizer_class, **defaults):
        from . import _require

        g = _require("ZeroRedundancyOptimizer")
        if isinstance(params, Tensor):
            raise TypeError("ZeroRedundancyOptimizer: params must be an iterable of Tensors, got a Tensor")
        self.params = list(params)
        if not self.params or not all(isinstance(p, Tensor) for p in self.params):
            raise TypeError("ZeroRedundancyOptimizer: params must be a non-empty iterable of Tensors (parameter "
                            "groups are not supported)")
        self.world_size, self.rank = g.world, g.rank
        self.owner = _partition(self.params, self.world_size)
        local = [p for p in self.params if self.owner[id(p)] == self.rank]
        self._index = {id(p): i for i, p in enumerate(self.params)}
        self.optim = optimizer_class(local, **defaults) if local else None
        self.defaults = dict(self.optim.defaults) if self.optim else dict(defaults)
        self._consolidated = None

    @property
    def param_groups(self):
        """The local optimizer's groups (a scheduler changes the lr of the parameters this rank updates)."""
        return self.optim.param_groups if self.optim else [dict(self.defaults, params=[])]

    @property
    def local_params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none: bool = True):
        for p in self.params:
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad._data.fill(0)

    def step(self, closure=None):
        from . import broadcast

        loss = self.optim.step(closure) if self.optim else (closure() if closure else None)
        with no_grad():
            for p in self.params:
                broadcast(p, self.owner[id(p)])
        return loss

    # ------------------------------------------------------------ state: consolidated on one rank
    def _local_state(self):
        """This shard's state, keyed by global parameter index, on the host."""
        if self.optim is None:
            return {}, []
        sd = self.optim.state_dict()
        local = [self._index[id(p)] for p in self.local_params]
        state = {local[i]: {k: (v.cpu().numpy() if isinstance(v, Tensor) else v) for k, v in s.items()}
                 for i, s in sd["state"].items()}
        groups = [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]]
        return state, groups

    def consolidate_state_dict(self, to: int = 0):
        """Gather every shard's state on rank ``to`` (a collective: every rank must call it)."""
        from . import all_gather_object

        shards = [None] * self.world_size
        all_gather_object(shards, self._local_state())
        self._consolidated = None
        if self.rank == to:
            state = {}
            for shard_state, _ in shards:
                state.update(shard_state)
            groups = next((g for _, g in shards if g), [{}])
            self._consolidated = {"state": dict(sorted(state.items())),
                                  "param_groups": [dict(groups[0], params=list(range(len(self.params))))]}

    def state_dict(self) -> dict:
        if self._consolidated is None:
            raise RuntimeError("ZeroRedundancyOptimizer.state_dict: call consolidate_state_dict(to) on every "
                               "rank first, and state_dict() on rank `to`")
        return self._consolidated

    def load_state_dict(self, state_dict: dict):
        """Keep the entries of this rank's shard from a whole optimizer's state (any world size)."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("ZeroRedundancyOptimizer.load_state_dict: expected a dict with 'state' and "
                             "'param_groups' (from state_dict())")
        if self.optim is None:
            return
        hyper = {k: v for k, v in state_dict["param_groups"][0].items() if k != "params"}
        local = [self._index[id(p)] for p in self.local_params]
        self.optim.load_state_dict({
            "state": {i: state_dict["state"][g] for i, g in enumerate(local) if g in state_dict["state"]},
            "param_groups": [dict(hyper, params=list(range(len(local))))]})
