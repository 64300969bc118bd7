"""The fact catalogue: a fact's label and unit from its name (the unit: its last word), how its value reads.

Every sink reads facts here, so that one fact has one label and one unit everywhere (pure).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from watchdog.vocabulary import format_duration

__all__ = ["GLANCE", "FactInfo", "FactValue", "catalogue", "describe", "fact_text", "glance", "number"]

# A fact's value as the verdict holds it: a number most often, sometimes text, a per-GPU mapping from probes.
FactValue = int | float | str | Mapping[str, float]

# Words of fact names as people write them (`avail_mem_after_weights_gb` -> "Free memory after weights").
_WORDS = {
    "avail": "free",
    "mem": "memory",
    "kv": "KV",
    "gpu": "GPU",
    "gpus": "GPUs",
    "cpu": "CPU",
    "cuda": "CUDA",
    "tp": "TP",
    "pp": "PP",
    "dp": "DP",
    "ep": "EP",
    "bs": "batch size",
    "num": "number of",
    "max": "max",
    "len": "length",
}
# Unit suffixes of fact names: the value's unit.
_UNITS = {"gb": "GB", "gib": "GiB", "mb": "MB", "mib": "MiB", "kb": "KB", "pct": "%", "percent": "%"}
_SECONDS = frozenset({"seconds", "secs", "s"})


@dataclass(frozen=True, slots=True)
class FactInfo:
    """What a fact's name says: a label people read, its unit ("" for none), and whether it is seconds."""

    name: str
    label: str
    unit: str = ""
    seconds: bool = False


# The memory facts worth a glance (the live view, the status page), in their order: (name, short label); the
# value reads as `fact_text` gives it, with its unit.
GLANCE: tuple[tuple[str, str], ...] = (
    ("avail_mem_after_weights_gb", "free after weights"),
    ("kv_cache_tokens", "KV tokens"),
    ("avail_mem_before_weights_gb", "free before weights"),
    ("weights_mem_gb", "weights"),
    ("kv_cache_gb", "KV cache"),
    ("kv_cache_memory_gb", "KV cache"),
    ("avail_mem_after_kv_cache_gb", "free after KV cache"),
    ("graph_mem_gb", "graphs"),
)


def glance(facts: Mapping[str, object]) -> list[str]:
    """The facts worth a glance that `facts` has as numbers, as short phrases: `free after weights 16.3 GB`."""
    return [
        f"{label} {fact_text(name, facts[name])}"
        for name, label in GLANCE
        if number(facts.get(name)) is not None
    ]


def catalogue() -> dict[str, object]:
    """The catalogue as data for the status page's script, which reads facts as `describe` and `fact_text` do."""
    return {"glance": GLANCE, "words": _WORDS, "units": _UNITS, "seconds": sorted(_SECONDS)}


def describe(name: str) -> FactInfo:
    """The catalogue's entry for `name`: `avail_mem_after_weights_gb` -> ("Free memory after weights", "GB")."""
    words = [w for w in name.split("_") if w]
    unit = ""
    if len(words) > 1 and words[-1].lower() in _UNITS:
        unit = _UNITS[words.pop().lower()]
    seconds = len(words) > 1 and words[-1].lower() in _SECONDS
    if seconds:
        words.pop()
    label = " ".join(_WORDS.get(w.lower(), w) for w in words) or name
    if seconds:
        label += " time"
    return FactInfo(name, label[:1].upper() + label[1:], unit, seconds)


def number(value: object) -> float | None:
    """A fact's value as a finite number, None when it is not one (text, a mapping, a bool)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def fact_text(name: str, value: object, *, digits: int | None = None) -> str:
    """A fact's value as a person reads it, with its unit: `16.3 GB`, `812,345`, `3m12s`, `yes`.

    `digits`: decimals of a non-integral number (default: as short as exact, `:g`)."""
    info = describe(name)
    if isinstance(value, bool) or value is None:
        text = {True: "yes", False: "no", None: ""}[value]
    elif isinstance(value, int | float):
        if info.seconds:
            return format_duration(float(value))
        if isinstance(value, int):
            text = f"{value:,}"
        elif value.is_integer() and 1000 <= abs(value) < 1e15:
            text = f"{value:,.0f}"
        else:
            text = f"{value:.{digits}f}" if digits is not None else f"{value:g}"
    elif isinstance(value, Mapping):
        return ", ".join(f"{k}: {fact_text(name, v, digits=digits)}" for k, v in value.items())
    else:
        text = str(value)
    if info.unit and text:
        text += info.unit if info.unit == "%" else f" {info.unit}"
    return text
