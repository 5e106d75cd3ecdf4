"""A stand-in for the Hugging Face Hub on loopback, for tests (standard library only).

It serves what huggingface_hub 1.x's `snapshot_download` and `hf_hub_download` ask of the hub, so that code that
downloads from the hub can be tested end to end, offline, with the real client and the real cache layout::

    sha = commit_sha("v1")
    repo = StubRepo(revisions={sha: {"tokenizer.json": b"{}"}}, refs={"main": sha})
    with HubStub({"org/model": repo}) as hub:
        path = snapshot_download("org/model", endpoint=hub.endpoint, cache_dir=tmp_path)
        assert ("GET", "/api/models/org/model/revision/main") in hub.requests

Point huggingface_hub at it either with `endpoint=hub.endpoint` on each call, or with HF_ENDPOINT, which
huggingface_hub reads once, at import (into `huggingface_hub.constants.ENDPOINT`): set it before the first import,
or in the environment of a subprocess. Also keep the client from finding a real token: token=None makes it fall
back to HF_TOKEN and to the token file under HF_HOME.

Endpoints served (model repos only; `repo_id` is matched against the keys of `repos`, so "org/name" and "name"
both work; a revision is a ref name from `refs` or a full commit sha from `revisions`, percent-encoded as the client
sends it, e.g. "refs%2Fpr%2F1"):

- `GET /api/models/{repo_id}` and `GET /api/models/{repo_id}/revision/{revision}`: model info JSON, with "id",
  "sha" (the resolved commit) and "siblings" [{"rfilename": ...}] (what `HfApi.model_info`/`repo_info` read;
  `snapshot_download` calls it to resolve a ref name, and skips it when given a commit sha).
- `GET /api/models/{repo_id}/tree/{revision}[/{path}]` (`?recursive=...` honoured): a JSON list of
  {"type": "file", "path", "size", "oid"} and {"type": "directory", "path", "size": 0, "oid"}, one page, no
  "Link" header (what `HfApi.list_repo_tree` reads; `snapshot_download` lists the tree of the commit, filters it
  client-side by allow_patterns/ignore_patterns, and caches it under `trees/`).
- `HEAD` and `GET /{repo_id}/resolve/{revision}/{filename}`: the file, with `X-Repo-Commit` (the commit sha),
  `ETag` (quoted git blob sha1 of the content, as the hub gives for non-LFS files; it names the cache blob),
  `Content-Length`, `Accept-Ranges: bytes`; a GET with `Range: bytes=a-b` gets 206 and `Content-Range`.
  No redirects, no X-Linked-Etag/X-Linked-Size (those are for LFS files), no Xet headers (so the client uses
  plain HTTP).

Errors look like the hub's, with `X-Error-Code`, `X-Error-Message` and a JSON body {"error": message}, so that
`huggingface_hub.utils.hf_raise_for_status` raises its own exceptions (all in `huggingface_hub.errors`):

- unknown repo: 401 (404 when the request carries an Authorization header, as the hub does for a signed-in user),
  `X-Error-Code: RepoNotFound` -> RepositoryNotFoundError;
- gated repo (`StubRepo.gated_token` set; checked on every request, before anything else) without a token: 401,
  with a wrong token: 403, both `X-Error-Code: GatedRepo` -> GatedRepoError (a subclass of RepositoryNotFoundError);
- unknown revision: 404 `X-Error-Code: RevisionNotFound` -> RevisionNotFoundError;
- missing file (resolve) or path (tree): 404 `X-Error-Code: EntryNotFound` (with `X-Repo-Commit`, so the client
  caches the absence under `.no_exist/`) -> RemoteEntryNotFoundError (a subclass of EntryNotFoundError);
- any other path: 404 without an error code; any other method: 405.

Every request served is recorded in `HubStub.requests` as (method, path): the path as sent, percent-encoding
kept, query string dropped, e.g. ("HEAD", "/org/model/resolve/<sha>/tokenizer.json").
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["HubStub", "StubRepo", "commit_sha", "git_blob_sha"]

_SHA = re.compile(r"[0-9a-f]{40}")
_LAST_MODIFIED = "2024-01-01T00:00:00.000Z"


def commit_sha(label: str) -> str:
    """A stable, made-up 40-hex commit sha for a label, e.g. `commit_sha("v1")`, for `StubRepo` keys."""
    return hashlib.sha1(label.encode()).hexdigest()


def git_blob_sha(data: bytes) -> str:
    """The git blob sha1 of data: the hub's ETag and tree "oid" for a non-LFS file (the client's cache blob name)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class StubRepo:
    """One model repo: its commits, its refs, and optionally the token a gated repo asks for.

    revisions: commit sha (40 lowercase hex chars) -> {filename (with "/" for folders): content}
    refs: branch or tag name -> commit sha, e.g. {"main": sha}; revision=None means "main", as in huggingface_hub
    gated_token: if set, every request for this repo needs "Authorization: Bearer <gated_token>"
    """

    revisions: dict[str, dict[str, bytes]]
    refs: dict[str, str]
    gated_token: str | None = None

    def __post_init__(self) -> None:
        for sha in self.revisions:
            if not _SHA.fullmatch(sha):
                raise ValueError(f"revision key {sha!r} is not a 40-char lowercase hex commit sha")
        for ref, sha in self.refs.items():
            if sha not in self.revisions:
                raise ValueError(f"ref {ref!r} points at {sha!r}, which is not in revisions")

    def resolve(self, revision: str) -> str | None:
        """The commit sha a ref name or commit sha stands for, or None."""
        if revision in self.refs:
            return self.refs[revision]
        return revision if revision in self.revisions else None


class _Reply(Exception):
    """An error answer: status, X-Error-Code (or None), message, extra headers."""

    def __init__(self, status: int, code: str | None, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx's pool expects; every answer carries Content-Length
    timeout = 30  # an idle kept-alive connection frees its thread after this long
    server: "_Server"

    def log_message(self, format: str, *args) -> None:  # quiet: tests assert on stderr
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def _not_allowed(self) -> None:
        self._serve(allowed=False)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    # -- dispatch --------------------------------------------------------------------------------------------------

    def _serve(self, allowed: bool = True) -> None:
        split = urlsplit(self.path)
        stub = self.server.stub
        with stub._lock:
            stub.requests.append((self.command, split.path))
            stub._count += 1
            request_id = f"hubstub-{stub._count}"
        # A request body (never expected) is read off so that the connection stays usable.
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        try:
            if not allowed:
                raise _Reply(405, None, f"Method {self.command} not allowed by the hub stub")
            status, headers, body = self._route(split.path, parse_qs(split.query))
        except _Reply as e:
            status = e.status
            headers = {**e.headers, "Content-Type": "application/json"}
            if e.code:
                headers["X-Error-Code"] = e.code
            headers["X-Error-Message"] = e.message
            body = json.dumps({"error": e.message}).encode()
        headers["X-Request-Id"] = request_id
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _route(self, path: str, query: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
        if path.startswith("/api/models/"):
            repo_id, repo, rest = self._repo(path[len("/api/models/") :])
            if rest == "":
                return self._model_info(repo_id, repo, "main")
            head, _, tail = rest.partition("/")
            if head == "revision" and tail and "/" not in tail:
                return self._model_info(repo_id, repo, unquote(tail))
            if head == "tree" and tail:
                revision, _, sub = tail.partition("/")
                recursive = (query.get("recursive") or ["false"])[0].lower() in ("1", "true")
                return self._tree(repo_id, repo, unquote(revision), unquote(sub).strip("/"), recursive)
            raise _Reply(404, None, f"Sorry, the hub stub does not serve {path}")
        if "/resolve/" in path:
            repo_id, repo, rest = self._repo(path.lstrip("/"), marker="resolve")
            revision, _, filename = rest.partition("/")
            if filename:
                return self._resolve(repo_id, repo, unquote(revision), unquote(filename))
        raise _Reply(404, None, f"Sorry, the hub stub does not serve {path}")

    # -- lookups ---------------------------------------------------------------------------------------------------

    def _repo(self, tail: str, marker: str | None = None) -> tuple[str, StubRepo, str]:
        """(repo_id, repo, rest of the path after "repo_id/[marker/]") for the longest known repo id the path starts
        with; raises RepoNotFound when none, and GatedRepo when the repo is gated and the token is missing or wrong."""
        repos = self.server.stub.repos
        known = sorted((r for r in repos if tail == r or tail.startswith(r + "/")), key=len, reverse=True)
        for repo_id in known:
            rest = tail[len(repo_id) + 1 :]
            if marker is None:
                break
            if rest.startswith(marker + "/"):
                rest = rest[len(marker) + 1 :]
                break
        else:
            shown = tail.split(f"/{marker}/")[0] if marker else "/".join(tail.split("/")[:2])
            authed = self.headers.get("Authorization") is not None
            raise _Reply(404 if authed else 401, "RepoNotFound", f"Repository not found: {shown}")
        repo = repos[repo_id]
        if repo.gated_token is not None:
            auth = self.headers.get("Authorization")
            if auth is None:
                raise _Reply(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it "
                    f"and be authenticated to access it. Please log in.",
                )
            if auth != f"Bearer {repo.gated_token}":
                raise _Reply(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the "
                    f"authorized list. Visit {self.server.stub.endpoint}/{repo_id} to ask for access.",
                )
        return repo_id, repo, rest

    @staticmethod
    def _commit(repo: StubRepo, revision: str) -> str:
        sha = repo.resolve(revision)
        if sha is None:
            raise _Reply(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return sha

    # -- answers ---------------------------------------------------------------------------------------------------

    @staticmethod
    def _json(data) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(data).encode()

    def _model_info(self, repo_id: str, repo: StubRepo, revision: str):
        sha = self._commit(repo, revision)
        files = repo.revisions[sha]
        return self._json(
            {
                "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
                "id": repo_id,
                "modelId": repo_id,
                "author": repo_id.split("/")[0] if "/" in repo_id else None,
                "sha": sha,
                "lastModified": _LAST_MODIFIED,
                "createdAt": _LAST_MODIFIED,
                "private": False,
                "disabled": False,
                "gated": "manual" if repo.gated_token is not None else False,
                "tags": [],
                "downloads": 0,
                "likes": 0,
                "siblings": [{"rfilename": name} for name in sorted(files)],
            }
        )

    def _tree(self, repo_id: str, repo: StubRepo, revision: str, sub: str, recursive: bool):
        sha = self._commit(repo, revision)
        files = repo.revisions[sha]
        prefix = sub + "/" if sub else ""
        entries: dict[str, dict] = {}
        for name in sorted(files):
            if not name.startswith(prefix):
                continue
            parts = name[len(prefix) :].split("/")
            # The folders on the way to the file (all of them when recursive, the first level otherwise).
            for depth in range(1, len(parts) if recursive else min(len(parts), 2)):
                folder = prefix + "/".join(parts[:depth])
                entries.setdefault(
                    folder, {"type": "directory", "oid": commit_sha(f"{sha}:{folder}"), "size": 0, "path": folder}
                )
            if recursive or len(parts) == 1:
                data = files[name]
                entries[name] = {"type": "file", "oid": git_blob_sha(data), "size": len(data), "path": name}
        if sub and not entries:
            raise _Reply(404, "EntryNotFound", f'{sub} does not exist on "{revision}"', {"X-Repo-Commit": sha})
        return self._json(list(entries.values()))

    def _resolve(self, repo_id: str, repo: StubRepo, revision: str, filename: str):
        sha = self._commit(repo, revision)
        files = repo.revisions[sha]
        if filename not in files:
            raise _Reply(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": sha})
        data = files[filename]
        headers = {
            "Content-Type": "application/octet-stream",
            "X-Repo-Commit": sha,
            "ETag": f'"{git_blob_sha(data)}"',
            "Accept-Ranges": "bytes",
        }
        status, body = 200, data
        byte_range = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range") or "")
        if self.command == "GET" and byte_range and any(byte_range.groups()):
            first, last = byte_range.groups()
            start = int(first) if first else max(len(data) - int(last), 0)
            end = min(int(last), len(data) - 1) if first and last else len(data) - 1
            if start >= len(data) or start > end:
                raise _Reply(416, None, "Requested range not satisfiable", {"Content-Range": f"bytes */{len(data)}"})
            status, body = 206, data[start : end + 1]
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        headers["Content-Length"] = str(len(body))
        return status, headers, body


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: "HubStub"


class HubStub:
    """The hub stand-in, as a context manager: serves `repos` on 127.0.0.1, on a free port, while inside `with`.

    repos: repo id ("org/name") -> StubRepo; read on every request, so a test may change it while serving.
    endpoint: "http://127.0.0.1:PORT", set on entry; give it as HF_ENDPOINT (before importing huggingface_hub)
        or as endpoint= to the huggingface_hub calls.
    requests: (method, path) of every request served, in order of arrival, for assertions.
    """

    def __init__(self, repos: dict[str, StubRepo]):
        self.repos = repos
        self.endpoint = ""
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._count = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "HubStub":
        server = _Server(("127.0.0.1", 0), _Handler)
        server.stub = self
        self._server = server
        self.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="hub-stub", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
