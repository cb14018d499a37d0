"""The schema walk (guard/_schema.py): every path in a tool's JSON input schema, found with the guard's own
name rule and written in its locator syntax, and a whole argument around a value that the schema accepts
(checked by a real JSON Schema validator, and by the real SDK's input validation)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from mcp.server import MCPServer
from pydantic import BaseModel, Field

from mcp_roots.guard import path_slots, slot_at, walk_schema
from mcp_roots.guard._annotations import path_locators

pytestmark = pytest.mark.anyio

DEFS = {
    "Leaf": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "mode": {"enum": ["r", "w"]}},
        "required": ["path", "mode"],
    },
    "Node": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "child": {"$ref": "#/$defs/Node"}},
    },
}

#: (schema of one property "arg", expected [(locator, kind, by)])
CASES: list[tuple[str, dict[str, Any], list[tuple[str, str, str]]]] = [
    ("plain string named path", {"type": "string"}, [("arg", "path", "user")]),
    ("$ref to an object", {"$ref": "#/$defs/Leaf"}, [("arg.path", "path", "name")]),
    (
        "array of objects",
        {"type": "array", "items": {"$ref": "#/$defs/Leaf"}, "minItems": 2},
        [("arg[].path", "path", "name")],
    ),
    (
        "two objects deep",
        {"type": "object", "properties": {"out": {"$ref": "#/$defs/Leaf"}}, "required": ["out"]},
        [("arg.out.path", "path", "name")],
    ),
    (
        "nullable anyOf",
        {"anyOf": [{"$ref": "#/$defs/Leaf"}, {"type": "null"}]},
        [("arg.path", "path", "name")],
    ),
    ("oneOf", {"oneOf": [{"type": "integer"}, {"$ref": "#/$defs/Leaf"}]}, [("arg.path", "path", "name")]),
    (
        "a map of objects",
        {"type": "object", "additionalProperties": {"$ref": "#/$defs/Leaf"}},
        [("arg{}.path", "path", "name")],
    ),
    (
        "format uri",
        {"type": "object", "properties": {"doc": {"type": "string", "format": "uri"}}, "required": ["doc"]},
        [("arg.doc", "uri", "format")],
    ),
    (
        "described",
        {
            "type": "object",
            "properties": {"where": {"type": "string", "description": "The directory to list"}},
            "required": ["where"],
        },
        [("arg.where", "path", "description")],
    ),
    (
        "prefixItems",
        {"type": "array", "prefixItems": [{"type": "integer"}, {"$ref": "#/$defs/Leaf"}]},
        [("arg[1].path", "path", "name")],
    ),
    ("recursive: no path, no loop", {"$ref": "#/$defs/Node"}, []),
]


def tool_schema(arg: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"arg": arg, "count": {"type": "integer", "minimum": 3}},
        "required": ["arg", "count"],
        "$defs": DEFS,
    }


@pytest.mark.parametrize(("what", "arg", "expected"), CASES, ids=[c[0] for c in CASES])
def test_every_path_is_found_and_a_whole_valid_argument_is_built_around_it(
    what: str, arg: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    schema = tool_schema(arg)
    slots = walk_schema(schema, every=what.startswith("plain")).slots
    assert [(s.locator, s.kind, s.by) for s in slots] == expected
    for slot in slots:
        arguments = slot.arguments("/the/value")
        jsonschema.Draft202012Validator(schema).validate(arguments)  # raises if the schema refuses it
        assert slot.values(arguments)[0] == "/the/value"  # and read back where it was put


def test_the_name_rule_is_the_guards() -> None:
    """The same names are paths in a Python annotation (the guard's audit) and in a JSON schema."""
    names = ["path", "file_path", "filePath", "outputDir", "project_root", "src", "file_uri", "paths"]
    names += ["profile", "xpath", "file_size", "content", "name", "data_source", "location"]
    for name in names:
        in_python = bool(path_locators(str, name))
        in_schema = bool(path_slots({"type": "object", "properties": {name: {"type": "string"}}}))
        assert in_python == in_schema, name


def test_a_recursive_or_too_deep_schema_is_opaque_not_endless() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for i in range(12):
        deep = {"type": "object", "properties": {f"l{i}": deep}}
    found = walk_schema(
        {"type": "object", "properties": {"path": deep, "n": {"$ref": "#/$defs/Node"}}, "$defs": DEFS}
    )
    assert found.slots == []
    assert any(o.endswith("...") for o in found.opaque)
    cyclic = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/A"}},
    }
    assert walk_schema(cyclic).slots == []  # a $ref to itself ends, and raises nothing
    assert walk_schema({"properties": "nonsense"}).slots == []  # so does garbage


def test_slot_at_takes_the_guards_locators_and_names_what_is_there() -> None:
    schema = tool_schema({"type": "array", "items": {"$ref": "#/$defs/Leaf"}})
    assert slot_at(schema, "arg[].path").locator == "arg[].path"
    assert slot_at(schema, "arg[0].path").locator == "arg[].path"
    with pytest.raises(ValueError, match=r"no string at 'arg' \(the strings: arg\[\]\.path\)"):
        slot_at(schema, "arg")
    with pytest.raises(ValueError, match="bad locator"):
        slot_at(schema, "arg..path")


class Output(BaseModel):
    path: str
    overwrite: bool = False
    level: int = Field(ge=5, le=9)


class Export(BaseModel):
    title: str = Field(min_length=4)
    output: Output
    tags: list[str] = Field(min_length=1)


async def test_the_built_argument_passes_the_sdks_own_input_validation() -> None:
    server = MCPServer("x")
    seen: list[str] = []

    @server.tool()
    def export(request: Export, items: list[Output], note: str | None = None) -> str:
        seen.append(request.output.path)
        seen.extend(i.path for i in items)
        return "ok"

    from mcp import Client

    async with Client(server) as client:
        tool = (await client.list_tools()).tools[0]
        schema = tool.model_dump(mode="json", by_alias=True)["inputSchema"]
        slots = path_slots(schema)
        assert [s.locator for s in slots] == ["request.output.path", "items[].path"]
        for slot in slots:
            result = await client.call_tool("export", slot.arguments("/v", other=lambda s: "/other"))
            assert not result.is_error, result
    assert seen == ["/v", "/other", "/other", "/v"]
