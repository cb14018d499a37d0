"""A guarded MCPServer with the fixtures the official conformance suite's server scenarios call.

Usage: python tests/servers/conformance_fixture.py --http PORT ROOT   (streamable HTTP on 127.0.0.1:PORT/mcp)
"""

from __future__ import annotations

import base64
import json
import logging
import sys
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp_types import (
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

from mcp_roots import RootsGuard

# A 1x1 PNG and a silent WAV: what the scenarios check is the content's type and MIME type.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


class Answer(BaseModel):
    response: str = Field(description="The user's answer")


def _ask(message: str) -> Elicit[Answer]:
    return Elicit(message, Answer)


def _sample(prompt: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(text=prompt))], max_tokens=100)


def build(root: str) -> MCPServer:
    """The fixture server, guarded by a RootsGuard whose fallback root is ``root``."""
    guard = RootsGuard(root)
    server = MCPServer("mcp-roots-conformance-fixture")
    guard.install(server)
    lowlevel = server._lowlevel_server

    @server.tool()
    def test_simple_text() -> str:
        """Answers one text item."""
        return "This is a simple text response for testing."

    @server.tool()
    def test_image_content() -> list[ImageContent]:
        """Answers one image."""
        return [ImageContent(data=PNG, mime_type="image/png")]

    @server.tool()
    def test_audio_content() -> list[AudioContent]:
        """Answers one audio clip."""
        return [AudioContent(data=WAV, mime_type="audio/wav")]

    def embedded(uri: str, text: str, mime: str = "text/plain") -> EmbeddedResource:
        return EmbeddedResource(resource=TextResourceContents(uri=uri, mime_type=mime, text=text))

    @server.tool()
    def test_embedded_resource() -> list[EmbeddedResource]:
        """Answers one embedded resource."""
        return [embedded("test://embedded-resource", "This is an embedded resource content.")]

    @server.tool()
    def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
        """Answers text, an image and a resource."""
        return [
            TextContent(text="Multiple content types test:"),
            ImageContent(data=PNG, mime_type="image/png"),
            embedded("test://mixed-content-resource", '{"test": "data", "value": 123}', "application/json"),
        ]

    @server.tool()
    async def test_tool_with_logging(ctx: Context) -> str:
        """Sends three log messages, then answers."""
        for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.info(step)
        return "Tool with logging executed successfully"

    @server.tool()
    async def test_tool_with_progress(ctx: Context) -> str:
        """Reports progress three times, then answers."""
        for done in (0, 50, 100):
            await ctx.report_progress(progress=done, total=100, message=f"Completed step {done} of 100")
        return "Progress reported"

    @server.tool()
    def test_error_handling() -> str:
        """Always fails."""
        raise RuntimeError("This tool intentionally returns an error for testing")

    @server.tool()
    async def test_sampling(answer: Annotated[CreateMessageResult, Resolve(_sample)], prompt: str) -> str:
        """Asks the client's model."""
        text = answer.content.text if isinstance(answer.content, TextContent) else "No response"
        return f"LLM response: {text}"

    @server.tool()
    async def test_elicitation(answer: Annotated[Answer, Resolve(_ask)], message: str) -> str:
        """Asks the user."""
        return f"User response: action=accept, content={answer.model_dump_json()}"

    @server.tool()
    @guard.paths()
    async def test_input_required_result_list_roots(ctx: Context) -> str:
        """The roots the guard holds for this call (asked of the client, as its era asks)."""
        roots = await guard.roots(ctx)
        return json.dumps([root.as_dict() for root in roots])

    @server.resource("test://static-text", mime_type="text/plain")
    def static_text() -> str:
        """A static text resource."""
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", mime_type="image/png")
    def static_binary() -> bytes:
        """A static binary resource."""
        return base64.b64decode(PNG)

    @server.resource("test://template/{id}/data", mime_type="application/json")
    def template(id: str) -> str:
        """A resource template."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource("test://watched-resource", mime_type="text/plain")
    def watched() -> str:
        """A resource a client may subscribe to."""
        return "Watched resource content"

    @server.prompt()
    def test_simple_prompt() -> list[Message]:
        """A prompt without arguments."""
        return [UserMessage("This is a simple prompt for testing.")]

    @server.prompt()
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
        """A prompt with two arguments."""
        return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]

    @server.prompt()
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
        """A prompt that embeds a resource."""
        return [
            UserMessage(embedded(resourceUri, "Embedded resource content for testing.")),
            UserMessage("Please process the embedded resource above."),
        ]

    @server.prompt()
    def test_prompt_with_image() -> list[Message]:
        """A prompt with an image."""
        return [
            UserMessage(ImageContent(data=PNG, mime_type="image/png")),
            UserMessage("Describe the image."),
        ]

    @server.completion()  # type: ignore[untyped-decorator, no-untyped-call]
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        return Completion(values=[], total=0, has_more=False)

    async def acknowledge(ctx: Any, params: Any) -> EmptyResult:
        return EmptyResult()

    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, acknowledge)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, acknowledge)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, acknowledge)
    return server


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    _, port, root = sys.argv[1:]
    build(root).run("streamable-http", host="127.0.0.1", port=int(port))


if __name__ == "__main__":
    main()
