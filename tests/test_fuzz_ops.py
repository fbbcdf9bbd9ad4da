"""Fuzzed tensor ops on the CPU: random shapes, broadcasts, dims and indices (hypothesis), values
against NumPy in float64 and gradients against central differences (``gradcheck``). The unary, binary
and reduction tables are the registry's entries marked ``fuzz=`` (tests/opinfo.py, which also holds the
example-based samples of every op); this covers the argument space around them."""
import numpy as np
import pytest

pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import minifused as mf  # noqa: E402
from minifused.testing import gradcheck  # noqa: E402
from opinfo import OPS, REGISTRY  # noqa: E402

FUZZ = settings(deadline=None, derandomize=True)  # example counts from the profile (tests/conftest.py)
seeds = st.integers(0, 2**32 - 1)
shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4)


def t(a):
    return mf.tensor(np.asarray(a, np.float64), device="cpu", requires_grad=True)


def same(tensor, expected):
    assert tensor.shape == np.shape(expected), (tensor.shape, np.shape(expected))
    np.testing.assert_allclose(tensor.numpy(), expected, rtol=1e-12, atol=1e-12)


@st.composite
def broadcastable(draw):
    """Two shapes that broadcast: each dim kept or 1 per operand, leading dims dropped per operand."""
    full = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))
    a = [s if draw(st.booleans()) else 1 for s in full][draw(st.integers(0, len(full))):]
    b = [s if draw(st.booleans()) else 1 for s in full][draw(st.integers(0, len(full))):]
    return tuple(a), tuple(b)


def table(kind):
    """The registry's entries fuzzed by one of the tables below (tests/opinfo.py, ``fuzz=``)."""
    return sorted(e.name for e in OPS if e.fuzz == kind)


def draw(rng, domain, shape):
    """Values of an input's domain: "pos" away from 0 and positive (log, sqrt, pow's base), "nonzero"
    away from 0 either side (divisors: central differences of 1/b need it), else standard normal."""
    if domain == "pos":
        return rng.uniform(0.5, 2, shape)
    if domain == "nonzero":
        return rng.choice([-1, 1], shape) * rng.uniform(0.5, 2, shape)
    return rng.standard_normal(shape)


NO_NUMBER = ("maximum", "minimum")  # binary ops that take no Python number (a 0-d tensor instead), as PyTorch's


@FUZZ
@given(pair=broadcastable(), op=st.sampled_from(table("binary")), seed=seeds)
def test_binary_ops_broadcast(pair, op, seed):
    rng = np.random.default_rng(seed)
    entry = REGISTRY[op]
    a = draw(rng, entry.domain[0], pair[0])
    b = draw(rng, entry.domain[1], pair[1])  # maxima without ties: continuous values
    ref, fn = entry.ref, entry.op
    ta, tb = t(a), t(b)
    same(fn(ta, tb), ref(a, b))
    number = mf.tensor(1.5, dtype=mf.float64) if op in NO_NUMBER else 1.5
    same(fn(ta, number), ref(a, 1.5))
    gradcheck(fn, (ta, tb))


@st.composite
def reduction(draw):
    """A shape and 0..ndim distinct dims, each possibly negative."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    nd = len(shape)
    dims = draw(st.permutations(range(nd)))[:draw(st.integers(0, nd))]
    return shape, tuple(d - nd if draw(st.booleans()) else d for d in dims)


@FUZZ
@given(case=reduction(), op=st.sampled_from(table("reduction")), keepdim=st.booleans(),
       as_int=st.booleans(), correction=st.sampled_from([0, 1, 2]), seed=seeds)
def test_reductions_over_dims(case, op, keepdim, as_int, correction, seed):
    shape, dims = case
    a = np.random.default_rng(seed).standard_normal(shape)
    dim = (dims[0] if as_int and len(dims) == 1 else dims) if dims else None
    axis = dims if dims else None
    if op in ("var", "std"):
        if (a.size if not dims else int(np.prod([shape[d] for d in dims]))) <= correction:
            return  # no degrees of freedom left
        fn = lambda x: getattr(x, op)(dim=dim, keepdim=keepdim, correction=correction)  # noqa: E731
        expected = getattr(np, op)(a, axis=axis, keepdims=keepdim, ddof=correction)
    else:
        fn = lambda x: getattr(x, op)(dim=dim, keepdim=keepdim) if dim is not None else getattr(x, op)()  # noqa: E731
        expected = getattr(np, op)(a, axis=axis, keepdims=keepdim and dim is not None)
    ta = t(a)
    np.testing.assert_allclose(fn(ta).numpy(), expected, rtol=1e-10, atol=1e-12)
    assert fn(ta).shape == np.shape(expected)
    gradcheck(fn, (ta,))


@FUZZ
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data(), keepdim=st.booleans(), seed=seeds)
def test_max_along_a_dim_and_argmax(shape, data, keepdim, seed):
    a = np.random.default_rng(seed).standard_normal(shape)
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    ta = t(a)
    values, indices = ta.max(dim=d, keepdim=keepdim)
    arg = np.argmax(a, axis=d)
    arg = np.expand_dims(arg, d) if keepdim else arg
    same(values, np.max(a, axis=d, keepdims=keepdim))
    np.testing.assert_array_equal(indices.numpy(), arg)
    np.testing.assert_array_equal(ta.argmax(dim=d, keepdim=keepdim).numpy(), arg)
    assert int(ta.argmax().item()) == int(np.argmax(a))
    gradcheck(lambda x: x.max(dim=d, keepdim=keepdim)[0], (ta,))


@st.composite
def indexing(draw):
    """A shape and a basic/advanced index: ints, slices (any start/stop, step 1-3), None, one
    ellipsis, at most one index array."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    index, axis, arrays, ellipsis = [], 0, 0, False
    for _ in range(draw(st.integers(0, len(shape) + 1))):
        kind = draw(st.sampled_from(["int", "slice", "none", "ellipsis", "array"]))
        if (kind == "ellipsis" and ellipsis) or (kind == "array" and arrays):
            kind = "slice"
        if kind in ("int", "slice", "array") and axis >= len(shape):
            kind = "none"
        n = shape[axis] if axis < len(shape) else 1
        if kind == "int":
            index.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            index.append(slice(draw(st.one_of(st.none(), st.integers(-n - 1, n + 1))),
                               draw(st.one_of(st.none(), st.integers(-n - 1, n + 1))),
                               draw(st.one_of(st.none(), st.integers(1, 3)))))
        elif kind == "array":
            index.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4))))
            arrays += 1
        elif kind == "none":
            index.append(None)
        else:
            index.append(Ellipsis)
            ellipsis = True
        if kind in ("int", "slice", "array"):
            axis += 1
        elif kind == "ellipsis":
            axis = len(shape)  # the ellipsis takes the dims not indexed after it
    return shape, tuple(index)


@FUZZ
@given(case=indexing(), seed=seeds)
def test_getitem(case, seed):
    shape, index = case
    a = np.random.default_rng(seed).standard_normal(shape)
    ta = t(a)
    as_tensors = tuple(mf.tensor(i, device="cpu") if isinstance(i, np.ndarray) else i for i in index)
    np.testing.assert_array_equal(ta[as_tensors].numpy(), a[index])
    gradcheck(lambda x: x[index], (ta,))


@FUZZ
@given(shape=shapes, data=st.data(), seed=seeds)
def test_shape_ops(shape, data, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(shape), rng.standard_normal(shape)
    ta, tb = t(a), t(b)
    nd = len(shape)
    dim = st.integers(-nd, nd - 1) if nd else st.just(0)
    if nd:
        perm = data.draw(st.permutations(range(nd)))
        same(ta.permute(*perm), a.transpose(perm))
        d0, d1 = data.draw(dim), data.draw(dim)
        same(ta.transpose(d0, d1), np.swapaxes(a, d0, d1))
        d = data.draw(dim)
        same(ta.squeeze(d), np.squeeze(a, d) if shape[d] == 1 else a)  # a dim not of size 1 stays
        start = data.draw(dim)
        end = data.draw(st.integers(start % nd, nd - 1))
        flat = shape[:start % nd] + [int(np.prod(shape[start % nd:end + 1]))] + shape[end + 1:]
        same(ta.flatten(start, end), a.reshape(flat))
        c = data.draw(dim)
        same(mf.cat([ta, tb], dim=c), np.concatenate([a, b], axis=c))
        gradcheck(lambda x, y: mf.cat([x.permute(*perm), y.permute(*perm)], dim=c), (ta, tb))
    u = data.draw(st.integers(-nd - 1, nd))
    same(ta.unsqueeze(u), np.expand_dims(a, u))
    same(ta.squeeze(), np.squeeze(a))
    same(mf.stack([ta, tb], dim=u), np.stack([a, b], axis=u))
    # expand: a new leading dim, size-1 dims grown, -1 keeping a dim as it is
    grown = [data.draw(st.integers(1, 3))] + [data.draw(st.integers(1, 3)) if s == 1 else s for s in shape]
    spec = grown[:1] + [-1 if data.draw(st.booleans()) else g for g in grown[1:]]
    target = grown[:1] + [s if sp == -1 else g for s, sp, g in zip(shape, spec[1:], grown[1:])]
    same(ta.expand(*spec), np.broadcast_to(a, target))
    gradcheck(lambda x, y: mf.stack([x, y], dim=u).expand(2, *([-1] * (nd + 1))).reshape(-1), (ta, tb))
    gradcheck(lambda x: x.expand(*spec), (ta,))


@FUZZ
@given(m=st.integers(1, 4), k=st.integers(1, 4), n=st.integers(1, 4), batch_a=st.lists(st.integers(1, 3), max_size=2),
       batch_b=st.lists(st.integers(1, 3), max_size=2), vec_a=st.booleans(), vec_b=st.booleans(), seed=seeds)
def test_matmul_batches_and_vectors(m, k, n, batch_a, batch_b, vec_a, vec_b, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k,) if vec_a else (*batch_a, m, k))
    b = rng.standard_normal((k,) if vec_b else (*batch_b, k, n))
    try:
        expected = np.matmul(a, b)
    except ValueError:  # batch dims that do not broadcast
        return
    ta, tb = t(a), t(b)
    same(ta @ tb, expected)
    gradcheck(lambda x, y: x @ y, (ta, tb))


@FUZZ
@given(shape=shapes, op=st.sampled_from(table("unary")), seed=seeds)
def test_unary_ops(shape, op, seed):
    rng = np.random.default_rng(seed)
    entry = REGISTRY[op]
    a = rng.uniform(0.1, 3, shape) if entry.domain == ("pos",) else rng.standard_normal(shape)
    ta = t(a)
    same(getattr(ta, op)(), entry.ref(a))  # the method form; the registry's other spellings agree (test_ops.py)
    same(entry.op(ta), entry.ref(a))
    gradcheck(lambda x: getattr(x, op)(), (ta,))
