"""SGLang's fused-MoE config JSON: read it strictly, write it, and check it against the filters.

The format (``configs/triton_<ver>/E=..,N=..,device_name=..,dtype=int4_w4a16[_down].json``):
a JSON object whose keys are token counts M as decimal strings and whose values are
the kernel kwargs (``KernelConfig.KEYS``). SGLang picks the key nearest to the batch's
M and passes the value to the kernel as ``**config``, so an unknown key (AMD's
``waves_per_eu``) is refused here rather than failing at launch. SGLang forces the
down GEMM onto the up file's BLOCK_SIZE_M at each M, so ``check_pair`` requires the
two files to agree on it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from moe_tuning.search_space import KernelConfig, SearchSpace, rejections
from moe_tuning.shapes import parse_file_name
from sglang_fastpath.errors import FastpathError

ConfigTable = dict[int, KernelConfig]


def parse_configs(text: str, where: str) -> ConfigTable:
    """The table in ``text``; ``where`` names the file in every error."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FastpathError(f"{where}: not valid JSON ({exc}): regenerate the file") from None
    if not isinstance(raw, dict) or not raw:
        raise FastpathError(f"{where}: expected a non-empty JSON object of M -> config")
    table: ConfigTable = {}
    for key, value in raw.items():
        if not key.isdigit() or int(key) < 1:
            raise FastpathError(f"{where}: key {key!r} is not a token count M >= 1 written as a decimal string")
        if int(key) in table:
            raise FastpathError(f"{where}: key {key!r} repeats M={int(key)}")
        table[int(key)] = _entry(value, f"{where}: key {key!r}")
    return table


def _entry(value: object, where: str) -> KernelConfig:
    if not isinstance(value, dict):
        raise FastpathError(f"{where}: the config is {type(value).__name__}, expected an object of kernel kwargs")
    missing = [k for k in KernelConfig.KEYS if k not in value]
    if missing:
        raise FastpathError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(value) - set(KernelConfig.KEYS))
    if unknown:
        raise FastpathError(f"{where}: unknown {', '.join(unknown)} (the INT4 kernel takes only "
                            f"{', '.join(KernelConfig.KEYS)})")
    for k in KernelConfig.KEYS:
        v = value[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise FastpathError(f"{where}: {k}={v!r} is not a positive integer")
    return KernelConfig.from_kwargs(value)


def read_configs(path: Path) -> ConfigTable:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise FastpathError(f"{path}: no such config file") from None
    return parse_configs(text, str(path))


def format_configs(table: Mapping[int, KernelConfig]) -> str:
    """The JSON text, keys in ascending M, 4-space indent like SGLang's shipped files."""
    if not table:
        raise FastpathError("refusing to write an empty config table: tune at least one M")
    return json.dumps({str(m): table[m].kwargs() for m in sorted(table)}, indent=4) + "\n"


def write_configs(path: Path, table: Mapping[int, KernelConfig]) -> None:
    """Write atomically (a temporary file renamed into place)."""
    text = format_configs(table)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


@dataclass(frozen=True)
class Problem:
    file: str
    m: int | None
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: " + (f"key '{self.m}': " if self.m is not None else "") + self.reason


def check_file(path: Path, space: SearchSpace = SearchSpace()) -> list[Problem]:
    """Every config of ``path`` against the filters for the GEMM and device its name encodes.

    The M rule is not applied: a shipped config is checked for validity, not for being
    the cheapest choice. An unreadable file or a foreign name raises FastpathError.
    """
    parsed = parse_file_name(path.name)
    table = read_configs(path)
    return [Problem(path.name, m, reason)
            for m, cfg in sorted(table.items())
            for reason in rejections(cfg, parsed.gemm, parsed.device, space)]


def check_pair(up: Path, down: Path) -> list[Problem]:
    """The up and ``_down`` files cover the same M keys with the same BLOCK_SIZE_M."""
    up_table, down_table = read_configs(up), read_configs(down)
    problems: list[Problem] = []
    only_one = sorted(set(up_table) ^ set(down_table))
    if only_one:
        problems.append(Problem(down.name, None, f"M keys {only_one} are in only one of {up.name} and this file"))
    for m in sorted(set(up_table) & set(down_table)):
        up_bm, down_bm = up_table[m].block_m, down_table[m].block_m
        if up_bm != down_bm:
            problems.append(Problem(down.name, m, f"BLOCK_SIZE_M={down_bm} but the up file has {up_bm}; "
                                                  "SGLang would override it"))
    return problems


def check_folder(folder: Path, space: SearchSpace = SearchSpace()) -> list[Problem]:
    """The CI gate: every INT4 config under ``folder`` (recursively) and every up/down pair."""
    files = sorted(folder.rglob("*dtype=int4_w4a16*.json"))
    problems = [p for f in files for p in check_file(f, space)]
    for down in (f for f in files if f.name.endswith("_down.json")):
        up = down.with_name(down.name.removesuffix("_down.json") + ".json")
        if up.is_file():
            problems += check_pair(up, down)
        else:
            problems.append(Problem(down.name, None, f"no up file {up.name} beside it"))
    return problems
