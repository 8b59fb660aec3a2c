"""Writing a Hugging Face folder deterministically: config JSON and safetensors, shard by shard.

``write_checkpoint`` draws the tensors of a ``TensorSpec`` stream one at a time,
moves each to host memory and flushes a shard as soon as it reaches the size
limit, so at most one shard (plus the tensor being made) is ever held: a model
larger than host memory can be written from a GPU. A spec marked ``zeros`` is
neither drawn nor written: the file gets a hole there (a sparse file, which reads
back as zeros), so the oracle Kimi pairs' routed experts, exact zeros, cost no disk
time. The same stream gives the same bytes: shard names depend only on the sizes,
JSON is written with sorted keys and safetensors metadata is fixed. Files are
written in the safetensors layout (an 8-byte little-endian header length, the JSON
header padded with spaces to 8 bytes, the tensors back to back in insertion order),
which ``safetensors.safe_open`` reads as its own.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable

import torch

from sglang_fastpath.models.tensors import TensorSpec

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
GIB = 1 << 30


@dataclass
class CheckpointInfo:
    files: list[str] = field(default_factory=list)
    tensors: int = 0
    params: int = 0
    total_bytes: int = 0  # tensor bytes, as in the index's metadata.total_size


_DTYPES = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.float64: "F64",
           torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
           torch.bool: "BOOL"}


def save_tensors(tensors: dict[str, torch.Tensor | TensorSpec], path: Path) -> None:
    """One safetensors file, readable by everyone; a ``TensorSpec`` entry (a ``zeros`` one) is left as a hole."""
    header: dict[str, dict] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, t in tensors.items():
        nbytes = t.nbytes if isinstance(t, TensorSpec) else t.numel() * t.element_size()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for t in tensors.values():
            if isinstance(t, TensorSpec):
                f.seek(t.nbytes, os.SEEK_CUR)
            else:
                f.write(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        f.truncate(8 + len(text) + offset)  # a trailing hole still counts in the size
    os.chmod(path, 0o644)


def write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def shard_name(index: int, count: int) -> str:
    return f"model-{index:05d}-of-{count:05d}.safetensors"


def _made(spec: TensorSpec) -> torch.Tensor:
    """``spec`` drawn, checked against its declaration and moved to host memory."""
    tensor = spec.make()
    if tuple(tensor.shape) != spec.shape or tensor.dtype != spec.dtype:
        raise ValueError(f"{spec.name}: made {tuple(tensor.shape)} {tensor.dtype}, declared {spec.shape} {spec.dtype}")
    return tensor.to("cpu").contiguous()


class _ShardWriter:
    def __init__(self, folder: Path, max_shard_bytes: int) -> None:
        self.folder = folder
        self.max_shard_bytes = max_shard_bytes
        self.pending: dict[str, torch.Tensor | TensorSpec] = {}  # a spec: its zeros, written as a hole
        self.pending_bytes = 0
        self.temp_files: list[Path] = []
        self.shard_of: dict[str, int] = {}
        self.info = CheckpointInfo()

    def add(self, spec: TensorSpec) -> None:
        if spec.name in self.shard_of or spec.name in self.pending:
            raise ValueError(f"tensor {spec.name} is written twice")
        entry = spec if spec.zeros else _made(spec)
        if self.pending and self.pending_bytes + spec.nbytes > self.max_shard_bytes:
            self.flush()
        self.pending[spec.name] = entry
        self.pending_bytes += spec.nbytes
        self.info.tensors += 1
        self.info.params += spec.param_count
        self.info.total_bytes += spec.nbytes

    def flush(self) -> None:
        if not self.pending:
            return
        path = self.folder / f".shard-{len(self.temp_files) + 1:05d}.tmp"
        save_tensors(self.pending, path)
        for name in self.pending:
            self.shard_of[name] = len(self.temp_files)
        self.temp_files.append(path)
        self.pending, self.pending_bytes = {}, 0

    def close(self) -> CheckpointInfo:
        self.flush()
        count = len(self.temp_files)
        if count == 1:
            os.replace(self.temp_files[0], self.folder / SINGLE_FILE)
            self.info.files = [SINGLE_FILE]
            return self.info
        names = [shard_name(i + 1, count) for i in range(count)]
        for temp, name in zip(self.temp_files, names, strict=True):
            os.replace(temp, self.folder / name)
        index = {"metadata": {"total_size": self.info.total_bytes},
                 "weight_map": {t: names[i] for t, i in sorted(self.shard_of.items())}}
        write_json(self.folder / INDEX_FILE, index)
        self.info.files = [*names, INDEX_FILE]
        return self.info


def write_checkpoint(folder: Path, specs: Iterable[TensorSpec], max_shard_bytes: int = 4 * GIB) -> CheckpointInfo:
    """Write ``specs`` as safetensors in ``folder``: one file, or shards plus an index."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [*folder.glob("model*.safetensors"), folder / INDEX_FILE, *folder.glob(".shard-*.tmp")]:
        stale.unlink(missing_ok=True)
    writer = _ShardWriter(folder, max_shard_bytes)
    for spec in specs:
        writer.add(spec)
    return writer.close()


def measure(specs: Iterable[TensorSpec]) -> CheckpointInfo:
    """What ``write_checkpoint`` would write, without drawing any tensor."""
    info = CheckpointInfo()
    for spec in specs:
        info.tensors += 1
        info.params += spec.param_count
        info.total_bytes += spec.nbytes
    return info
