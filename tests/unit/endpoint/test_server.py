"""The loopback server under load and abuse: backlog, slow clients, bad framing, bad bodies.

Every client here is a raw socket or ``http.client`` on 127.0.0.1; every loop is bounded
in count, and every wait has a generous bound (docs/limits.md#endpoint-limits).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from support.chunks import text_entry
from support.hang_guard import deadline

from pytest_dsh_replay import EndpointError
from pytest_dsh_replay._endpoint import server as server_module
from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.server import MAX_BODY_BYTES, EndpointServer
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ReplayEntry
from pytest_dsh_replay._scripts.scenario import Scenario, SessionScript

CHAT = "/v1/chat/completions"


def _script(
    file: str, entries: list[ReplayEntry], *, rid: str, parent: str | None, first: str | None
) -> SessionScript:
    return SessionScript(
        file=file,
        recorded_id=rid,
        created_at=0,
        seed_length=0,
        parent_session=parent,
        primary=parent is None,
        entries=tuple(entries),
        first_user_text=first,
    )


def _replying(*texts: str) -> Endpoint:
    """An endpoint whose one recorded session answers ``texts`` in order."""
    primary = _script(
        "session.jsonl", [text_entry(t) for t in texts], rid="primary-rec", parent=None, first=None
    )
    return Endpoint.replaying(ReplayModel(Scenario(Path("mem"), (primary,))))


@pytest.fixture
def served() -> Iterator[EndpointServer]:
    server = EndpointServer(_replying("Hello", "Hello again"))
    try:
        yield server
    finally:
        server.stop()


def _address(server: EndpointServer) -> tuple[str, int]:
    host, port = server.base_url.removeprefix("http://").split(":")
    return host, int(port)


def _connect(server: EndpointServer, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection(_address(server), timeout=timeout)


def _http(server: EndpointServer, timeout: float = 10.0) -> http.client.HTTPConnection:
    host, port = _address(server)
    return http.client.HTTPConnection(host, port, timeout=timeout)


def _ask(text: str, **extra: Any) -> bytes:
    return json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": text}], **extra}
    ).encode()


def _raw(server: EndpointServer, data: bytes) -> tuple[int, dict[str, str], Any]:
    """Send raw bytes, read one response (``http.client`` parses it): status, headers, JSON."""
    with _connect(server) as sock:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = response.read()
    headers = {name.lower(): value for name, value in response.getheaders()}
    return response.status, headers, json.loads(body)


def _post_head(path: str, length: str | None, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines.extend(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


# --- load ----------------------------------------------------------------------------------

CLIENTS = 200
REQUESTS = 20
CALLS = REQUESTS // 4 * 2  # replayed calls per client: a whole answer and a stream per 4
RECONNECT = 5  # requests per connection


def _load_scenario() -> Scenario:
    """A primary and one child per client, each child recording ``CALLS`` answers."""
    scripts = [
        _script("session.jsonl", [text_entry("ready")], rid="primary-rec", parent=None, first=None)
    ]
    for n in range(CLIENTS):
        entries: list[ReplayEntry] = [text_entry(f"answer {n}.{k}") for k in range(CALLS)]
        scripts.append(
            _script(
                f"session.child-{n}.jsonl",
                entries,
                rid=f"child-{n}",
                parent="primary-rec",
                first=f"task {n}",
            )
        )
    return Scenario(Path("mem"), tuple(scripts))


def _client_run(server: EndpointServer, n: int, start: threading.Barrier) -> list[str]:
    """One client's requests; what went wrong, as text (a new connection per request)."""
    headers = {
        "content-type": "application/json",
        "x-dsh-session-id": f"c{n}",
        "x-dsh-parent-session-id": "main",
    }
    problems: list[str] = []
    start.wait(30)
    call = 0
    connection = _http(server, timeout=15)
    for i in range(REQUESTS):
        kind = i % 4
        if i % RECONNECT == 0:  # a new connection now and then: the accept path under load
            connection.close()
            connection = _http(server, timeout=15)
        try:
            if kind == 1:
                connection.request("GET", "/v1/models")
            elif kind == 2:  # the whole POST path to a refusal: a misshapen body
                body = json.dumps({"model": "m", "messages": "oops"}).encode()
                connection.request("POST", CHAT, body=body, headers=headers)
            else:
                stream = kind == 3
                connection.request(
                    "POST", CHAT, body=_ask(f"task {n}", stream=stream), headers=headers
                )
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as error:  # a reset, a refusal, a timeout
            problems.append(f"client {n} request {i}: {type(error).__name__}: {error}")
            connection.close()
            continue
        expected = 400 if kind == 2 else 200
        if response.status != expected:
            problems.append(f"client {n} request {i}: status {response.status}: {data[:200]!r}")
        elif kind in (0, 3):
            if f"answer {n}.{call}".encode() not in data:
                problems.append(f"client {n} request {i}: wrong answer {data[:200]!r}")
            call += 1
    connection.close()
    return problems


def test_200_concurrent_clients_get_every_answer_without_a_reset() -> None:
    endpoint = Endpoint.replaying(ReplayModel(_load_scenario()))
    server = EndpointServer(endpoint)
    problems: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS + 1)

    def client(n: int) -> None:
        found = _client_run(server, n, start)
        with lock:
            problems.extend(found)

    began = time.monotonic()
    try:
        with deadline(60):
            connection = _http(server)  # the primary session is bound first
            head = {"content-type": "application/json", "x-dsh-session-id": "main"}
            connection.request("POST", CHAT, body=_ask("primary task"), headers=head)
            assert b"ready" in connection.getresponse().read()
            connection.close()
            threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
            for thread in threads:
                thread.start()
            start.wait(30)
            for thread in threads:
                thread.join(45)
            assert not any(thread.is_alive() for thread in threads)
    finally:
        server.stop()
    elapsed = time.monotonic() - began
    assert problems[:5] == [], f"{len(problems)} of {CLIENTS * REQUESTS} requests failed"
    assert endpoint.errors == []
    assert elapsed < 20, f"the load took {elapsed:.1f} s"


# --- slow clients ----------------------------------------------------------------------------


def _slow_clients(server: EndpointServer, count: int) -> list[socket.socket]:
    """``count`` connections that send half a request and wait (half heads, half bodies)."""
    opened = []
    for n in range(count):
        sock = _connect(server)
        if n % 2:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        else:
            sock.sendall(_post_head(CHAT, "100") + b'{"model": "m", "mess')
        opened.append(sock)
    return opened


def _taken_up(server: EndpointServer, count: int) -> None:
    """Return once the server has accepted ``count`` connections (each has its thread)."""
    state = server._server
    while True:
        with state.changed:
            if len(state.connections) >= count:
                return
        time.sleep(0.005)  # accepting adds no notice; the test's deadline bounds the loop


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock`` (an answer, if any, read first)."""
    sock.settimeout(5)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def test_stop_wakes_the_serving_loop_instead_of_waiting_for_its_next_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The serving loop looks for a stop between waits for a connection; with a minute
    # between looks, only a stop that wakes it returns before the deadline.
    monkeypatch.setattr(server_module, "_POLL_S", 60.0)
    server = EndpointServer(_replying("Hello"))
    good = _ask("hi")  # it serves before the stop
    status, _, answer = _raw(server, _post_head(CHAT, str(len(good))) + good)
    assert (status, answer["choices"][0]["message"]["content"]) == (200, "Hello")
    with deadline(20):
        server.stop()
    assert not server._thread.is_alive()
    with pytest.raises(ConnectionRefusedError):
        _connect(server, timeout=1.0).close()


def test_100_slow_clients_delay_no_request_and_stop_closes_them_at_once() -> None:
    server = EndpointServer(_replying("Hello"))
    slow: list[socket.socket] = []
    try:
        with deadline(60):
            slow = _slow_clients(server, 100)
            _taken_up(server, 100)
            started = time.monotonic()
            connection = _http(server, timeout=5)
            connection.request("POST", CHAT, body=_ask("hi"))
            response = connection.getresponse()
            answered = time.monotonic() - started
            assert response.status == 200
            assert b"Hello" in response.read()
            connection.close()
            models = _http(server, timeout=5)
            models.request("GET", "/v1/models")
            assert models.getresponse().status == 200
            models.close()
            assert answered < 1.0, f"the request waited {answered:.2f} s behind slow clients"
            started = time.monotonic()
            server.stop()
            stopped = time.monotonic() - started
            assert stopped < 1.0, f"stop() took {stopped:.2f} s with 100 slow clients open"
            assert all(_closed_by_server(sock) for sock in slow)
    finally:
        server.stop()
        for sock in slow:
            sock.close()


def test_a_request_that_trickles_in_is_cut_at_its_deadline(
    served: EndpointServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "REQUEST_TIMEOUT_S", 0.2)
    with deadline(30), _connect(served) as sock:
        head = _post_head(CHAT, "2000")
        started = time.monotonic()
        answer = b""
        sock.settimeout(0.02)  # each read waits this long: a byte every 20 ms, ~6 s in all
        for byte in range(len(head) + 200):
            data = head[byte : byte + 1] or b" "
            try:
                sock.sendall(data)
                answer += sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if answer:
                break
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:100]
        assert time.monotonic() - started < 5
        assert _closed_by_server(sock)


def test_an_idle_keep_alive_connection_is_closed(
    served: EndpointServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "IDLE_TIMEOUT_S", 0.05)
    with deadline(30):
        connection = _http(served)
        connection.request("GET", "/v1/models")
        response = connection.getresponse()
        response.read()
        assert response.status == 200
        assert connection.sock is not None
        assert _closed_by_server(connection.sock)  # within 5 s, not the default 30
        connection.close()


def test_at_the_connection_cap_the_longest_idle_connection_makes_room(
    served: EndpointServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "MAX_CONNECTIONS", 4)
    reading = threading.Semaphore(0)
    readinto = server_module._Deadline.readinto

    def signalled(self: server_module._Deadline, buffer: Any) -> int:
        reading.release()  # the connection's thread waits for its request from now on
        return readinto(self, buffer)

    monkeypatch.setattr(server_module._Deadline, "readinto", signalled)
    idle: list[socket.socket] = []
    try:
        with deadline(30):
            for _ in range(4):  # each waits for a request before the next opens: the first
                idle.append(_connect(served))  # is the longest idle
                assert reading.acquire(timeout=20)
            connection = _http(served, timeout=5)
            connection.request("GET", "/v1/models")
            assert connection.getresponse().status == 200
            connection.close()
            assert _closed_by_server(idle[0])
    finally:
        for sock in idle:
            sock.close()


# --- refused framing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "length", ["abc", "-1", "10^12", "1e3", "12 34", "+5", "0x10", ""], ids=repr
)
def test_a_bad_content_length_is_a_400_in_the_wires_shape(
    served: EndpointServer, length: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with deadline(30):
        status, headers, body = _raw(served, _post_head(CHAT, length) + _ask("hi"))
        assert status == 400
        assert headers["content-type"] == "application/json"
        assert headers["connection"] == "close"
        assert body["error"]["type"] == "invalid_request_error"
        assert "Content-Length" in body["error"]["message"]
        # the endpoint still answers afterwards
        assert _raw(served, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/v1/messages", "anthropic"),
        ("/v1/responses", "openai"),
        ("/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", "gemini"),
        ("/v1/nowhere", "openai"),
    ],
)
def test_a_refusal_takes_the_error_shape_of_the_route(
    served: EndpointServer, path: str, shape: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with deadline(30):
        status, _, body = _raw(served, _post_head(path, "abc") + b"{}")
    assert status == 400
    if shape == "anthropic":
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
    elif shape == "gemini":
        assert body["error"]["code"] == 400
        assert body["error"]["status"] == "INVALID_ARGUMENT"
    else:
        assert body["error"]["type"] == "invalid_request_error"
        assert "param" in body["error"]
    assert capfd.readouterr().err == ""


def test_disagreeing_or_missing_lengths_and_chunked_bodies_are_400(
    served: EndpointServer, capfd: pytest.CaptureFixture[str]
) -> None:
    body = _ask("hi")
    cases = {
        "disagree": _post_head(CHAT, "12", "Content-Length: 13") + body,
        "missing with a body": _post_head(CHAT, None) + body,
        "chunked": _post_head(CHAT, None, "Transfer-Encoding: chunked")
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body),
    }
    with deadline(30):
        for name, data in cases.items():
            status, _, answer = _raw(served, data)
            assert status == 400, name
            assert "ength" in answer["error"]["message"], name
    assert capfd.readouterr().err == ""


def test_a_body_over_the_cap_is_a_413_before_it_is_read(
    capfd: pytest.CaptureFixture[str],
) -> None:
    server = EndpointServer(_replying("Hello"), max_body_bytes=1000)
    try:
        with deadline(30):
            big = json.dumps({"model": "m", "messages": [], "pad": "x" * 2000}).encode()
            status, headers, body = _raw(server, _post_head(CHAT, str(len(big))) + big)
            assert status == 413
            assert headers["connection"] == "close"
            assert "above the cap of 1000 bytes" in body["error"]["message"]
            # a declared terabyte is refused from its head alone
            status, _, body = _raw(server, _post_head("/v1/messages", "1000000000000"))
            assert status == 413
            assert body["error"]["type"] == "request_too_large"
            # a client that asks first is refused before it sends the body
            expect = _post_head(CHAT, str(len(big)), "Expect: 100-continue")
            assert _raw(server, expect)[0] == 413
            # at the cap it is served
            fits = _ask("hi") + b" " * (1000 - len(_ask("hi")))
            status, _, body = _raw(server, _post_head(CHAT, "1000") + fits)
            assert status == 200
            assert body["choices"][0]["message"]["content"] == "Hello"
    finally:
        server.stop()
    assert capfd.readouterr().err == ""


def test_the_default_cap_is_32_mib_and_the_cap_must_be_positive() -> None:
    assert MAX_BODY_BYTES == 32 * 1024 * 1024
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_body_bytes"):
            EndpointServer(_replying(), max_body_bytes=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "data",
    [
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"PATCH /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /v1/models HTTP/1.1\r\n" + b"X-Long: " + b"y" * 70000 + b"\r\n\r\n",
    ],
    ids=["syntax", "version", "method", "header-line"],
)
def test_a_malformed_request_head_is_answered_in_json(
    served: EndpointServer, data: bytes, capfd: pytest.CaptureFixture[str]
) -> None:
    with deadline(30):
        status, headers, body = _raw(served, data)
    assert 400 <= status < 600
    assert headers["content-type"] == "application/json"
    assert body["error"]["message"]
    assert capfd.readouterr().err == ""


# --- misshapen bodies ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (CHAT, {"model": "m", "messages": "hello"}, "messages"),
        (CHAT, {"model": "m", "messages": ["hello"]}, "messages[0]"),
        (CHAT, {"model": "m", "messages": [], "tools": {"type": "function"}}, "tools"),
        ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": "hello"}, "messages"),
        ("/v1/messages", {"model": "m", "messages": [], "system": 3}, "system"),
        ("/v1/responses", {"model": "m", "input": 7}, "input"),
        ("/v1/responses", {"model": "m", "input": [{"role": "user"}, "x"]}, "input[1]"),
        ("/v1beta/models/g:generateContent", {"contents": "hello"}, "contents"),
        ("/v1/models/g:generateContent", {"contents": [], "tools": "t"}, "tools"),
    ],
)
def test_a_misshapen_list_field_is_a_400_naming_it(
    served: EndpointServer,
    path: str,
    body: dict[str, Any],
    field: str,
    capfd: pytest.CaptureFixture[str],
) -> None:
    data = json.dumps(body).encode()
    with deadline(30):
        status, headers, answer = _raw(served, _post_head(path, str(len(data))) + data)
        assert status == 400
        assert headers["content-type"] == "application/json"
        assert f"'{field}'" in answer["error"]["message"]
        # the request bound nothing: the recording is still there for a good one
        good = _ask("hi")
        status, _, answer = _raw(served, _post_head(CHAT, str(len(good))) + good)
        assert (status, answer["choices"][0]["message"]["content"]) == (200, "Hello")
    assert served.endpoint.errors == []
    assert capfd.readouterr().err == ""


# --- unexpected exceptions -----------------------------------------------------------------------


SECRET = "sk-live-" + "Q7" * 12  # a key the built-in rules know


class _Broken:
    """A model that fails inside the handler: at once, or after its first chunk."""

    def __init__(self, late: bool):
        self.late = late

    def stream(self, request: Mapping[str, Any], **kwargs: Any) -> Iterator[dict[str, Any]]:
        if self.late:
            yield {"type": "block-start", "index": 0, "blockType": "text"}
            yield {"type": "text-delta", "index": 0, "text": "Hel"}
        raise KeyError(f"boom {SECRET}")


@pytest.mark.parametrize("late", [False, True], ids=["before-the-answer", "mid-stream"])
def test_an_unexpected_exception_is_kept_and_prints_nothing(
    late: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    endpoint = Endpoint(_Broken(late))
    server = EndpointServer(endpoint)
    try:
        with deadline(30):
            connection = _http(server)
            connection.request("POST", CHAT, body=_ask("hi", stream=True))
            response = connection.getresponse()
            if late:
                assert response.status == 200
                with pytest.raises(http.client.IncompleteRead):
                    response.read()  # the body is cut
            else:
                assert response.status == 400  # a status nobody retries
                message = json.loads(response.read())["error"]["message"]
                assert message.startswith("EndpointError: the model endpoint failed answering")
                assert "POST /v1/chat/completions: KeyError: 'boom [REDACTED]'" in message
            connection.close()
    finally:
        server.stop()
    assert [type(e) for e in endpoint.errors] == [EndpointError]
    assert isinstance(endpoint.errors[0].__cause__, KeyError)
    assert SECRET not in str(endpoint.errors[0])  # its message quotes no live secret
    assert capfd.readouterr().err == ""


def test_an_http_1_0_request_gets_a_body_that_ends_with_the_connection(
    served: EndpointServer,
) -> None:
    # It was answered with Transfer-Encoding: chunked, which no HTTP/1.0 client reads:
    # the chunk sizes showed inside the JSON.
    body = _ask("hi")
    head = _post_head(CHAT, str(len(body))).replace(b"HTTP/1.1", b"HTTP/1.0", 1)
    with _connect(served) as sock:
        sock.sendall(head + body)
        received = b""
        while chunk := sock.recv(65536):  # the server closes: the body's end
            received += chunk
    status_line, rest = received.split(b"\r\n", 1)
    headers, payload = rest.split(b"\r\n\r\n", 1)
    assert status_line.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding" not in headers.lower()
    assert b"connection: close" in headers.lower()
    assert json.loads(payload)["choices"][0]["message"]["content"] == "Hello"


def test_a_compressed_request_body_is_refused_naming_its_encoding(served: EndpointServer) -> None:
    # It was read as JSON: "the body is not JSON: str is not valid UTF-8: surrogates ...".
    import gzip

    body = gzip.compress(_ask("hi"))
    head = _post_head(CHAT, str(len(body)), "Content-Encoding: gzip")
    status, _, answer = _raw(served, head + body)
    assert status == 415
    assert "Content-Encoding gzip are not accepted: send the body uncompressed" in json.dumps(
        answer
    )
