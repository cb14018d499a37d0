"""Launchers as people write them (``npx -y PKG``, ``uvx PKG``, ``pipx run PKG``): the package fetched by a
step of its own, confined (network on, only its folder in wrap's cache writable), then the server started
from that folder without the launcher; a later start finds it there.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, SandboxUnavailable
from ..sandbox import Backend, choose, popen
from ._plan import make_plan

__all__ = ["FETCH_TIMEOUT", "NETWORK_ENV", "Launch", "launch_of"]

#: Seconds the fetch step may take in all.
FETCH_TIMEOUT = 300.0
#: The hosts each launcher's fetch step reaches under the srt backend when no --allow-domain names them.
REGISTRIES: dict[str, tuple[str, ...]] = {
    "npx": ("registry.npmjs.org",),
    "uvx": ("pypi.org", "files.pythonhosted.org"),
    "pipx run": ("pypi.org", "files.pythonhosted.org"),
}
#: What the fetch step keeps of wrap's environment: how this machine reaches a registry (proxies, the
#: certificates a proxy signs with, the registry or index to use), never a token.
NETWORK_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "npm_config_registry",
    "npm_config_cafile",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_NATIVE_TLS",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_CERT",
)
_DONE = ".mcp-roots-fetched"
_NPX_FLAGS = frozenset({"-y", "--yes", "-q", "--quiet", "--prefer-offline", "--prefer-online"})


@dataclass(frozen=True)
class Launch:
    """A launcher line taken apart: the ``launcher`` (``npx``, ``uvx``, ``pipx run``), the package ``spec``
    as written, the command it runs (``command``: None for the package's own), the server's ``args``, and
    the ``folder`` in wrap's cache that the package is fetched into."""

    launcher: str
    spec: str
    command: str | None
    args: tuple[str, ...]
    folder: Path

    @property
    def fetched(self) -> bool:
        return (self.folder / _DONE).is_file()

    def fetch_argv(self) -> list[str]:
        """The launcher's own install of the package into ``folder`` (no retries: a registry that cannot be
        reached is an error at once, not a minute of silence)."""
        if self.launcher == "npx":
            npm = shutil.which("npm")
            if npm is None:
                raise ConfigError("wrap: npx needs npm to fetch the package, and npm is not on PATH")
            return [
                npm,
                "install",
                "--prefix",
                str(self.folder),
                "--no-audit",
                "--no-fund",
                "--no-save",
                "--fetch-retries=0",
                "--fetch-timeout=20000",
                "--loglevel=error",
                self.spec,
            ]
        uv = shutil.which("uv") or shutil.which("uv", path=os.path.dirname(sys.executable))
        if uv is None:
            raise ConfigError(f"wrap: {self.launcher} needs uv to fetch the package, and uv is not on PATH")
        python = os.path.realpath(sys.executable)
        venv = self.folder / "venv"
        return [
            "/bin/sh",
            "-c",
            '"$0" venv --quiet --python "$1" "$2" && "$0" pip install --quiet --python "$2/bin/python" "$3"',
            uv,
            python,
            str(venv),
            self.spec,
        ]

    def describe(self) -> str:
        when = "done" if self.fetched else "on the first start"
        then = " ".join(self.server_argv()) if self.fetched else "(the package's command, once fetched)"
        return (
            f"fetch step ({when}): {' '.join(self.fetch_argv())}\n"
            f"  network on; writable: {self.folder} alone (and the step's own cache); readable: the launcher "
            "and the system paths, none of the user's files\n"
            f"then the server, from the cache, without the launcher: {then}"
        )

    def server_argv(self) -> list[str]:
        """The server's command from the fetched folder (ConfigError when the package names none)."""
        if self.launcher == "npx":
            name = _npm_name(self.spec)
            package = self.folder / "node_modules" / name
            try:
                meta = json.loads((package / "package.json").read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ConfigError(
                    f"wrap: npx fetched {self.spec} but its package.json is unreadable: {exc}"
                ) from None
            bins = meta.get("bin")
            if isinstance(bins, str):
                bins = {name.rsplit("/", 1)[-1]: bins}
            if not isinstance(bins, dict) or not bins:
                raise ConfigError(f"wrap: npx: {self.spec} names no command (no 'bin' in its package.json)")
            wanted = self.command or (next(iter(bins)) if len(bins) == 1 else name.rsplit("/", 1)[-1])
            if wanted not in bins:
                raise ConfigError(
                    f"wrap: npx: {self.spec} has no command {wanted!r} (it has {', '.join(bins)})"
                )
            node = shutil.which("node") or "node"
            return [node, str(package / str(bins[wanted])), *self.args]
        command = self.command or _python_name(self.spec)
        path = self.folder / "venv" / "bin" / command
        if not path.is_file():
            raise ConfigError(f"wrap: {self.launcher}: {self.spec} installed no command {command!r}")
        return [str(path), *self.args]


def _npm_name(spec: str) -> str:
    """``@scope/name@1.2`` -> ``@scope/name``; ``name@latest`` -> ``name``."""
    at = spec.find("@", 1)
    return spec if at < 0 else spec[:at]


def _python_name(spec: str) -> str:
    """``mcp-server-git==2026.1.14`` or ``mcp-server-git@2026.1.14`` -> ``mcp-server-git``."""
    return re.split(r"[@=<>!~\[; ]", spec, maxsplit=1)[0]


def _uv_spec(spec: str) -> str:
    name, at, version = spec.partition("@")
    return f"{name}=={version}" if at and version and version != "latest" else name


def launch_of(argv: Sequence[str], base: str | os.PathLike[str]) -> Launch | None:
    """The launcher line ``argv`` taken apart, or None when it is not one wrap knows (run as written)."""
    if not argv:
        return None
    tool = os.path.basename(argv[0])
    rest = list(argv[1:])
    if tool == "npx":
        launcher, spec, command = "npx", None, None
        while rest and rest[0].startswith("-") and spec is None:
            flag = rest.pop(0)
            if flag in ("-p", "--package") and rest:
                spec = rest.pop(0)
            elif flag.startswith("--package="):
                spec = flag.partition("=")[2]
            elif flag == "--":
                break
            elif flag not in _NPX_FLAGS:
                return None
        if not rest:
            return None
        if spec is None:
            spec = rest.pop(0)
        else:
            command = rest.pop(0)
    elif tool == "uvx" or (tool == "pipx" and rest[:1] == ["run"]):
        launcher = "uvx" if tool == "uvx" else "pipx run"
        if tool == "pipx":
            rest.pop(0)
        spec, command = None, None
        if rest[:1] in (["--from"], ["--spec"]) and len(rest) > 2:
            spec, command = rest[1], rest[2]
            rest = rest[3:]
        elif rest and not rest[0].startswith("-"):
            spec = rest.pop(0)
        else:
            return None
        spec = _uv_spec(spec)
    else:
        return None
    digest = hashlib.sha256(f"{launcher}\0{spec}".encode()).hexdigest()[:16]
    folder = Path(base) / "fetched" / f"{launcher.replace(' ', '-')}-{digest}"
    return Launch(launcher, spec, command, tuple(rest), folder)


def fetch(
    launch: Launch,
    environ: Mapping[str, str],
    timeout: float = FETCH_TIMEOUT,
    *,
    sandbox: Backend = "auto",
    allow_domains: Sequence[str] = (),
) -> None:
    """Fetch the package into its folder, confined: network on, the folder (and the step's own cache)
    writable, the launcher and the system readable, nothing of the user's. ConfigError naming the launcher
    and what it said when it fails or takes longer than ``timeout``. Two wraps starting the same package
    at once fetch it once (a lock beside the folder)."""
    launch.folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(launch.folder.parent / f"{launch.folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not launch.fetched:
            _fetch(launch, environ, timeout, sandbox, allow_domains)


def _fetch(
    launch: Launch, environ: Mapping[str, str], timeout: float, sandbox: Backend, allow_domains: Sequence[str]
) -> None:
    argv = launch.fetch_argv()
    backend = choose(sandbox)
    # Under srt the network is by host name: the operator's --allow-domain, else the launcher's registry.
    domains = (list(allow_domains) or list(REGISTRIES[launch.launcher])) if backend == "srt" else []
    plan = make_plan(argv, cache_base=str(launch.folder.parent / ".steps"), environ=environ)
    launch.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for sub in ("home", "tmp", "npm", "uv"):
        os.makedirs(os.path.join(plan.cache, sub), mode=0o700, exist_ok=True)
    env = dict(plan.env)
    env.update(UV_CACHE_DIR=os.path.join(plan.cache, "uv"), UV_HTTP_RETRIES="0", UV_HTTP_TIMEOUT="20")
    env.update({name: environ[name] for name in NETWORK_ENV if name in environ})
    reads = list(plan.read)
    reads += [p for p in (environ.get("SSL_CERT_FILE"), environ.get("NODE_EXTRA_CA_CERTS")) if p]
    if launch.launcher != "npx":  # uv asks the interpreter it builds the venv on about itself
        reads.append(os.path.realpath(sys.base_prefix))
    reads = [p for p in dict.fromkeys(reads) if os.path.exists(p)]
    try:
        # Package managers set modes and times on the files they unpack, by path: the child's own root (only
        # the grant exists for it) lets them, on what it may write, with no blanket opt-in.
        process = popen(
            [str(launch.folder), plan.cache],
            argv,
            write=True,
            network=True,
            protect=False,
            sandbox=backend,
            allow_domains=domains,
            extra_read=reads,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=os.path.join(plan.cache, "home"),
            env=env,
            start_new_session=True,
        )
    except (OSError, SandboxUnavailable) as exc:
        raise ConfigError(f"wrap: {launch.launcher} could not start its fetch step: {exc}") from None
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        from ._plan import end_tree_now

        end_tree_now(process)
        raise ConfigError(
            f"wrap: {launch.launcher} did not fetch {launch.spec} within {timeout:g}s "
            "(is the registry reachable?)"
        ) from None
    if process.returncode != 0:
        lines = [line for line in output.decode("utf-8", "replace").splitlines() if line.strip()]
        said = "\n".join([line for line in lines if "complete log" not in line][:6]) or "(nothing)"
        raise ConfigError(
            f"wrap: {launch.launcher} could not fetch {launch.spec} (status {process.returncode}); "
            f"it said:\n{said}"
        )
    launch.server_argv()  # the package names a command: else say so now
    (launch.folder / _DONE).write_text(launch.spec + "\n", encoding="utf-8")
