"""Read throughput of a file through client-brokered access (files/read over stdio, base64 in JSON) beside
reading it locally, one run, with the CPU time each process spent and where the brokered time goes.

Usage: python benchmarks/bench_broker.py [--size-mib 100] [--chunk-mib 1 ...]
       python benchmarks/bench_broker.py --watch-cost [--watches 60] [--entries 1000] [--seconds 3]
       python benchmarks/bench_broker.py --change-cost [--rounds 2000]
The server is examples/brokered_server.py (a subprocess); its tool streams the file with fs.open_read() and
hashes it (and, in a second row, reads it whole with fs.read(), two requests in flight). The local figure
reads the same file in the same chunk size and hashes it too, so both sides do the same consumer work.
A third row sends the same base64 JSON lines between two bare Python processes (no SDK, no broker): the
ceiling of the design itself. The goal: brokered throughput at least 25% of local.

Wall time on a shared machine mostly measures how busy it is; the CPU seconds of each process (the host,
i.e. this process, and the server subprocess, read from /proc on Linux) do not, and the step costs at the
end say what the brokered path cannot avoid: base64 both ways and the SDK's JSON-RPC (de)serialization,
timed with the very calls the SDK makes on each message.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import mcp_types
import pydantic_core
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server import MCPServer

from mcp_roots import BrokerError, RootSet, RootsProvider
from mcp_roots.broker import FileBroker, enable_brokering
from mcp_roots.broker._protocol import decode_content, encode_content

SERVER = Path(__file__).resolve().parent.parent / "examples" / "brokered_server.py"
MIB = 1024 * 1024


def read_locally(path: Path, chunk: int) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, sha256) of reading ``path`` in ``chunk`` pieces and hashing it."""
    sha = hashlib.sha256()
    started, cpu = time.perf_counter(), time.process_time()
    with open(path, "rb", buffering=0) as f:
        while data := f.read(chunk):
            sha.update(data)
    return time.perf_counter() - started, time.process_time() - cpu, sha.hexdigest()


def step_costs(path: Path, size: int, chunk: int) -> tuple[dict[str, float], dict[str, float]]:
    """CPU seconds of each unavoidable step of a brokered read of ``size`` bytes in ``chunk`` pieces, on the
    host and on the server, each timed alone with the call the real path makes (one pass each)."""
    pieces = max(1, size // chunk)
    fd = os.open(path, os.O_RDONLY)
    try:
        started = time.process_time()
        for i in range(pieces):
            data = os.pread(fd, chunk, i * chunk)
        pread = time.process_time() - started
    finally:
        os.close(fd)
    started = time.process_time()
    for _ in range(pieces):
        text = encode_content(data)
    encode = time.process_time() - started
    result = {"content": text, "encoding": "base64", "offset": 0, "bytesRead": len(data), "size": size}
    response = mcp_types.JSONRPCResponse(jsonrpc="2.0", id=1, result={**result, "eof": False, "etag": "x"})
    started = time.process_time()
    for _ in range(pieces):  # what the SDK's stdio_client writes for each answer
        line = response.model_dump_json(by_alias=True, exclude_unset=True)
    dump = time.process_time() - started
    started = time.process_time()
    for _ in range(pieces):  # what the SDK's stdio_server does with each line it reads
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    parse = time.process_time() - started
    started = time.process_time()
    for _ in range(pieces):
        decoded = decode_content(text, max_bytes=chunk)
    decode = time.process_time() - started
    started = time.process_time()
    for _ in range(pieces):
        hashlib.sha256(decoded)
    digest = time.process_time() - started
    host = {"pread": pread, "base64 encode": encode, "SDK response to JSON": dump}
    server = {"SDK JSON line to message": parse, "strict base64 decode": decode, "sha256": digest}
    return host, server


def bare_host(path: str) -> None:
    """``--bare-host PATH``: answer ``{"id", "offset", "length"}`` lines on stdin with the same base64 JSON
    lines files/read sends, with pydantic-core (the SDK's JSON engine) and no SDK, no broker."""
    fd = os.open(path, os.O_RDONLY)
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        request = pydantic_core.from_json(line)
        data = os.pread(fd, request["length"], request["offset"])
        result = {"content": encode_content(data), "encoding": "base64", "bytesRead": len(data)}
        out.write(pydantic_core.to_json({"jsonrpc": "2.0", "id": request["id"], "result": result}) + b"\n")
        out.flush()


def read_bare(path: Path, size: int, chunk: int) -> tuple[float, str]:
    """(wall seconds, sha256) of reading ``path`` through a bare pipe to a ``--bare-host`` subprocess, one
    request in flight, decoding strictly and hashing like the brokered tool: the ceiling of this design in
    Python, without the SDK, the broker or an event loop."""
    command = [sys.executable, __file__, "--bare-host", str(path)]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as host:
        stdin, stdout = host.stdin, host.stdout
        assert stdin is not None
        assert stdout is not None

        def ask(offset: int, length: int) -> bytes:
            stdin.write(pydantic_core.to_json({"id": 1, "offset": offset, "length": length}) + b"\n")
            stdin.flush()
            answer = pydantic_core.from_json(stdout.readline())
            return decode_content(answer["result"]["content"], max_bytes=chunk)

        ask(0, 0)  # warm: the host process has started and imported what it needs
        sha = hashlib.sha256()
        started = time.perf_counter()
        for offset in range(0, size, chunk):
            sha.update(ask(offset, chunk))
        elapsed = time.perf_counter() - started
        stdin.close()
    return elapsed, sha.hexdigest()


def _server_cpu() -> float | None:
    """CPU seconds used so far by this process's one child (the server), or None where /proc cannot say."""
    try:
        children = [
            int(pid)
            for task in Path(f"/proc/{os.getpid()}/task").iterdir()
            for pid in (task / "children").read_text().split()
        ]
        if len(children) != 1:
            return None
        fields = Path(f"/proc/{children[0]}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


async def read_brokered(
    root: Path, name: str, chunk: int, whole: bool
) -> tuple[float, float, float | None, dict[str, object]]:
    """(wall seconds, host CPU seconds, server CPU seconds or None, tool result) of one brokered read."""
    provider = RootsProvider([root])
    broker = FileBroker(provider, rate=None)
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=dict(os.environ))
    client = Client(params, mode="legacy", list_roots_callback=provider)
    broker.install(client)
    async with client, broker:
        await client.call_tool("brokered_stat", {"path": name})  # warm: connection, roots, first request
        server_before, cpu = _server_cpu(), time.process_time()
        started = time.perf_counter()
        result = await client.call_tool(
            "brokered_checksum", {"path": name, "chunk_size": chunk, "whole": whole}
        )
        elapsed = time.perf_counter() - started
        host_cpu, server_after = time.process_time() - cpu, _server_cpu()
    if result.is_error or result.structured_content is None:
        raise SystemExit(f"brokered read failed: {result.content}")
    server_cpu = None if server_before is None or server_after is None else server_after - server_before
    return elapsed, host_cpu, server_cpu, result.structured_content


async def watch_cost(root: Path, backend: str, watches: int, seconds: float) -> tuple[int, float, int]:
    """(watches accepted, CPU seconds of this process while they idle, descriptors open meanwhile) for
    ``watches`` recursive watch requests on ``root/tree`` (broker and server in this process)."""
    server = MCPServer("bench-watch")
    enable_brokering(server)
    broker = FileBroker(RootSet.from_paths([root]), rate=None, watch_backend=backend)  # type: ignore[arg-type]
    client = Client(server, mode="legacy", list_roots_callback=RootsProvider([root]))
    broker.install(client)
    accepted = 0
    async with client, broker:
        for _ in range(watches):
            try:
                await broker.handle("files/watch", {"path": "tree", "recursive": True})
                accepted += 1
            except BrokerError:
                pass
        await anyio.sleep(1.0)  # let every watch settle into its idle loop
        started = time.process_time()
        await anyio.sleep(seconds)
        cpu = time.process_time() - started
        descriptors = len(os.listdir("/proc/self/fd"))
    return accepted, cpu, descriptors


def main_watch_cost(watches: int, entries: int, seconds: float) -> None:
    logging.getLogger("mcp_roots.audit").setLevel(logging.WARNING)  # one line per refused watch otherwise
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp))
        tree = root / "tree"
        tree.mkdir()
        for i in range(entries):
            (tree / f"f{i:05}").write_text("x")
        idle = len(os.listdir("/proc/self/fd"))
        print(f"{watches} recursive watches asked for on a folder of {entries} files; {seconds:g} s idle")
        print(f"(descriptors open before: {idle})\n")
        print("| backend | watches accepted | CPU % of one core while idle | descriptors open |")
        print("|---|---:|---:|---:|")
        for backend in ("poll", "events"):
            accepted, cpu, descriptors = anyio.run(watch_cost, root, backend, watches, seconds)
            print(f"| {backend} | {accepted} | {cpu / seconds * 100:.1f}% | {descriptors} |")


async def change_cost(root: Path, rounds: int, setup: str) -> tuple[float, float]:
    """(wall, CPU) seconds of ``rounds`` x (write 1 KiB, create, delete) through FileBroker.handle (in this
    process, no SDK), or through RootSet's own operations by name for ``setup`` "rootset"."""
    folder = root / setup
    folder.mkdir()
    content = encode_content(b"x" * 1024)
    rootset = RootSet.from_paths([root])
    if setup == "callback":
        broker = FileBroker(rootset, rate=None, consent=lambda request: True, prompts=None)
        await broker.handle("files/consent", {"message": "m", "paths": [{"path": ""}], "access": "write"})
    else:
        broker = FileBroker(rootset, rate=None)
    if setup == "revocation":
        (root / "revoked").mkdir(exist_ok=True)
        broker.revoke([root / "revoked"])
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(rounds):
        if setup == "rootset":
            rootset.write_bytes(folder / f"w{i}", b"x" * 1024)
            os.close(rootset.open_fd(folder / f"c{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            rootset.remove(folder / f"w{i}")
            continue
        await broker.handle("files/write", {"path": f"{setup}/w{i}", "content": content})
        await broker.handle("files/create", {"path": f"{setup}/c{i}", "type": "file"})
        await broker.handle("files/delete", {"path": f"{setup}/w{i}"})
    return time.perf_counter() - started, time.process_time() - cpu


def main_change_cost(rounds: int) -> None:
    logging.getLogger("mcp_roots.audit").setLevel(logging.WARNING)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{rounds} rounds of write 1 KiB + create + delete; load average {load} on {os.cpu_count()} CPUs\n")
    print("| through | µs per change (wall) | µs per change (CPU) |")
    print("|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp))
        for setup, label in [
            ("rootset", "RootSet by name (no broker, no checks)"),
            ("plain", "FileBroker, roots as consent"),
            ("callback", "FileBroker, a consent callback (grant checked on the descriptor)"),
            ("revocation", "FileBroker, one revocation in force (identity checks, delete renamed aside)"),
        ]:
            wall, cpu = anyio.run(change_cost, root, rounds, setup)
            print(f"| {label} | {wall / rounds / 3 * 1e6:.0f} | {cpu / rounds / 3 * 1e6:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=100)
    parser.add_argument("--chunk-mib", type=float, nargs="+", default=[1.0])
    parser.add_argument("--bare-host", help=argparse.SUPPRESS)
    parser.add_argument("--watch-cost", action="store_true", help="measure idle watches instead of reads")
    parser.add_argument("--watches", type=int, default=60)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--change-cost", action="store_true", help="measure writes, creates and deletes")
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    if args.change_cost:
        main_change_cost(args.rounds)
        return
    if args.watch_cost:
        main_watch_cost(args.watches, args.entries, args.seconds)
        return
    if args.bare_host:
        bare_host(args.bare_host)
        return
    size = args.size_mib * MIB
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp))
        target = root / "big.bin"
        with open(target, "wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(MIB))
        read_locally(target, MIB)  # page cache warm for every figure below
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"file: {args.size_mib} MiB, one run each; load average {load} on {os.cpu_count()} CPUs\n")
        print("| read | chunk | seconds | MiB/s | % of local | CPU s host / server |")
        print("|---|---|---|---|---|---|")
        for chunk_mib in args.chunk_mib:
            chunk = int(chunk_mib * MIB)
            local, local_cpu, local_sha = read_locally(target, chunk)
            print(
                f"| local (open/read + sha256) | {chunk_mib:g} MiB | {local:.3f} | "
                f"{size / MIB / local:.0f} | 100% | {local_cpu:.2f} / - |"
            )
            for label, whole in [("open_read, 1 in flight", False), ("read(), 2 in flight", True)]:
                brokered, host_cpu, server_cpu, answer = anyio.run(
                    read_brokered, root, target.name, chunk, whole
                )
                if answer.get("sha256") != local_sha or answer.get("size") != size:
                    raise SystemExit(f"checksum mismatch: {answer} vs {local_sha}")
                server = "?" if server_cpu is None else f"{server_cpu:.2f}"
                print(
                    f"| brokered {label} (files/read over stdio + sha256) | {chunk_mib:g} MiB | "
                    f"{brokered:.3f} | {size / MIB / brokered:.0f} | {local / brokered * 100:.1f}% | "
                    f"{host_cpu:.2f} / {server} |"
                )
            bare, bare_sha = read_bare(target, size, chunk)
            if bare_sha != local_sha:
                raise SystemExit(f"checksum mismatch through the bare pipe: {bare_sha} vs {local_sha}")
            print(
                f"| bare pipe, no SDK (same base64 JSON lines, 1 in flight + sha256) | {chunk_mib:g} MiB | "
                f"{bare:.3f} | {size / MIB / bare:.0f} | {local / bare * 100:.1f}% | - |"
            )
        small = root / "small.bin"
        small.write_bytes(os.urandom(MIB))
        requests = MIB // 4096
        elapsed, *_ = anyio.run(read_brokered, root, small.name, 4096, False)
        print(
            f"\nper-request cost: {requests} files/read of 4 KiB each in {elapsed:.3f} s = "
            f"{elapsed / requests * 1000:.2f} ms per round trip (SDK, JSON-RPC, two processes)"
        )
        chunk = int(args.chunk_mib[0] * MIB)
        host, server = step_costs(target, size, chunk)
        _, local_cpu, _ = read_locally(target, chunk)
        print(
            f"\nCPU seconds of the unavoidable steps ({args.size_mib} MiB in {args.chunk_mib[0]:g} MiB "
            "chunks):"
        )
        for side, costs in (("host", host), ("server", server)):
            steps = ", ".join(f"{name} {seconds:.3f}" for name, seconds in costs.items())
            print(f"  {side:6} {steps}; sum {sum(costs.values()):.3f}")
        floor = max(sum(host.values()), sum(server.values()))
        print(
            f"  floor {floor:.3f} s: the slower side's steps alone, as if both processes ran in parallel on "
            f"free cores and the SDK,\n  pipes and event loops cost nothing; local read + sha256 took "
            f"{local_cpu:.3f} s CPU, so at best {local_cpu / floor * 100:.0f}% of local"
        )


if __name__ == "__main__":
    main()
