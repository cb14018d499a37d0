"""The SDK's side of the tools' results: the shapes and annotations the official server declares, and a
core's result as the SDK's ``CallToolResult``.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

import typing_extensions as te
from mcp_types import CallToolResult, ToolAnnotations

from ._common import Result

__all__ = ["READ", "MediaOutput", "TextOutput", "result", "writes"]


class TextResult(TypedDict):
    """Every text tool's structured result, as the official server declares it."""

    content: str


class MediaBlock(te.TypedDict):  # pydantic reads nested ones on Python 3.11
    """An image or audio block, as the official server declares it."""

    type: Literal["image", "audio"]
    data: str
    mimeType: str


class BlobResource(te.TypedDict):  # pydantic reads nested ones on Python 3.11
    uri: str
    mimeType: te.NotRequired[str]
    blob: str


class ResourceBlock(te.TypedDict):  # pydantic reads nested ones on Python 3.11
    """An embedded resource block (any other file), as the official server declares it."""

    type: Literal["resource"]
    resource: BlobResource


class MediaResult(te.TypedDict):  # pydantic reads nested ones on Python 3.11
    """read_media_file's structured result: the content block(s) it returned, declared as the official
    server declares them (the image/audio/resource union)."""

    content: list[MediaBlock | ResourceBlock]


TextOutput = Annotated[CallToolResult, TextResult]
MediaOutput = Annotated[CallToolResult, MediaResult]

READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def writes(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    """The annotations of a tool that writes."""
    return ToolAnnotations(
        read_only_hint=False, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=False
    )


def result(answer: Result) -> CallToolResult:
    """A core's result (``_common.Result``) as the SDK's ``CallToolResult``, for a tool on the SDK path."""
    return CallToolResult.model_validate(answer)
