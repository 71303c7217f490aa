"""Inductor's generated kernels tied to the ops they fused (docs/counting.md, "Compiled models").

A profile that traces kernels starts a Recording before its warm-ups, where torch.compile'd code
compiles, and finishes it after its count (csrc/python/PyModule.cpp), through the factory this
module registers with the C++ when imported (torchutil._C._set_callback: "inductor_recording").
While it records, Inductor's provenance tracking is on and a post-grad pass keeps each graph
Inductor compiles, together with the table provenance tracking fills while Inductor generates
that graph's code: generated kernel name -> the post-grad FX nodes it fused. Each node is then priced by the formula registry, by
running its op on meta tensors of the node's shapes inside a count, and named by the aten op it
runs, the op it was decomposed from and its module.

The post-grad pass is a plain callable, so that Inductor's FX-graph cache is bypassed while it is
set: a cache hit would load code without generating it, and record nothing. Code compiled before
the profile (an earlier call ran the model) is not recompiled: its kernels are tied only where a
profile of this process recorded them (the status says so).
"""
from __future__ import annotations

import re
import sys
from typing import Any

import torch

from torchutil._ops import _C

__all__ = ["Recording"]

# Generated kernels a profile of this process recorded before: name -> [fused ops], per graph.
_earlier: list[dict[str, list[tuple]]] = []
_KERNEL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?::\d+)?$")  # "triton_poi_fused_add_0:3"


class Recording:
    """Records the graphs Inductor compiles between start() and finish()."""

    def __init__(self) -> None:
        self._graphs: list[tuple[Any, dict[str, list[str]]]] = []
        self._saved: tuple[str, Any, Any] | None = None
        self._why_not = ""

    def start(self) -> None:
        if "torch._dynamo" not in sys.modules:
            self._why_not = "nothing was compiled (torch._dynamo is not imported)"
            return  # nothing can be compiled, and importing Inductor takes seconds
        from torch._inductor import config

        flag = next((f for f in ("provenance_tracking_level", "enable_inductor_provenance_tracking")
                     if hasattr(config.trace, f)), None)
        if flag is None:
            self._why_not = f"torch {torch.__version__} has no Inductor provenance tracking"
            return
        level = getattr(config.trace, flag)
        self._saved = (flag, level, config.post_grad_custom_post_pass)
        setattr(config.trace, flag, max(int(level), 1) if flag.endswith("level") else True)
        config.post_grad_custom_post_pass = _Recorder(config.post_grad_custom_post_pass, self._graphs)

    def stop(self) -> None:
        """Restores Inductor's configuration (idempotent)."""
        if self._saved is not None:
            from torch._inductor import config

            flag, level, custom = self._saved
            setattr(config.trace, flag, level)
            config.post_grad_custom_post_pass = custom
            self._saved = None

    def finish(self) -> tuple[str, list[tuple[str, str, list[tuple]]]]:
        """(status, kernels): each generated kernel's name, why it is not tied ("" when it is) and
        the ops it fused, each (node, op names, module, matrix FLOPs, vector FLOPs, bytes, priced).
        Call it outside any count."""
        self.stop()
        now = [_graph_kernels(graph, _own_keys(i, self._graphs)) for i, (graph, _, _) in enumerate(self._graphs)]
        self._graphs.clear()
        table, refused = _merge(now)
        from_earlier = 0
        for name, ops in _merge(_earlier)[0].items():  # graphs of earlier profiles, where unambiguous
            if name not in table and name not in refused:
                table[name] = ops
                from_earlier += 1
        _earlier.extend(now)
        kernels = [(name, "", ops) for name, ops in table.items()]
        kernels += [(name, why, []) for name, why in refused.items()]
        status = (f"Inductor kernels from provenance: {len(table) - from_earlier} kernel(s) of "
                  f"{len(now)} graph(s) compiled in this profile")
        if from_earlier:
            status += f", {from_earlier} recorded by an earlier profile of this process"
        if not table:
            status = "Inductor kernels not tied: " + (
                self._why_not or "nothing was compiled during the profile, and no earlier profile "
                "of this process recorded the kernels (code compiled before the first profile "
                "keeps no provenance)")
        if refused:
            status += f"; {len(refused)} not tied: " + "; ".join(sorted(set(refused.values())))
        return status, kernels


class _Recorder:
    """Inductor's post-grad custom pass: runs the pass it replaced, then keeps the graph with the
    kernel -> node table Inductor is about to fill for it (a fresh dict per compile, restored
    when the compile ends, so it is taken now)."""

    def __init__(self, previous: Any, graphs: list) -> None:
        self.previous = previous
        self.graphs = graphs

    def __call__(self, graph: torch.fx.Graph) -> None:
        for p in self.previous if isinstance(self.previous, (list, tuple)) else [self.previous]:
            if p is not None:
                p(graph)
        from torch._inductor import debug

        table = getattr(debug, "_inductor_triton_kernel_to_post_grad_node_info", None)
        if isinstance(table, dict):
            self.graphs.append((graph, table, set(table)))


def _own_keys(i: int, graphs: list[tuple[Any, dict, set]]) -> dict[str, list[str]]:
    """The entries graph i's code generation added to its table: those not there when its pass
    ran, nor generated by a later graph that shares the table (a torch whose table is not fresh
    per compile)."""
    _, table, before = graphs[i]
    after = next((keys for _, t, keys in graphs[i + 1:] if t is table), None)
    return {k: v for k, v in table.items() if k not in before and (after is None or k in after)}


def _graph_kernels(graph: torch.fx.Graph, table: dict[str, list[str]]) -> dict[str, list[tuple]]:
    """Generated kernel name -> the ops it fused, of one graph. Extern calls (dotted names such
    as extern_kernels.mm) are left out: their ops launch them. A node the graph no longer has (a
    later pass made it) is kept by name, unpriced and tied to no op."""
    names: dict[str, list[str]] = {}
    for key, nodes in table.items():
        m = _KERNEL.match(key)
        if m:
            seen = names.setdefault(m.group(1), [])
            seen += [n for n in nodes if n not in seen]
    if not names:
        return {}
    by_name = {n.name: n for n in graph.nodes}
    priced = _price(graph)
    # get_attr nodes (FlexAttention's score and mask graphs) are part of the op that uses them
    return {kernel: [_fused_op(by_name[n], priced) if n in by_name else (n, [], "", 0, 0, 0, False)
                     for n in nodes if n not in by_name or by_name[n].op == "call_function"]
            for kernel, nodes in names.items()}


def _merge(graphs: list[dict[str, list[tuple]]]) -> tuple[dict[str, list[tuple]], dict[str, str]]:
    """One table over graphs; a name that graphs define with different ops is refused, not guessed."""
    table: dict[str, list[tuple]] = {}
    refused: dict[str, str] = {}
    for graph in graphs:
        for name, ops in graph.items():
            if name in table and _signature(table[name]) != _signature(ops):
                refused[name] = "a kernel name that several compiled graphs define with different ops"
            table.setdefault(name, ops)
    for name in refused:
        table.pop(name, None)
    return table, refused


def _signature(ops: list[tuple]) -> list[tuple]:
    return [op[1:] for op in ops]


# ---- the post-grad nodes: names, modules, prices ---------------------------------------------

def _op_names(node: torch.fx.Node) -> list[str]:
    """The op names a node answers to: the aten op it runs and the op it was decomposed from."""
    names: list[str] = []
    for target in (node.target, node.meta.get("original_aten")):
        schema = getattr(target, "_schema", None)
        if schema is not None:
            names.append(schema.name)
        elif isinstance(target, torch._ops.HigherOrderOperator):
            # FlexAttention's eager count is torchutil::flex_attention (torchutil/_eager.py)
            names += ["torchutil::flex_attention"] if target.name() == "flex_attention" else [target.name()]
    return list(dict.fromkeys(names))


def _module_path(node: torch.fx.Node) -> str:
    """The node's module as the eager count names it ("layer1.0.conv1"), from dynamo's module
    stack ("L['self'].layer1[0].conv1"): relative to the compiled code's root; "" where none."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ""
    path = str(list(stack.values())[-1][0])
    path = re.sub(r"^(L\[['\"]self['\"]\]|self)", "", path)
    path = re.sub(r"\._modules\[['\"]([^'\"]+)['\"]\]", r".\1", path)
    path = re.sub(r"\[['\"]?([^\]'\"]+)['\"]?\]", r".\1", path)
    return path.strip(".")


def _fused_op(node: torch.fx.Node, priced: dict[str, tuple[int, int, int, bool]]) -> tuple:
    matrix, vector, nbytes, ok = priced.get(node.name, (0, 0, 0, False))
    return (node.name, _op_names(node), _module_path(node), matrix, vector, nbytes, ok)


def _hint(v: Any) -> Any:
    if isinstance(v, torch.SymInt):
        return int(v.node.hint) if v.node.hint is not None else int(v)
    return v


def _meta(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return torch.empty_strided([_hint(s) for s in v.shape], [_hint(s) for s in v.stride()],
                                   dtype=v.dtype, device="meta")
    if isinstance(v, (list, tuple)):
        return type(v)(_meta(x) for x in v)
    return _hint(v)


def _call_on_meta(node: torch.fx.Node, owner: Any) -> None:
    def value(a: Any) -> Any:
        if not isinstance(a, torch.fx.Node):
            return a
        if a.op == "get_attr":
            obj = owner
            for part in str(a.target).split("."):
                obj = getattr(obj, part)
            return _meta(obj) if isinstance(obj, torch.Tensor) else obj
        return _meta(a.meta["val"])

    args = torch.fx.node.map_aggregate(node.args, value)
    kwargs = dict(torch.fx.node.map_aggregate(node.kwargs, value))
    if "device" in kwargs:
        kwargs["device"] = torch.device("meta")
    node.target(*args, **kwargs)


def _price(graph: torch.fx.Graph) -> dict[str, tuple[int, int, int, bool]]:
    """node name -> (matrix FLOPs, vector FLOPs, bytes, priced): each call_function node run on
    meta tensors of its shapes in one count, under a module path of its own (its name). A node
    that fails on meta, or whose op has no formula, is not priced."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from torchutil.result import ProfileResult

    calls = [n for n in graph.nodes if n.op == "call_function"]
    failed: set[str] = set()
    torch.ops.util._count_begin()
    try:
        with unset_fake_temporarily(), torch.no_grad():
            for n in calls:
                _C._enter_module(n.name)
                try:
                    _call_on_meta(n, graph.owning_module)
                except Exception:  # noqa: BLE001 - any failure leaves the node unpriced, named
                    failed.add(n.name)
                finally:
                    _C._exit_module()
        out = torch.ops.util._count_end(torch.device("meta"), 1, 1.0, None, "auto", 1.0)
    finally:
        torch.ops.util._count_abort()  # no-op unless _count_end failed
    result = ProfileResult._from_output(out)
    priced: dict[str, list[int]] = {}
    for row in result.ops:
        p = priced.setdefault(row.module, [0, 0, 0])
        p[0] += int(row.matrix_flops)
        p[1] += int(row.vector_flops)
        p[2] += int(row.bytes)
    unknown = set(result.unknown_ops)
    out_table: dict[str, tuple[int, int, int, bool]] = {}
    for n in calls:
        if n.name in priced:
            out_table[n.name] = (*priced[n.name], True)
        else:  # no row: a view or other free op (priced at 0), or an op without formula
            free = n.name not in failed and not (set(_op_names(n)[:1]) & unknown)
            out_table[n.name] = (0, 0, 0, free)
    return out_table


_C._set_callback("inductor_recording", Recording)  # what a profile that traces kernels makes
