"""torchutil.register_formula: a user's formula for a torch.library custom op, in the one C++
registry, in the built-in convention (2 x MAC). Oracle: the closed form of the op (a matrix
product: 2·M·K·N), and the op's absence from unknown_ops."""
from __future__ import annotations

import pytest
import torch

import torchutil


@torch.library.custom_op("torchutil_test::scaled_mm", mutates_args=())
def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.from_numpy(a.numpy() @ b.numpy() * scale)


@scaled_mm.register_fake
def _(a, b, scale):
    return a.new_empty(a.shape[0], b.shape[1])


OP = "torchutil_test::scaled_mm"
M, K, N = 8, 16, 4


def _count():
    a, b = torch.randn(M, K), torch.randn(K, N)
    with torchutil.Profiler(peak_flops=1e12) as prof:
        torch.ops.torchutil_test.scaled_mm(a, b, 0.5)
    return prof.result


def _mm_formula(a_shape, b_shape, scale, *, out_shape):
    assert scale == 0.5 and tuple(out_shape) == (a_shape[0], b_shape[1])
    return 2 * a_shape[0] * a_shape[1] * b_shape[1]


def test_a_custom_op_is_unknown_then_priced_then_unknown_again():
    before = _count()
    assert before.unknown_ops == {OP: 1} and before.flops == 0
    with torchutil.registered_formula(OP, _mm_formula):
        assert torchutil.user_formulas() == [OP]
        r = _count()
        assert r.unknown_ops == {}
        assert (r.matrix_flops, r.vector_flops) == (2 * M * K * N, 0)
        row = [o for o in r.ops if o.op == OP][0]
        assert row.bytes == 4 * (M * K + K * N + M * N)  # nominal: its tensors' sizes
    after = _count()
    assert after.unknown_ops == {OP: 1} and after.flops == 0
    assert torchutil.user_formulas() == []


def test_the_decorator_the_split_and_bytes():
    @torchutil.register_formula(torch.ops.torchutil_test.scaled_mm)
    def _(a_shape, b_shape, scale, *, out_shape):
        return {"matrix_flops": 2 * a_shape[0] * a_shape[1] * b_shape[1],
                "vector_flops": out_shape.numel(), "bytes": 123}

    try:
        r = _count()
        assert (r.matrix_flops, r.vector_flops, r.bytes) == (2 * M * K * N, M * N, 123)
        assert r.unknown_ops == {}
    finally:
        torchutil.unregister_formula(OP)
    assert _count().unknown_ops == {OP: 1}


def test_duplicates_and_built_ins_are_refused_naming_the_op():
    with torchutil.registered_formula(OP, _mm_formula):
        with pytest.raises(ValueError, match=r"^torchutil: a FLOP formula for 'torchutil_test::scaled_mm' is already"):
            torchutil.register_formula(OP, _mm_formula)
        torchutil.register_formula(OP, lambda *a, out_shape: 7, override=True)
        assert _count().matrix_flops == 7
    with pytest.raises(ValueError, match=r"^torchutil: 'aten::mm' has a built-in FLOP formula"):
        torchutil.register_formula("aten::mm", _mm_formula)
    with pytest.raises(ValueError, match=r"^torchutil: 'torchutil_test::scaled_mm' has no FLOP formula registered"):
        torchutil.unregister_formula(OP)
    with pytest.raises(TypeError, match="must be callable"):
        torchutil.register_formula(OP, 3)


def test_overriding_a_built_in_is_undone_by_unregistering():
    a, b = torch.randn(M, K), torch.randn(K, N)

    def mm_flops():
        with torchutil.Profiler(peak_flops=1e12) as prof:
            torch.mm(a, b)
        return prof.result.matrix_flops

    with torchutil.registered_formula("aten::mm", lambda *args, out_shape: 1, override=True):
        assert mm_flops() == 1
    assert mm_flops() == 2 * M * K * N  # the built-in is back


def test_a_failing_formula_leaves_the_call_unknown_with_a_warning():
    with torchutil.registered_formula(OP, lambda *args, out_shape: "many"):
        with pytest.warns(UserWarning, match="torchutil: the FLOP formula registered for 'torchutil_test::scaled_mm'"):
            r = _count()
    assert r.unknown_ops == {OP: 1} and r.flops == 0


def test_formulas_do_not_change_while_a_count_runs():
    with torchutil.Profiler(peak_flops=1e12):
        with pytest.raises(RuntimeError, match="while a count runs"):
            torchutil.register_formula(OP, _mm_formula)
    assert torchutil.user_formulas() == []


@pytest.mark.parametrize("returned, op_class", [(lambda n: 2 * n, "matrix"),
                                                (lambda n: {"vector_flops": n}, "vector"),
                                                (lambda n: {"matrix_flops": 0, "bytes": 64}, "memory")],
                         ids=["int", "vector only", "bytes only"])
def test_a_user_formulas_row_is_labelled_by_what_it_returned(returned, op_class):
    """An int is matrix FLOPs; a dict with vector FLOPs only is vector work, one with neither
    is memory (its bytes). Oracle: the value the formula returned, in its row."""
    with torchutil.registered_formula(OP, lambda a, b, scale, *, out_shape: returned(out_shape.numel())):
        r = _count()
    row = [o for o in r.ops if o.op == OP][0]
    assert row.op_class == op_class
    assert (row.matrix_flops, row.vector_flops) == {"matrix": (2 * M * N, 0), "vector": (0, M * N),
                                                    "memory": (0, 0)}[op_class]
