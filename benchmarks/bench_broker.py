"""Read throughput of a file through client-brokered access (files/read over stdio, base64 in JSON) beside
reading it locally, one run, and where the brokered time goes.

Usage: python benchmarks/bench_broker.py [--size-mib 100] [--chunk-mib 1 ...]
The server is examples/brokered_server.py (a subprocess); its tool streams the file with fs.open_read() and
hashes it (and, in a second row, reads it whole with fs.read(), two requests in
flight). The local figure reads the same file in the same chunk size and hashes it too, so both sides do
the same consumer work. The goal: brokered throughput at least 25% of local.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_roots import RootsProvider
from mcp_roots.broker import FileBroker, decode_content, encode_content

SERVER = Path(__file__).resolve().parent.parent / "examples" / "brokered_server.py"
MIB = 1024 * 1024


def read_locally(path: Path, chunk: int) -> tuple[float, str]:
    sha = hashlib.sha256()
    started = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while data := f.read(chunk):
            sha.update(data)
    return time.perf_counter() - started, sha.hexdigest()


def codec_cost(size: int, chunk: int) -> dict[str, float]:
    """Seconds spent on base64 and JSON for ``size`` bytes in ``chunk`` pieces, each done once per side."""
    data = os.urandom(chunk)
    pieces = max(1, size // chunk)
    started = time.perf_counter()
    for _ in range(pieces):
        text = encode_content(data)
    encode = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(pieces):
        decode_content(text, max_bytes=chunk)
    decode = time.perf_counter() - started
    message = {"jsonrpc": "2.0", "id": 1, "result": {"content": text, "encoding": "base64", "eof": False}}
    started = time.perf_counter()
    for _ in range(pieces):
        line = json.dumps(message)
    dumps = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(pieces):
        json.loads(line)
    loads = time.perf_counter() - started
    return {"base64 encode": encode, "base64 decode": decode, "json dumps": dumps, "json loads": loads}


async def read_brokered(root: Path, name: str, chunk: int, whole: bool) -> tuple[float, dict[str, object]]:
    provider = RootsProvider([root])
    broker = FileBroker(provider, rate=None)
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=dict(os.environ))
    client = Client(params, mode="legacy", list_roots_callback=provider)
    broker.install(client)
    async with client, broker:
        await client.call_tool("brokered_stat", {"path": name})  # warm: connection, roots, first request
        started = time.perf_counter()
        result = await client.call_tool(
            "brokered_checksum", {"path": name, "chunk_size": chunk, "whole": whole}
        )
        elapsed = time.perf_counter() - started
    if result.is_error or result.structured_content is None:
        raise SystemExit(f"brokered read failed: {result.content}")
    return elapsed, result.structured_content


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=100)
    parser.add_argument("--chunk-mib", type=float, nargs="+", default=[1.0])
    args = parser.parse_args()
    size = args.size_mib * MIB
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp))
        target = root / "big.bin"
        with open(target, "wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(MIB))
        read_locally(target, MIB)  # page cache warm for every figure below
        print(f"file: {args.size_mib} MiB, one run each\n")
        print("| read | chunk | seconds | MiB/s | % of local |")
        print("|---|---|---|---|---|")
        for chunk_mib in args.chunk_mib:
            chunk = int(chunk_mib * MIB)
            local, local_sha = read_locally(target, chunk)
            print(
                f"| local (open/read + sha256) | {chunk_mib:g} MiB | {local:.3f} | "
                f"{size / MIB / local:.0f} | 100% |"
            )
            for label, whole in [("open_read, 1 in flight", False), ("read(), 2 in flight", True)]:
                brokered, answer = anyio.run(read_brokered, root, target.name, chunk, whole)
                if answer.get("sha256") != local_sha or answer.get("size") != size:
                    raise SystemExit(f"checksum mismatch: {answer} vs {local_sha}")
                print(
                    f"| brokered {label} (files/read over stdio + sha256) | {chunk_mib:g} MiB | "
                    f"{brokered:.3f} | {size / MIB / brokered:.0f} | {local / brokered * 100:.1f}% |"
                )
        small = root / "small.bin"
        small.write_bytes(os.urandom(MIB))
        requests = MIB // 4096
        elapsed, _ = anyio.run(read_brokered, root, small.name, 4096, False)
        print(
            f"\nper-request cost: {requests} files/read of 4 KiB each in {elapsed:.3f} s = "
            f"{elapsed / requests * 1000:.2f} ms per round trip (SDK, JSON-RPC, two processes)"
        )
        chunk = int(args.chunk_mib[0] * MIB)
        costs = codec_cost(size, chunk)
        print(f"\nbase64 and JSON alone ({args.size_mib} MiB in {args.chunk_mib[0]:g} MiB chunks):")
        for name, seconds in costs.items():
            print(f"  {name:14} {seconds:.3f} s")
        print(
            f"  {'sum':14} {sum(costs.values()):.3f} s "
            "(encode + dumps on the client, loads + decode on the server)"
        )


if __name__ == "__main__":
    main()
