"""Fixtures: a real `casement run` on the bundled sample (session-wide), one with API keys,
and a tiny scripted HTTP server for what a healthy server never does (503, 429, drops).

`$CASEMENT_BIN` names the binary; by default the workspace's `target/debug/casement`
(then `target/release/casement`), found from this file's place in the repository.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from casement_client import Client

REPO_ROOT = Path(__file__).resolve().parents[3]
SAMPLE = REPO_ROOT / "sample" / "18f-handbook"
#: Seconds to wait for a server to index the sample and answer (a debug build, 2 cores).
START_TIMEOUT = float(os.environ.get("CASEMENT_TEST_START_TIMEOUT", "300"))
API_KEY = "clients-python-test-key-0123456789"
#: The event metadata keys the test servers let searches filter on (store.indexed_metadata).
INDEXED_METADATA = ("team", "tier")


def casement_bin() -> Path:
    named = os.environ.get("CASEMENT_BIN")
    if named:
        return Path(named)
    for profile in ("debug", "release"):
        candidate = REPO_ROOT / "target" / profile / "casement"
        if candidate.exists():
            return candidate
    return REPO_ROOT / "target" / "debug" / "casement"


@dataclass(frozen=True)
class GoldenCase:
    id: str
    query: str
    doc_id: str
    text: str


def golden_cases() -> list[GoldenCase]:
    cases = []
    for line in (SAMPLE / "golden.jsonl").read_text().splitlines():
        if line.strip():
            case = json.loads(line)
            cases.append(GoldenCase(case["id"], case["query"], case["doc_id"], case["text"]))
    return cases


def final_revisions() -> dict[str, int]:
    """The revision each live document of the sample ends at."""
    last: dict[str, tuple[int, str]] = {}
    for line in (SAMPLE / "revisions.jsonl").read_text().splitlines():
        event = json.loads(line)
        last[event["doc_id"]] = (event["revision"], event["change"])
    return {doc: rev for doc, (rev, change) in last.items() if change != "delete"}


def normalized(text: str) -> str:
    return " ".join(text.split()).casefold()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningCasement:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_casement(
    data_dir: Path, args: list[str], indexed_metadata: tuple[str, ...] = INDEXED_METADATA
) -> RunningCasement:
    binary = casement_bin()
    if not binary.exists():
        pytest.fail(
            f"no casement binary at {binary}: build it (cargo build -p casement) or set CASEMENT_BIN",
            pytrace=False,
        )
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CASEMENT__") and key not in ("CASEMENT_CONFIG", "CASEMENT_API_KEY")
    }
    env["CASEMENT__LISTEN"] = f"127.0.0.1:{port}"
    env["CASEMENT__DATA_DIR"] = str(data_dir)
    # The metadata keys searches may filter on (a TOML value, as every CASEMENT__ variable).
    env["CASEMENT__STORE__INDEXED_METADATA"] = json.dumps(list(indexed_metadata))
    log = data_dir.parent / f"{data_dir.name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(binary), *args], cwd=data_dir.parent, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    return RunningCasement(f"http://127.0.0.1:{port}", process, log)


def wait_until(server: RunningCasement, what: str, condition: Any, deadline: float) -> None:
    """Polls `condition()` until it is true; fails with the server's log past `deadline`."""
    while True:
        if server.process.poll() is not None:
            server.stop()
            pytest.fail(
                f"casement exited ({server.process.returncode}) before {what}:\n{server.log_tail()}",
                pytrace=False,
            )
        try:
            if condition():
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            pytest.fail(f"casement: no {what} in {START_TIMEOUT} s:\n{server.log_tail()}", pytrace=False)
        time.sleep(0.2)


@pytest.fixture(scope="session")
def casement_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`casement run` on the bundled sample, ready once every live page of the sample is
    indexed at its last revision; searches may filter on the metadata keys `team`, `tier`."""
    data_dir = tmp_path_factory.mktemp("casement") / "data"
    data_dir.mkdir()
    server = start_casement(data_dir, ["run"])
    deadline = time.monotonic() + START_TIMEOUT
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            wait_until(server, "/readyz", lambda: http.get("/readyz").status_code == 200, deadline)
            for doc_id, revision in final_revisions().items():

                def indexed(doc_id: str = doc_id, revision: int = revision) -> bool:
                    answer = http.get(f"/v1/documents/{doc_id}")
                    return answer.status_code == 200 and answer.json()["revision"] >= revision

                wait_until(server, f"{doc_id} at revision {revision}", indexed, deadline)
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def keyed_casement_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`casement run` with one API key and no documents (watching an empty folder; the
    tests post their own through the webhook), and no metadata key to filter on."""
    root = tmp_path_factory.mktemp("casement-keys")
    data_dir = root / "data"
    data_dir.mkdir()
    (root / "empty").mkdir()
    config = root / "casement.toml"
    config.write_text(f'[[auth.keys]]\ntoken = "{API_KEY}"\n')
    server = start_casement(
        data_dir, ["--config", str(config), "run", "--watch", str(root / "empty")], indexed_metadata=()
    )
    deadline = time.monotonic() + START_TIMEOUT
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            wait_until(server, "/readyz", lambda: http.get("/readyz").status_code == 200, deadline)
        yield server.url
    finally:
        server.stop()


@dataclass(frozen=True)
class MetadataDocs:
    """Two documents posted through the webhook that share their words, not their metadata."""

    query: str
    #: doc_id -> the metadata its event carried.
    metadata: dict[str, dict[str, Any]]

    @property
    def ids(self) -> list[str]:
        return list(self.metadata)

    @property
    def min_revision(self) -> dict[str, int]:
        return {doc_id: 1 for doc_id in self.metadata}


@pytest.fixture(scope="session")
def metadata_docs(casement_url: str) -> MetadataDocs:
    """A greenhouse page of one team (tier 1) and a greenhouse-keys page of another (tiers
    [2, 3]), posted with the client's `send_event`, each team unique to this run; the
    metadata also holds keys named as Casement's own window fields (`doc_id`, `url`,
    `source`), which must not shadow them."""
    run = uuid.uuid4().hex[:8]
    pages = {
        f"clients-python/greenhouse-{run}": (
            "Greenhouse",
            "The pelican gardener waters the rooftop greenhouse every Tuesday morning. "
            "Seedlings wait in the cold frame until May.",
            {"team": f"gardens-{run}", "tier": 1, "doc_id": "not-the-doc-id",
             "source": "cms", "labels": ["plants", "roof"]},
        ),
        f"clients-python/greenhouse-keys-{run}": (
            "Greenhouse keys",
            "The pelican gardener keeps the rooftop greenhouse keys at the security desk. "
            "Sign them out every Tuesday morning.",
            {"team": f"security-{run}", "tier": [2, 3], "url": "https://cms.example/not-the-url"},
        ),
    }  # fmt: skip
    with Client(casement_url) as client:
        for doc_id, (title, text, metadata) in pages.items():
            sent = client.send_event(
                {"type": "upsert", "doc_id": doc_id, "revision": 1, "title": title,
                 "format": "markdown", "content": f"# {title}\n\n{text}", "metadata": metadata}
            )  # fmt: skip
            # (`accepted` is fine too: searches ask for min_revision.)
            assert sent.status in ("applied", "accepted"), sent
    return MetadataDocs(
        query="When does the pelican gardener water the rooftop greenhouse?",
        metadata={doc_id: metadata for doc_id, (_, _, metadata) in pages.items()},
    )


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- a scripted HTTP server ------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Close the connection without answering (a dropped connection).
    drop: bool = False


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float


class ScriptedServer:
    """Answers requests with `replies` in turn (the last one again once they run out) and
    records every request."""

    def __init__(self) -> None:
        self.replies: list[Reply] = [Reply()]
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                with owner._lock:
                    index = len(owner.requests)
                    owner.requests.append(
                        Recorded(
                            self.command,
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            json.loads(raw) if raw else None,
                            time.monotonic(),
                        )
                    )
                    reply = owner.replies[min(index, len(owner.replies) - 1)]
                if reply.drop:
                    self.close_connection = True
                    return
                payload = json.dumps(reply.body if reply.body is not None else {}).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    try:
        yield server
    finally:
        server.close()


def window_json(doc_id: str = "kb/vpn", text: str = "Reset the token in the portal.", **extra: Any) -> dict[str, Any]:
    """A window as the server sends it (services/query/src/api.rs, WindowAnswer)."""
    return {
        "doc_id": doc_id,
        "title": "VPN",
        "url": "https://wiki.example/kb/vpn",
        "tenant": None,
        "section_path": ["Tokens"],
        "revision": 7,
        "text": text,
        "char_start": 10,
        "char_end": 10 + len(text),
        "matches": [{"sentence": text, "char_start": 10, "char_end": 10 + len(text), "score": 0.5}],
        "scores": {"fused": 0.5, "rerank": None},
        "tokens": 8,
        **extra,
    }



GOLDEN_BY_ID = {case.id: case for case in golden_cases()}
