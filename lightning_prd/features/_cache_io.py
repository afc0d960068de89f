"""Keys, storage and collectives of :mod:`lightning_prd.features.cache`: per-sample digests, the keyer of
extractor settings, atomic writes, checksums, rank exchange."""

from __future__ import annotations

import enum
import functools
import hashlib
import inspect
import json
import os
import tempfile
import types
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, NoReturn, Optional

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn

from lightning_prd.functional.knn import collectives


def tensor_bytes(t: Tensor) -> memoryview:
    """The raw bytes of ``t`` (any dtype, any device; copied to the CPU when needed)."""
    return t.detach().reshape(-1).contiguous().view(torch.uint8).cpu().numpy().data


class RowDigests:
    """One SHA-256 per real sample (its dtype, shape and bytes), taken as the chunk is read: neither the
    chunk boundaries nor the buffer a chunk arrives in enter a digest, and no reference to the chunk is kept."""

    def __init__(self) -> None:
        self.digests: List[bytes] = []

    def update(self, x: Tensor) -> None:
        if x.ndim == 0:
            raise ValueError("Expected every chunk of real samples to have a batch dimension, but got a 0-dim tensor")
        n = int(x.shape[0])
        if n == 0:
            return
        layout = f"{x.dtype}{tuple(x.shape[1:])}|".encode()
        data = tensor_bytes(x)
        step = len(data) // n
        sha = hashlib.sha256
        if step == 0:  # samples of no elements
            self.digests.extend([sha(layout).digest()] * n)
        else:
            self.digests.extend([sha(layout + data[i : i + step]).digest() for i in range(0, len(data), step)])

    def joined(self) -> bytes:
        return b"".join(self.digests)


def set_digest(per_rank: List[bytes]) -> str:
    """The digest of the real set: its sample digests sorted, so neither their order nor the ranks that read
    them (how many, which samples each) enter it."""
    joined = b"".join(per_rank)
    rows = np.sort(np.frombuffer(joined, dtype="S32")) if joined else np.empty(0, dtype="S32")
    return f"{len(rows)}-" + hashlib.sha256(rows.tobytes()).hexdigest()[:24]


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file in ``path``'s folder, flushed to disk, then ``os.replace``:
    readers see the old file or the complete new one, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # the permissions of a plain new file, not mkstemp's 0600
        with os.fdopen(fd, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


class Comm:
    """The few collectives the cache needs; trivial for one process."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        if world > 1 and not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                f"RealFeatureCache: world size {world} needs an initialised torch.distributed process group"
            )

    def from_zero(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` evaluated on rank 0, returned on every rank."""
        if self.world == 1:
            return fn()
        box = [fn() if self.rank == 0 else None]
        with collectives.object_device_context():
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather(self, obj: Any) -> List[Any]:
        if self.world == 1:
            return [obj]
        out: List[Any] = [None] * self.world
        with collectives.object_device_context():
            dist.all_gather_object(out, obj)
        return out

    def gather_to_zero(self, chunks: List[Tensor]) -> Optional[List[List[Tensor]]]:
        """Every rank's chunks on rank 0 (one list per rank, in rank order); None elsewhere."""
        if self.world == 1:
            return [chunks]
        mine = torch.cat(chunks) if chunks else None
        metas = self.all_gather(None if mine is None else (int(mine.shape[0]), tuple(mine.shape[1:]), str(mine.dtype)))
        shapes = {m[1:] for m in metas if m is not None}
        if len(shapes) != 1:
            raise ValueError(
                f"Expected every rank's real features to share one width and dtype, but got {sorted(shapes)}"
            )
        tail, dtype_name = shapes.pop()
        dtype = getattr(torch, dtype_name.replace("torch.", ""))
        device = collectives.group_device()
        most = max(m[0] for m in metas if m is not None)
        padded = collectives.place(torch.zeros((most, *tail), dtype=dtype, device=device), device)
        if mine is not None:
            padded[: mine.shape[0]] = mine
        del mine
        bufs = [torch.empty_like(padded) for _ in range(self.world)] if self.rank == 0 else None
        dist.gather(padded, bufs, dst=0)
        if self.rank != 0:
            return None
        return [chunks] + [[b[: m[0]].cpu()] if m is not None else [] for b, m in zip(bufs[1:], metas[1:])]  # type: ignore[index]


def checksum(*tensors: Tensor) -> str:
    """SHA-256 of the tensors' dtypes, shapes and bytes, in order."""
    sha = hashlib.sha256()
    for t in tensors:
        sha.update(f"|{t.dtype}|{tuple(t.shape)}|".encode())
        sha.update(tensor_bytes(t))
    return sha.hexdigest()


def rows(shard: List[Tensor], chunk_rows: int) -> Iterator[Tensor]:
    """The rows of ``shard``'s tensors in slices of at most ``chunk_rows`` (views, no copies)."""
    for t in shard:
        for start in range(0, t.shape[0], chunk_rows):
            yield t[start : start + chunk_rows]


_HEAP = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a ``class`` statement (or ``type()``), not one built in C
_DESCRIPTORS = (
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
)


def qualname(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _const(c: Any) -> Any:
    if isinstance(c, types.CodeType):
        return code_digest(c)
    if isinstance(c, (tuple, frozenset)):
        items = [_const(v) for v in c]
        return sorted(items, key=repr) if isinstance(c, frozenset) else items
    return repr(c)


def code_digest(code: types.CodeType) -> str:
    """SHA-256 of what a code object does: bytecode, constants (nested code included), names, signature, flags;
    not its file name or line numbers."""
    sha = hashlib.sha256(code.co_code)
    shape = [code.co_argcount, code.co_kwonlyargcount, code.co_flags, code.co_names, code.co_freevars]
    sha.update(json.dumps([shape, _const(code.co_consts)]).encode())
    return sha.hexdigest()


class Keyer:
    """A deterministic JSON value for a setting of an extractor, or ``TypeError`` naming where it is.

    Keyed: ``None``, numbers, strings, bytes, enums, paths, ranges; torch dtypes, devices, sizes; tensors
    (dtype, shape, SHA-256 of the bytes); NumPy arrays, scalars and random generators; lists, tuples, sets
    (sorted), dicts (in order); modules (class, parameters, buffers, every submodule's public attributes and
    forward hooks); classes; functions (name, code, defaults, closure); bound methods (function and owner);
    ``functools.partial`` (function, args, keywords); plain Python objects (class and every attribute).
    Refused: anything else, e.g. locks, files, generators, objects whose state lives in C. A module's
    attributes whose name starts with ``_`` are internal (torch's machinery, scratch buffers, memos) and not
    keyed. ``hash_tensors=False`` checks the same rules without reading any tensor's bytes.
    """

    def __init__(self, hash_tensors: bool = True) -> None:
        self.hash_tensors = hash_tensors
        self._open: Dict[int, int] = {}  # id -> depth of the containers being keyed (a cycle refers back)

    def refuse(self, where: str, value: Any, why: str = "") -> NoReturn:
        raise TypeError(
            f"Expected every public attribute of argument `feature_extractor` to be a setting the disk cache can "
            f"key (numbers, strings, containers, tensors, NumPy values, functions, partials, modules or plain "
            f"objects of these), but `{where}` is a {qualname(value)}{why}: if it never changes the features, "
            f"hold it in a module attribute whose name starts with `_` (not keyed); or drop `cache_dir`"
        )

    def key(self, value: Any, where: str) -> Any:
        if isinstance(value, enum.Enum):
            return {"enum": qualname(value), "name": value.name}
        if isinstance(value, np.generic):
            return {"numpy": [value.dtype.str, str(value.dtype)], "bytes": value.tobytes().hex()}
        if value is None or type(value) in (bool, int, float, str):
            return value
        for base in (int, float, str):
            if isinstance(value, base):
                return {"type": qualname(value), "value": base(value)}
        if isinstance(value, complex):
            return {"complex": [value.real, value.imag]}
        if isinstance(value, (bytes, bytearray)):
            return {"bytes": hashlib.sha256(value).hexdigest()}
        if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size)):
            return {"torch": str(value)}
        if isinstance(value, os.PathLike):
            return {qualname(value): self.key(os.fspath(value), where)}
        if isinstance(value, (range, slice)):
            return {qualname(value): repr(value)}
        if isinstance(value, Tensor):
            return self._tensor(value, where)
        if isinstance(value, np.ndarray) and value.dtype != object:
            sha = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest() if self.hash_tensors else None
            return {"ndarray": [value.dtype.str, str(value.dtype)], "shape": list(value.shape), "sha256": sha}
        if isinstance(value, type):
            return {"class": qualname(value)}
        if isinstance(value, types.ModuleType):
            return {"module": value.__name__}
        if isinstance(value, np.ufunc):
            return {"ufunc": value.__name__}
        if isinstance(value, _DESCRIPTORS):
            return {"descriptor": f"{qualname(value.__objclass__)}.{value.__name__}"}
        owner = getattr(value, "__self__", None)
        if isinstance(value, types.BuiltinFunctionType) and (owner is None or inspect.ismodule(owner)):
            return {"builtin": f"{value.__module__}.{value.__qualname__}"}
        depth = self._open.get(id(value))
        if depth is not None:
            return {"cycle": depth}
        if len(self._open) >= 64:
            self.refuse(where, value, " nested more than 64 levels deep")
        self._open[id(value)] = len(self._open)
        try:
            return self._nested(value, where)
        finally:
            del self._open[id(value)]

    def _tensor(self, t: Tensor, where: str) -> Dict[str, Any]:
        out: Dict[str, Any] = {"tensor": str(t.dtype), "shape": list(t.shape), "layout": str(t.layout)}
        if self.hash_tensors:
            try:
                dense = t if t.layout == torch.strided else t.to_dense()
                out["sha256"] = hashlib.sha256(tensor_bytes(dense)).hexdigest()
            except (RuntimeError, NotImplementedError, TypeError) as err:
                self.refuse(where, t, f" whose values cannot be read ({type(err).__name__})")
        return out

    def _nested(self, value: Any, where: str) -> Any:
        if isinstance(value, nn.Module):
            return self.module(value, where)
        if isinstance(value, Mapping):
            items = [[self.key(k, f"{where} (a key)"), self.key(v, f"{where}[{k!r}]")] for k, v in value.items()]
            return {"dict": qualname(value), "items": items}
        if isinstance(value, (list, tuple)):
            return {"seq": qualname(value), "items": [self.key(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, (set, frozenset)):
            items = sorted((self.key(v, f"{where} (an element)") for v in value), key=json.dumps)
            return {"set": qualname(value), "items": items}
        if isinstance(value, np.ndarray):  # dtype object
            return {"ndarray": "object", "shape": list(value.shape), "items": self.key(value.tolist(), where)}
        if isinstance(value, np.random.Generator):
            return {"rng": self.key(value.bit_generator.state, f"{where}.bit_generator.state")}
        if isinstance(value, np.random.RandomState):
            return {"rng": self.key(value.get_state(legacy=False), f"{where}.get_state()")}
        if isinstance(value, torch.Generator):
            return {"generator": str(value.device), "state": self._tensor(value.get_state(), where)}
        if isinstance(value, functools.partial):
            parts = (("func", value.func), ("args", value.args), ("keywords", value.keywords))
            return {"partial": qualname(value), **{k: self.key(v, f"{where}.{k}") for k, v in parts}}
        if isinstance(value, (types.MethodType, types.MethodWrapperType, types.BuiltinMethodType)):
            owner = self.key(value.__self__, f"{where}.__self__")
            func = getattr(value, "__func__", None)
            return {"method": value.__name__, "func": self.key(func, where) if func else None, "self": owner}
        if isinstance(value, types.FunctionType):
            cells = zip(value.__code__.co_freevars, value.__closure__ or ())
            return {
                "function": f"{value.__module__}.{value.__qualname__}",
                "code": code_digest(value.__code__),
                "defaults": self.key(value.__defaults__, f"{where}.__defaults__"),
                "kwdefaults": self.key(value.__kwdefaults__, f"{where}.__kwdefaults__"),
                "closure": {n: self.key(_cell(c), f"{where} (closure variable {n!r})") for n, c in cells},
            }
        attrs = _object_state(value)
        if attrs is None:
            self.refuse(where, value, ", whose state the cache cannot read")
        return {"object": qualname(value), "state": {k: self.key(v, f"{where}.{k}") for k, v in attrs.items()}}

    def module(self, module: nn.Module, where: str) -> Dict[str, Any]:
        """Class, SHA-256 of every parameter and buffer (name, dtype, shape, bytes), and every submodule's class,
        public attributes and forward hooks. A compiled module is keyed by the module it compiles."""
        if id(module) not in self._open:  # a method bound to it, in one of its attributes, refers back
            self._open[id(module)] = len(self._open)
            try:
                return self.module(module, where)
            finally:
                del self._open[id(module)]
        sha = hashlib.sha256()
        if self.hash_tensors:
            named = list(module.named_parameters(remove_duplicate=False))
            for name, t in named + list(module.named_buffers(remove_duplicate=False)):
                sha.update(f"|{name}|{t.dtype}|{tuple(t.shape)}|".encode())
                sha.update(tensor_bytes(t))
        config = []
        for path, sub in module.named_modules():
            at = f"{where}.{path}" if path else where
            compiled = type(sub).__module__.startswith("torch._dynamo")  # keyed by its `_orig_mod` submodule
            attrs = {} if compiled else {k: v for k, v in sorted(vars(sub).items()) if _keyed_attribute(k)}
            entry = [path, qualname(sub), {k: self.key(v, f"{at}.{k}") for k, v in attrs.items()}]
            hooks = [*sub._forward_pre_hooks.values(), *sub._forward_hooks.values()]
            if hooks:
                entry.append(self.key(hooks, f"{at} (a forward hook)"))
            config.append(entry)
        return {"class": qualname(module), "weights_sha256": sha.hexdigest(), "config": config}


#: public attributes that record provenance, not computation: the parameters' bytes key the weights, so the same
#: tensors from two files (pytorch-fid's and torch-fidelity's FID Inception) or two ways of building share a key
PROVENANCE_ATTRIBUTES = ("weights_sha256",)


def _keyed_attribute(name: str) -> bool:
    return not name.startswith("_") and name not in PROVENANCE_ATTRIBUTES


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a variable assigned later)
        return None


def _object_state(obj: Any) -> Optional[Dict[str, Any]]:
    """Every attribute of a plain Python object (its ``__dict__`` and slots); None for one whose class (or a
    base) is built in C, whose state Python cannot see."""
    mro = type(obj).__mro__[:-1]
    if not mro or not all(c.__flags__ & _HEAP for c in mro):
        return None
    slots = [(c, [s] if isinstance(s, str) else list(s)) for c in mro for s in [c.__dict__.get("__slots__", ())]]
    if not hasattr(obj, "__dict__") and not any(names for _, names in slots):
        return None
    state = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
    for cls, names in slots:
        for name in names:
            if name.startswith("__") and not name.endswith("__"):  # a private name, mangled by its class
                name = f"_{cls.__name__.lstrip('_')}{name}"
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                state[name] = getattr(obj, name)
    return dict(sorted(state.items()))
