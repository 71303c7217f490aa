"""How profile_generate drives a generation: the step torchutil.profile runs, and the KV-cache
adapters that put a cache back at the measured context before each of its forwards (Hugging
Face's DynamicCache and StaticCache; any cache through a rewind function)."""
from __future__ import annotations

import inspect
from typing import Any, Callable

import torch

__all__ = ["HFRunner", "Step", "StepRunner", "error", "next_token"]


def error(message: str) -> ValueError:
    return ValueError(f"torchutil.profile_generate: {message}")


def next_token(logits: torch.Tensor) -> torch.Tensor:
    """Greedy: the argmax of the last position, [batch, 1]."""
    last = logits[:, -1] if logits.dim() == 3 else logits
    return last.argmax(-1, keepdim=True)


def _tensor_bytes(obj: Any, depth: int = 4, seen: set[int] | None = None) -> int:
    """Bytes of the distinct tensors reachable from obj through lists, tuples, dicts and
    attributes, `depth` levels down: what a cache object holds."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth < 0:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        items: Any = obj.values()
    elif isinstance(obj, (list, tuple)):
        items = obj
    else:
        items = getattr(obj, "__dict__", {}).values()
    return sum(_tensor_bytes(v, depth - 1, seen) for v in items)


def _logits(out: Any) -> torch.Tensor:
    """What step= returned, when it is logits: a tensor [batch, vocab] or [batch, tokens, vocab]."""
    if not isinstance(out, torch.Tensor) or out.dim() not in (2, 3):
        what = (f"a {out.dim()}-D tensor of shape {tuple(out.shape)}" if isinstance(out, torch.Tensor)
                else "None" if out is None else f"a {type(out).__name__}")
        raise error(f"step= returned {what}; it must return logits (a tensor [batch, vocab] or [batch, tokens, "
                    f"vocab])")
    return out


class Step(torch.nn.Module):
    """What torchutil.profile runs: `restore()` (the cache back at the measured context), then
    one forward. Every forward of a profile (warm-ups, the count, a CUDA-graph capture and its
    replays) is thus the same step at the same context. The model's keyword arguments (the
    cache, use_cache) are bound in `call`: this is the one place to hand them to
    torchutil.profile instead once it takes kwargs=."""

    def __init__(self, model: Any, call: Callable[[torch.Tensor], torch.Tensor], restore: Callable[[], None]):
        super().__init__()
        self.model = model  # a submodule: the per-op table names the model's modules
        self._call = call
        self._restore = restore

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        self._restore()
        return self._call(tokens)


class HFRunner:
    """A Hugging Face causal LM with a DynamicCache or StaticCache of full-attention layers."""

    def __init__(self, model: Any, kind: str, max_len: int, positions: int):
        """positions: prompt + max_new_tokens, checked against the model's
        max_position_embeddings before any cache is made."""
        try:
            import transformers
        except ImportError:
            raise ImportError("torchutil.profile_generate: a model without step= is taken for a Hugging Face "
                              "causal LM, which needs transformers (pip install transformers); for another "
                              "stack pass step=, cache= and rewind=") from None
        if not isinstance(model.config, transformers.PretrainedConfig):
            raise error(f"without step=, model must be a Hugging Face causal LM; its .config is a "
                        f"{type(model.config).__name__}, not a transformers PretrainedConfig; for another stack "
                        f"pass step=, cache= and rewind=")
        if kind not in ("dynamic", "static"):
            raise error(f"cache must be 'dynamic' or 'static' for a Hugging Face model, got {kind!r}")
        trained = getattr(model.config.get_text_config(), "max_position_embeddings", None)
        if isinstance(trained, int) and positions > trained:
            raise error(f"prompt + max_new_tokens = {positions:,} positions exceed the model's "
                        f"max_position_embeddings ({trained:,}); generate at most {trained:,} positions")
        self.model, self.kind, self.max_len = model, kind, max_len
        self.version = transformers.__version__
        params = inspect.signature(model.forward).parameters
        self.extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        # transformers renamed the cache argument past_key_values to cache (5.2x; the old name
        # warns "deprecated"): the model's forward names the one its release takes, generate too.
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.cache = self._new_cache()
        self._position: torch.Tensor | None = None

    def _new_cache(self) -> Any:
        from transformers import DynamicCache, StaticCache

        if self.kind == "static":
            return StaticCache(config=self.model.config, max_cache_len=self.max_len)
        return DynamicCache(config=self.model.config)

    def call(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model(tokens, **{self.cache_arg: self.cache}, use_cache=True, **self.extra).logits

    def _layers(self) -> list[Any]:
        want = "StaticLayer" if self.kind == "static" else "DynamicLayer"
        layers = list(getattr(self.cache, "layers", []))
        odd = sorted({type(layer).__name__ for layer in layers} - {want})
        if not layers or odd:
            raise error(f"a {self.kind} cache of {want}s is supported (full attention, transformers >= 5); this "
                        f"model's cache has {odd or 'no layers'}")
        if self.kind == "static" and not all(isinstance(getattr(la, "cumulative_length", None), torch.Tensor)
                                             for la in layers):
            raise error("this transformers' StaticLayer has no cumulative_length tensor to rewind; "
                        f"transformers {self.version} is not supported")
        return layers

    def checkpoint(self, length: int) -> Callable[[], None]:
        """A function that puts the cache back at its first `length` tokens (call after a forward)."""
        layers = self._layers()
        if self.kind == "static":
            if self._position is None:
                # One tensor for every layer's write position, so rewinding is one fill kernel.
                self._position = torch.stack([la.cumulative_length for la in layers])
                for i, la in enumerate(layers):
                    la.cumulative_length = self._position[i]
            position = self._position

            def rewind() -> None:
                position.fill_(length)
            return rewind
        # The layers' tensors at `length`, held alive: a captured graph reads them on every replay.
        # At 0 they are new empty tensors, which keep no earlier cache's storage alive.
        saved = [tuple(t[..., :length, :] if length else t.new_empty((*t.shape[:-2], 0, t.shape[-1]))
                       for t in (la.keys, la.values)) for la in layers]

        def restore() -> None:
            for la, (k, v) in zip(layers, saved):
                la.keys, la.values = k, v
        return restore

    def observe(self) -> None:
        pass

    def kv_bytes_per_token(self) -> float:
        """K and V bytes of one position over the batch, from the cache's tensors [B, H, S, D]."""
        return float(sum(t.numel() * t.element_size() / t.shape[-2]
                         for la in self._layers() for t in (la.keys, la.values)))

    def loop(self, input_ids: torch.Tensor, n: int) -> torch.Tensor:
        config = self.model.config
        pad = next((t for t in (config.pad_token_id, config.eos_token_id) if t is not None), 0)
        pad = pad[0] if isinstance(pad, (list, tuple)) else pad   # a list of eos tokens
        out = self.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=n,
                                  min_new_tokens=n, do_sample=False, pad_token_id=pad, disable_compile=True,
                                  **{self.cache_arg: self._new_cache()})
        if out.shape[1] != input_ids.shape[1] + n:
            raise RuntimeError(f"torchutil.profile_generate: generate returned {out.shape[1] - input_ids.shape[1]} "
                               f"new tokens, not {n}")
        return out[:, input_ids.shape[1]:]


class StepRunner:
    """Any stack: step(tokens, cache) -> logits, rewind(cache, length)."""

    def __init__(self, step: Callable[..., torch.Tensor], cache: Any, rewind: Callable[[Any, int], None],
                 kv_bytes_per_token: float | None):
        self.step, self.cache, self.rewind = step, cache, rewind
        self.given_kv = kv_bytes_per_token
        self.sizes: list[int] = []  # the cache's tensor bytes after the prefill and the first step

    def call(self, tokens: torch.Tensor) -> torch.Tensor:
        return _logits(self.step(tokens, self.cache))

    def observe(self) -> None:
        """Called after each forward of the generation itself (not of a profile)."""
        if len(self.sizes) < 2:
            self.sizes.append(_tensor_bytes(self.cache))

    def checkpoint(self, length: int) -> Callable[[], None]:
        return lambda: self.rewind(self.cache, length)

    def kv_bytes_per_token(self) -> float:
        if self.given_kv is not None:
            return float(self.given_kv)
        if len(self.sizes) < 2 or self.sizes[1] <= self.sizes[0]:
            raise error("the cache's tensors did not grow by a decode step (a preallocated cache, or "
                        "max_new_tokens=1), so its bytes per token are unknown: pass kv_bytes_per_token=")
        return float(self.sizes[1] - self.sizes[0])

    def loop(self, input_ids: torch.Tensor, n: int) -> torch.Tensor:
        self.rewind(self.cache, 0)
        tokens = [next_token(self.call(input_ids))]
        for _ in range(n - 1):
            tokens.append(next_token(self.call(tokens[-1])))
        return torch.cat(tokens, 1)
