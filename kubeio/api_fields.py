"""Checked reads of API JSON fields, shared by every converter in ``kubeio``.

A wrongly typed field raises ``ConvertError`` naming the field's path, which the extender turns into
HTTP 400 and the cache into a logged, skipped object; a missing optional field reads as empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from scheduling.model import EMPTY_LABELS


class ConvertError(ValueError):
    """An API object is missing a field or has one of the wrong type."""


def obj_field(value: object, where: str, *, optional: bool = True) -> Mapping[str, Any]:
    """An object field (``None`` reads as empty unless required)."""
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        msg = f"{where} must be an object, got {type(value).__name__}"
        raise ConvertError(msg)
    return value


def list_field(value: object, where: str) -> list[Any]:
    """A list field (``None`` reads as empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        msg = f"{where} must be a list, got {type(value).__name__}"
        raise ConvertError(msg)
    return value


def str_field(value: object, where: str, *, required: bool = False) -> str:
    """A string field (``None`` reads as "" unless required, and then it must not be empty)."""
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        msg = f"{where} must be a non-empty string" if required else f"{where} must be a string"
        raise ConvertError(msg)
    return value


def labels_field(value: object, where: str) -> Mapping[str, str]:
    """A string-to-string map (labels, annotations, a node selector), read-only."""
    raw = obj_field(value, where)
    if not raw:
        return EMPTY_LABELS
    for key, item in raw.items():
        if not isinstance(item, str):
            msg = f"{where}[{key!r}] must be a string"
            raise ConvertError(msg)
    return MappingProxyType(dict(raw))


def int_field(value: object, where: str, *, default: int = 0, minimum: int | None = None) -> int:
    """An integer field (``None`` gives ``default``); bools and values below ``minimum`` are refused."""
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
        bound = "an integer" if minimum is None else f"an integer of at least {minimum}"
        msg = f"{where} must be {bound}"
        raise ConvertError(msg)
    return value


@dataclass(frozen=True, slots=True)
class ApiParts:
    """The four parts of an API object every converter reads, each checked to be an object."""

    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    annotations: Mapping[str, str]


def api_parts(raw: object, kind: str) -> ApiParts:
    """Split ``raw`` into metadata (required), spec, status and annotations (optional).

    Raises:
        ConvertError: ``raw`` or one of its parts is not an object.
    """
    obj = obj_field(raw, kind, optional=False)
    meta = obj_field(obj.get("metadata"), "metadata", optional=False)
    return ApiParts(
        meta,
        obj_field(obj.get("spec"), "spec"),
        obj_field(obj.get("status"), "status"),
        labels_field(meta.get("annotations"), "metadata.annotations"),
    )
