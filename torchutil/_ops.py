"""Loads torchutil._C (which registers the util:: ops) and makes torch.ops.util.profile accept
eager models.

The dispatcher carries TorchScript modules and script objects, not Python objects: a schema
cannot name an nn.Module. So the C++ ops take `Any model`, and this module puts a thin packet
in front of the ops that take a model: it boxes an eager callable (nn.Module, torch.compile'd
module, function) in a util.PyModule script object, and passes TorchScript modules through.
Everything after that, counting and timing included, runs in C++.
"""
from __future__ import annotations

from typing import Any, Collection

import torch

REBUILD = "pip install --no-build-isolation --force-reinstall ."

try:
    from torchutil import _C
except ImportError as e:
    import glob
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    if not glob.glob(os.path.join(here, "_C.*")):
        # A source checkout shadows the installed package (python run from the checkout's root).
        raise ImportError(f"torchutil: {here} has no built extension (torchutil._C): this is a source tree, "
                          f"imported instead of the installed torchutil (python puts the current folder first). "
                          f"Run from another folder, or build it here: python setup.py build_ext --inplace") from e
    # A torch with another ABI (or without the CUDA libraries the build linked) fails here,
    # before the recorded version can be read.
    raise ImportError(f"torchutil: its extension (torchutil._C) does not load under torch {torch.__version__}: "
                      f"{e}. It was probably built against another torch; rebuild it for this one: "
                      f"{REBUILD}") from e


def _built_torch_version() -> str:
    """The torch.__version__ the extension was compiled against (recorded at build time)."""
    return _C._build_info()["torch_version"]


def check_torch_version() -> None:
    """ImportError unless the running torch is the one the extension was built against: the
    extension uses torch's C++ ABI, which changes between releases and builds (+cpu, +cu130)."""
    built, running = _built_torch_version(), torch.__version__
    if built != running:
        raise ImportError(f"torchutil was built against torch {built} but torch {running} is running; "
                          f"rebuild it for this torch: {REBUILD}")


check_torch_version()

_MODEL_OPS = ("profile", "_profile")


def as_dispatchable(model: Any) -> Any:
    """Returns model in a form the dispatcher can carry as `Any`."""
    if isinstance(model, (torch.jit.ScriptModule, torch.ScriptObject)):
        return model
    return _C._wrap_module(model)  # a TypeError for a model that is not callable


def counter_sets(counters: Any) -> list[str] | None:
    """counters= as the ops take it: None, or a list of set names ("flops", "throughput",
    "timeline", "all"); a single name is a list of one. The names are checked in C++."""
    if counters is None:
        return None
    if isinstance(counters, str):
        return [counters]
    if isinstance(counters, (list, tuple)) and all(isinstance(c, str) for c in counters):
        return list(counters)
    raise TypeError(f"torchutil: counters must be None, a counter set name ({_names(CHOICES['counters'])}) "
                    f"or a list of them, got {counters!r}")


# The profile ops' options table (csrc/core/Options.h), read from C++: every row's name, schema
# type, default, choices, range and doc. torchutil.profile's signature, the command line's flags
# and the checks below are built from it; tests/test_options_table.py checks that they agree.
OPTIONS: dict[str, dict[str, Any]] = {row["name"]: row for row in _C._options_table()}
OPTION_TYPES: dict[str, str] = {name: row["type"] for name, row in OPTIONS.items()}
OPTION_DEFAULTS: dict[str, Any] = {name: row["default"] for name, row in OPTIONS.items()}
SUMMARY_OPTIONS = frozenset(name for name, row in OPTIONS.items() if row["summary_op"])

# The names the ops' enum options take, as C++ parses them; the command line offers these and
# Python names them in messages. tests/test_errors.py checks that each C++ refusal lists the
# same names. "peak" is also the source of peak_flops() and memory_bandwidth().
CHOICES: dict[str, tuple[str, ...]] = {name: row["choices"] for name, row in OPTIONS.items() if row["choices"]}


def options_doc(indent: str = "    ") -> str:
    """The options' defaults and ranges as docstring lines, from the table: for the docstrings of
    torchutil.profile and the command line."""
    lines = [f"{indent}Options, their defaults and the values they take (the options table, csrc/core/Options.h):"]
    for name, row in OPTIONS.items():
        among = "names among" if row["type"].startswith("str[]") else "one of"
        takes = row["range"] or (f"{among} {_names(row['choices'])}" if row["choices"] else "")
        lines.append(f"{indent}    {name}={row['default_literal'].replace(chr(34), chr(39))}"
                     f"{f' ({takes})' if takes else ''}: {row['doc']}")
    return "\n".join(lines) + "\n"


def _names(names: Collection[str]) -> str:
    return ", ".join(repr(n) for n in names)


def check_choice(what: str, value: Any, names: Collection[str], prefix: str = "torchutil") -> Any:
    """value when it is one of `names`, else ValueError("<prefix>: <what> must be one of 'a',
    'b', got 'x'"): how Python refuses a name that is not in a table."""
    if value not in names:
        raise ValueError(f"{prefix}: {what} must be one of {_names(names)}, got {value!r}")
    return value

def device_of(what: str, device: Any) -> torch.device:
    """torch.device(device) for the function `what`, or a one-line error naming the value: a
    ValueError for a string torch cannot read ("bogus") or a CUDA device this machine lacks (the
    dispatcher would stop at an internal assert), a TypeError for something else."""
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise TypeError(f"torchutil: {what}'s device must be a torch.device, a str or an int, got "
                        f"{type(device).__name__}")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ValueError(f"torchutil: {what}: unknown device {device!r}; use cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"torchutil: {what}: device {device!r}, but CUDA is not available on this machine")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"torchutil: {what}: no device {device!r}; this machine has {torch.cuda.device_count()} "
                         f"CUDA device(s)")
    return dev


_TYPE_WORDS = {"int": "an int", "float": "a number", "bool": "a bool (True or False)", "str": "a str"}
_INT64_MAX = 2**63 - 1  # the dispatcher carries an int option as int64_t


def _type_ok(kind: str, value: Any) -> bool:
    if kind.endswith("?"):
        if value is None:
            return True
        kind = kind[:-1]
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "str[]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    raise AssertionError(f"an option type the table has and this check does not: {kind}")


def _check_range(name: str, kind: str, value: Any) -> None:
    """A ValueError naming the option and the bound where a well-typed value cannot cross to C++
    (the dispatcher would dump the schema): an int beyond int64, a number beyond a double."""
    if kind == "int" and isinstance(value, int) and not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise ValueError(f"torchutil: {name} must fit a 64-bit int ({-_INT64_MAX - 1} .. {_INT64_MAX}), got {value}")
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        try:
            float(value)
        except OverflowError:
            raise ValueError(f"torchutil: {name} must be a number within a double's range (about 1.8e308), got "
                             f"an int of {value.bit_length()} bits") from None


def check_options(op: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options of a call of util::<op> with their types checked against the table: a
    TypeError naming the option and the value (not the dispatcher's dump of the schema), and
    for an unknown name the names there are. counters may be one set name (a list of one)."""
    allowed = SUMMARY_OPTIONS if op == "profile" else OPTION_TYPES.keys()
    out = {}
    for name, value in options.items():
        if name not in allowed:
            raise TypeError(f"torchutil: {op}() got an unexpected keyword argument {name!r}; its options are "
                            f"{', '.join(n for n in OPTION_TYPES if n in allowed)}")
        if name == "counters":
            value = counter_sets(value)
        kind = OPTION_TYPES[name]
        if not _type_ok(kind, value):
            want = _TYPE_WORDS.get(kind.rstrip("?"), kind.rstrip("?"))
            raise TypeError(f"torchutil: {name} must be {want}{' or None' if kind.endswith('?') else ''}, "
                            f"got {value!r} ({type(value).__name__})")
        _check_range(name, kind.rstrip("?"), value)
        out[name] = value
    return out


def bind_inputs(model: Any, x: Any, args: Any, kwargs: Any, batch_size: int | None
                ) -> tuple[Any, list[torch.Tensor], int | None]:
    """(the model as the ops take it, the input tensors, the batch size to pass or None).

    x: a tensor or a non-empty list/tuple of tensors, called as model(*x). args/kwargs (as
    torch.export takes them): model(*args, **kwargs) for any nesting; their tensors only tell
    the device, and the batch is batch_size, else the first tensor's first dimension when that
    tensor is an argument itself (of two or more dimensions), else the length of the list it
    sits in when it is in a list of tensors (torchvision's detection models take a list of
    images), else an error asking for batch_size."""
    if args is None and kwargs is None:
        if x is None:
            raise TypeError("torchutil: profile needs the model's inputs: x (a tensor or a list of tensors, "
                            "model(*x)) or args=(...) and/or kwargs={...} (model(*args, **kwargs))")
        return as_dispatchable(model), _as_tensors(x), batch_size
    if x is not None:
        raise TypeError("torchutil: pass the inputs as x or as args=/kwargs=, not both")
    if args is None:
        args = ()
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"torchutil: args must be a tuple of the model's positional arguments, got "
                        f"{type(args).__name__}")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise TypeError(f"torchutil: kwargs must be a dict of the model's keyword arguments by name, got "
                        f"{type(kwargs).__name__}")
    wrapped = _C._wrap_module(model, tuple(args), dict(kwargs))  # a TypeError for a model that is not callable
    tensors = [t for t in torch.utils._pytree.tree_leaves((tuple(args), kwargs)) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise TypeError("torchutil: args/kwargs hold no tensor; torchutil needs one to know the device")
    if batch_size is None:
        batch_size = _batch_of(list(args) + list(kwargs.values()))
    return wrapped, tensors, batch_size


def check_batch_dim(x: torch.Tensor) -> None:
    """ValueError for an input whose batch is told by its first dimension and that dimension is
    empty: the forward would count nothing and time an empty call (the command line refuses
    --batch 0 alike). For a batch told by args=/kwargs=, which reaches C++ as batch_size; C++'s
    batchOf (csrc/libtorch/ProfileInputs.cpp) makes the same check, in the same words, for x."""
    if x.dim() >= 2 and x.size(0) == 0:
        raise ValueError(f"torchutil: the input's batch dimension is empty (shape {tuple(x.shape)}); "
                         f"profile at least one sample")


def _batch_of(values: list[Any]) -> int:
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.dim() >= 2:
                check_batch_dim(v)
                return v.size(0)
            break
        if isinstance(v, (list, tuple)) and v and all(isinstance(t, torch.Tensor) for t in v):
            return len(v)
        if any(isinstance(t, torch.Tensor) for t in torch.utils._pytree.tree_leaves(v)):
            break
    raise ValueError("torchutil: cannot tell the batch size from args/kwargs (the first tensor is neither an "
                     "argument of two or more dimensions nor in a list of tensors); pass batch_size=")


def _as_tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)) and x and all(isinstance(t, torch.Tensor) for t in x):
        return list(x)
    raise TypeError(
        f"torchutil: x must be a Tensor or a non-empty list/tuple of Tensors, got {type(x).__name__}"
        " (for other inputs pass args=(...) and/or kwargs={...})"
    )


class ModelOpPacket:
    """torch.ops.util.<op> for ops whose first argument is a model.

    Calls take the model's inputs as x or as args=/kwargs= (see bind_inputs), check the
    options' types (check_options), box the model (see as_dispatchable) and go to the real
    OpOverloadPacket by keyword; attribute access (.default, .op, ._schema, ...) goes straight
    to it.
    """

    def __init__(self, name: str, packet: torch._ops.OpOverloadPacket) -> None:
        self._name = name
        self._packet = packet
        self.__doc__ = packet.__doc__

    def __call__(self, model: Any, x: Any = None, *, args: Any = None, kwargs: Any = None,
                 **options: Any) -> Any:
        options = check_options(self._name, options)
        if self._name == "profile" and args is None and kwargs is None and isinstance(x, (list, tuple)) and len(x) > 1:
            # util::profile's schema takes one tensor: several are bound as the model's arguments,
            # so that it runs model(*x) as torchutil.profile does; x[0] gives the device and batch.
            tensors = _as_tensors(x)
            model, x = _C._wrap_module(model, tuple(tensors), None), tensors[0]
        model, tensors, batch = bind_inputs(model, x, args, kwargs, options.get("batch_size"))
        if batch is not None:  # else C++ takes (and checks) the first input's first dimension
            options["batch_size"] = batch
        inputs = tensors[0] if self._name == "profile" else tensors
        return self._packet(model, inputs, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._packet, name)

    def __repr__(self) -> str:
        return f"ModelOpPacket({self._packet!r})"


for _name in _MODEL_OPS:
    setattr(torch.ops.util, _name, ModelOpPacket(_name, getattr(torch.ops.util, _name)))


def build_info() -> dict[str, Any]:
    """What this build of torchutil has compiled in: {'cuda': bool, 'cupti': bool,
    'torch_version': str (the torch it was built against)}."""
    return dict(_C._build_info())
