"""The OTLP sink against a real collector on loopback: an HTTP server that decodes what
it receives with the official opentelemetry-proto messages and answers as told."""

from __future__ import annotations

import socket
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsPartialSuccess

from _collectors import OtlpCollector, otlp_collector, write_certificates
from _ports import LOOPBACK, free_port
from _records import make_record
from _servers import loss_reports
from boundlog import AccessLog, ConfigurationError, Stats, __version__
from boundlog.sinks.otlp._sink import MOST_REQUEST_BYTES, OtlpSink

COUNT = 40


def submit_all(log: AccessLog, count: int = COUNT) -> list[str]:
    paths = [f"/items/{n}" for n in range(count)]
    for path in paths:
        assert log.submit(make_record(path=path.encode()))
    return paths


def test_every_record_arrives_once_as_a_log_record() -> None:
    with otlp_collector() as running:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=0.01)
        paths = submit_all(log)
        log.close()
    assert sorted(running.paths) == sorted(paths)
    stats = log.stats()
    assert (stats.written, stats.failed, stats.dropped) == (COUNT, 0, 0)


def test_picked_headers_arrive_as_http_header_attributes() -> None:
    """OtlpSink(request_headers=..., response_headers=...): each LogRecord has them as
    string arrays named by OpenTelemetry's HTTP conventions, a credential redacted."""
    with otlp_collector() as running:
        sink = OtlpSink(
            f"otlp+http://{LOOPBACK}:{running.port}",
            request_headers=["X-Request-ID", "Cookie"],
            response_headers=["Content-Type"],
        )
        log = AccessLog(sink, flush_interval=0.01)
        assert log.submit(make_record(
            request_headers=[(b"x-request-id", b"r-9"), (b"cookie", b"session=1")],
            response_headers=[(b"content-type", b"application/json")],
        ))  # fmt: skip
        log.close()
    [record] = running.records
    attributes = {kv.key: kv.value for kv in record.attributes}
    picked = {
        name: [value.string_value for value in attributes[name].array_value.values]
        for name in attributes
        if ".header." in name
    }
    assert picked == {
        "http.request.header.x-request-id": ["r-9"],
        "http.request.header.cookie": ["[redacted]"],
        "http.response.header.content-type": ["application/json"],
    }


def test_a_misspelt_picked_header_is_refused_when_the_sink_is_made() -> None:
    with pytest.raises(ConfigurationError, match="not a header field name"):
        OtlpSink("otlp+http://c:4318", environ={}, request_headers=["X Request"])


def test_a_busy_collector_is_retried_and_nothing_is_lost() -> None:
    answers = [(503, {"Retry-After": "0"}, 0), (429, {}, 0), (502, {}, 0), (200, {}, 0)]
    with otlp_collector(answers) as running:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=0.01)
        paths = submit_all(log)
        assert log.flush(timeout=120)
        log.close()
    assert sorted(running.paths) == sorted(paths)
    stats = log.stats()
    assert (stats.written, stats.failed) == (COUNT, 0)
    assert stats.write_errors >= 3


def test_a_retry_after_of_0_still_waits_the_growing_pause(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A collector that answers 503 with ``Retry-After: 0`` (or a past date) had the
    writer ask again at once, about 2,000 requests a second while it asked clients to
    back off; the growing pause is the least wait."""
    answers = [(503, {"Retry-After": "0"}, 0), (200, {}, 0)]
    with otlp_collector(answers) as running:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=0.01)
        submit_all(log)
        assert log.flush(timeout=120)
        log.close()
    assert log.stats().written == COUNT
    assert "answered HTTP 503; retrying in 0.5 s" in capfd.readouterr().err


def test_a_collector_down_at_start_gets_every_record_once_it_is_up() -> None:
    port = free_port()
    log = AccessLog(f"otlp+http://{LOOPBACK}:{port}", flush_interval=0.01)
    try:
        paths = submit_all(log)
        with otlp_collector(port=port) as running:
            assert log.flush(timeout=120)
    finally:
        log.close()
    assert sorted(running.paths) == sorted(paths)
    assert log.stats().written == COUNT


def test_rejected_records_are_counted_failed() -> None:
    with otlp_collector([(200, {}, 3)]) as running:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=3600)
        submit_all(log)
        log.close()
    stats = log.stats()
    assert running.requests == 1
    assert (stats.written, stats.failed) == (COUNT - 3, 3)


def test_a_refusal_that_would_be_refused_again_fails_the_batch() -> None:
    with otlp_collector([(400, {}, 0)]) as running:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=3600)
        submit_all(log)
        log.close()
    assert running.requests == 1
    assert (log.stats().written, log.stats().failed) == (0, COUNT)


def test_close_gives_up_on_a_collector_never_up_and_counts_every_record(
    capfd: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    log = AccessLog(f"otlp+http://{LOOPBACK}:{port}", flush_interval=0, close_timeout=0.5)
    submit_all(log)
    log.close()
    stats = log.stats()
    assert stats.written + stats.failed == COUNT
    assert stats.failed > 0
    # The closing line names why, not only that close() gave up.
    assert (
        f"close() gave up waiting for http://{LOOPBACK}:{port}/v1/logs (cannot send to "
        in capfd.readouterr().err
    )


def test_sink_otlp_reads_the_sdk_s_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    with otlp_collector() as running:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://{LOOPBACK}:{running.port}/")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s%20cret")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "shop")
        log = AccessLog("otlp", flush_interval=3600)
        submit_all(log, 2)
        log.close()
    assert running.service_names == ["shop"]
    assert running.headers[0]["api-key"] == "s cret"
    assert len(running.paths) == 2


@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json"])
def test_gzip_compression_as_the_variable_asks(
    monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    """OTEL_EXPORTER_OTLP_COMPRESSION=gzip: each body gzipped, said in Content-Encoding."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    with otlp_collector() as running:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=3600)
        paths = submit_all(log)
        log.close()
    assert sorted(running.paths) == sorted(paths)
    assert {headers["Content-Encoding"] for headers in running.headers} == {"gzip"}
    assert log.stats().written == COUNT


@pytest.mark.parametrize(
    ("url", "environ", "message"),
    [
        ("otlp", {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "give gzip or none"),
        ("otlp+ftp://x:1", {}, "not an OTLP sink"),
        ("otlp", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "http/protobuf"),
        ("otlp", {"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, "milliseconds"),
        ("otlp+http://host:99999", {}, "OTLP endpoint"),
    ],
)
def test_a_wrong_setting_says_what_to_do(url: str, environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        OtlpSink(url, environ=environ)


def test_the_endpoint_follows_the_exporter_specification() -> None:
    assert OtlpSink("otlp+http://c:4318", environ={}).endpoint == "http://c:4318/v1/logs"
    assert OtlpSink("otlp+https://c/base/", environ={}).endpoint == "https://c/base/v1/logs"
    whole = {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://c:1/custom"}
    assert OtlpSink("otlp", environ=whole).endpoint == "http://c:1/custom"
    assert OtlpSink("otlp", environ={}).endpoint == "http://localhost:4318/v1/logs"


def test_a_collector_away_is_reported_on_stderr_and_so_is_its_return(
    capfd: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    log = AccessLog(f"otlp+http://{LOOPBACK}:{port}", flush_interval=0.01)
    try:
        submit_all(log, 3)
        while "cannot send to" not in capfd.readouterr().err:
            # The first failed attempt is reported at once; each check waits for the next.
            log.flush(timeout=0.2)
        with otlp_collector(port=port) as running:
            assert log.flush(timeout=120)
    finally:
        log.close()
    assert len(running.paths) == 3
    err = capfd.readouterr().err
    assert f"sending to http://{LOOPBACK}:{port}/v1/logs again" in err, err


def test_tls_with_the_collector_s_ca_delivers_and_a_wrong_ca_is_refused_and_reported(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, certificate, key = write_certificates(tmp_path / "right", "collector")
    wrong_ca, _, _ = write_certificates(tmp_path / "wrong", "stranger")
    with otlp_collector(tls=(certificate, key)) as running:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(ca))
        log = AccessLog(f"otlp+https://localhost:{running.port}", flush_interval=0.01)
        submit_all(log, 2)
        log.close()
        assert (log.stats().written, len(running.paths)) == (2, 2)

        monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(wrong_ca))
        log = AccessLog(
            f"otlp+https://localhost:{running.port}", flush_interval=0.01, close_timeout=0.5
        )
        submit_all(log, 2)
        while "certificate verify failed" not in capfd.readouterr().err:
            log.flush(timeout=0.2)
        log.close()
    assert (log.stats().written, log.stats().failed) == (0, 2)
    assert len(running.paths) == 2


def test_otlp_json_delivers_the_same_records_and_reads_a_json_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with otlp_collector([(200, {}, 0), (200, {}, 2)]) as running:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=3600)
        paths = submit_all(log, 5)
        assert log.flush(timeout=120)
        submit_all(log, 5)
        log.close()
    assert running.content_types == ["application/json"] * 2
    assert sorted(running.paths) == sorted(paths * 2)
    assert (log.stats().written, log.stats().failed) == (8, 2)


def test_a_collector_restarted_mid_stream_loses_nothing() -> None:
    port = free_port()
    log = AccessLog(f"otlp+http://{LOOPBACK}:{port}", flush_interval=0.01)
    try:
        with otlp_collector(port=port) as first:
            paths = submit_all(log, 10)
            assert log.flush(timeout=120)
        later = [f"/later/{n}" for n in range(10)]
        for path in later:
            assert log.submit(make_record(path=path.encode()))
        with otlp_collector(port=port) as second:
            assert log.flush(timeout=120)
    finally:
        log.close()
    assert sorted(first.paths) == sorted(paths)
    assert sorted(second.paths) == sorted(later)
    assert log.stats().written == 20


# -- How big a request may be -------------------------------------------------------------

#: A User-Agent of 0xff bytes, each written as the 4 characters ``\xff``: a LogRecord of
#: about 400 KB, as a hostile client's header values make within nginx's limits.
HOSTILE = b"\xff" * 100_000


def submit_hostile(log: AccessLog, count: int, user_agent: bytes = HOSTILE) -> None:
    for n in range(count):
        assert log.submit(make_record(path=f"/big/{n}".encode(), user_agent=user_agent))


def send_hostile(running: OtlpCollector, **options: Any) -> Stats:
    """24 records of 400 KB to ``running``, one batch (three requests), then close()."""
    log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=3600, **options)
    submit_hostile(log, 24)
    return log.close()


def test_a_batch_bigger_than_the_request_bound_goes_out_in_several_requests() -> None:
    """24 records of 400 KB, one batch: one 9.6 MB POST, which a collector that takes
    no more than the bound refused whole (413, every record failed)."""
    with otlp_collector(most_body=MOST_REQUEST_BYTES + 4096) as running:
        stats = send_hostile(running)
    assert (stats.written, stats.failed) == (24, 0)
    assert running.requests == 3
    assert max(running.body_sizes) <= MOST_REQUEST_BYTES + 4096
    assert len(running.paths) == 24


def test_a_request_answered_413_is_sent_again_in_halves_and_a_record_too_big_fails_alone(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A collector that takes 1 MB: ten records of 100 KB around two of 1.2 MB.  The
    ten are written; the big ones fail, counted, the message saying why (once)."""
    with otlp_collector(most_body=1_000_000) as running:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=3600)
        submit_hostile(log, 5, HOSTILE[:25_000])
        submit_hostile(log, 1, HOSTILE * 3)
        submit_hostile(log, 5, HOSTILE[:25_000])
        submit_hostile(log, 1, HOSTILE * 3)
        log.close()
    stats = log.stats()
    assert (stats.written, stats.failed) == (10, 2)
    assert len(running.paths) == 10
    err = capfd.readouterr().err
    assert "the collector refused a record of 1200" in err, err
    assert "as too large (HTTP 413) (and 1 more failed request(s))" in err, err


def test_a_failure_after_a_written_request_counts_the_written_ones_written() -> None:
    """Three requests (10, 10 and 4 records): the first written, the others refused."""
    with otlp_collector([(200, {}, 0), (400, {}, 0)]) as running:
        stats = send_hostile(running)
    assert running.requests == 3
    assert (stats.written, stats.failed) == (10, 14)
    assert len(running.paths) == 10


def test_partial_successes_of_the_requests_of_a_batch_add_up() -> None:
    with otlp_collector([(200, {}, 2), (200, {}, 3), (200, {}, 0)]) as running:
        stats = send_hostile(running)
    assert running.requests == 3
    assert (stats.written, stats.failed) == (19, 5)


def test_a_connection_the_collector_closed_while_idle_is_opened_again_without_a_word(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A collector (or a load balancer) that closes idle keep-alive connections: each
    batch after an idle pause met the dead connection, said "Broken pipe; retrying",
    counted a write error and paused.  Now it is sent again at once on a new one."""
    with otlp_collector(idle_close=True) as running:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=0.01)
        for _ in range(3):
            running.closed_one.clear()
            submit_all(log, 2)
            assert log.flush(timeout=120)
            # The collector has closed the connection the batch went on.
            assert running.closed_one.wait(30)
        log.close()
    stats = log.stats()
    assert (stats.written, stats.failed, stats.write_errors) == (6, 0, 0)
    assert running.requests == 3
    assert running.connections == 3
    assert "boundlog" not in capfd.readouterr().err


# -- Settings refused when the sink is made -------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        # Dropped without a word, then 401 from the collector at each batch.
        ("Authorization Bearer s3cret", "item 1 has no '='"),
        ("api-key=1,Authorization Bearer s3cret", "item 2 has no '='"),
        # The next three failed every batch inside http.client, counted as failed.
        ("x-key=a%0D%0AX-Injected: s3cret", "the value of x-key holds a CR, LF or NUL"),
        ("x-key=s3cret%E2%82%AC", "the value of x-key holds U\\+20AC"),
        ("%20=s3cret", "item 1 has ' ' first, which is not an HTTP field name"),
        # Sent as it was: an invalid header line.
        ("my key=s3cret", "item 1 has ' ' after 'my', which is not an HTTP field name"),
        ("=s3cret", "the name of item 1 is empty"),
    ],
)
def test_headers_http_cannot_send_are_refused_naming_the_variable_not_the_value(
    headers: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as raised:
        OtlpSink("otlp", environ={"OTEL_EXPORTER_OTLP_LOGS_HEADERS": headers})
    assert str(raised.value).startswith("OTEL_EXPORTER_OTLP_LOGS_HEADERS: ")
    assert "s3cret" not in str(raised.value)


def test_headers_empty_items_and_spaces_are_taken_as_the_sdk_takes_them() -> None:
    sink = OtlpSink("otlp", environ={"OTEL_EXPORTER_OTLP_HEADERS": "a=b,, c = d%20e ,"})
    assert {name: sink.headers[name] for name in ("a", "c")} == {"a": "b", "c": "d e"}


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e300", "-5", "0"])
def test_a_timeout_that_is_no_finite_positive_number_is_refused(value: str) -> None:
    """inf was taken, and every batch then failed with OverflowError."""
    with pytest.raises(ConfigurationError, match="give milliseconds above 0 and at most"):
        OtlpSink("otlp", environ={"OTEL_EXPORTER_OTLP_TIMEOUT": value})


def test_a_timeout_under_a_second_is_said_once_with_both_readings(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The Python SDK reads OTEL_EXPORTER_OTLP_TIMEOUT in seconds: a service that sets 10
    for its SDK gave boundlog 10 ms, and nothing was ever written."""
    sink = OtlpSink("otlp", environ={"OTEL_EXPORTER_OTLP_TIMEOUT": "10"})
    assert sink.timeout == 0.01
    err = capfd.readouterr().err
    assert err == (
        "boundlog: OTEL_EXPORTER_OTLP_TIMEOUT=10 is 10 ms to boundlog (the OTLP "
        "specification's unit); the Python SDK reads it as seconds: for 10 s, "
        "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT=10000 is read by boundlog first\n"
    )
    both = {"OTEL_EXPORTER_OTLP_TIMEOUT": "10", "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT": "10000"}
    assert OtlpSink("otlp", environ=both).timeout == 10.0
    assert OtlpSink("otlp", environ={"OTEL_EXPORTER_OTLP_TIMEOUT": "1000"}).timeout == 1.0
    assert capfd.readouterr().err == ""


def test_the_protocol_is_read_whatever_its_case_and_an_unknown_one_is_not_called_grpc() -> None:
    sink = OtlpSink("otlp", environ={"OTEL_EXPORTER_OTLP_PROTOCOL": "HTTP/PROTOBUF"})
    assert sink.protocol == "http/protobuf"
    assert OtlpSink("otlp", environ={"OTEL_EXPORTER_OTLP_PROTOCOL": "HTTP/JSON"}).protocol == (
        "http/json"
    )
    with pytest.raises(ConfigurationError) as raised:
        OtlpSink("otlp", environ={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/xml"})
    assert "gRPC" not in str(raised.value)
    assert "give one of them" in str(raised.value)
    with pytest.raises(ConfigurationError, match="not gRPC"):
        OtlpSink("otlp", environ={"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "GRPC"})


def test_a_certificate_file_missing_or_no_ca_file_is_refused_naming_the_variable(
    tmp_path: Path,
) -> None:
    """A missing file was a bare FileNotFoundError, naming neither file nor variable."""
    missing = tmp_path / "ca.pem"
    with pytest.raises(ConfigurationError, match=r"CERTIFICATE=.*ca\.pem'?: no such file"):
        OtlpSink("otlp+https://c:1", environ={"OTEL_EXPORTER_OTLP_CERTIFICATE": str(missing)})
    missing.write_text("not a certificate\n")
    with pytest.raises(ConfigurationError, match="no PEM certificate in it: give the PEM file"):
        OtlpSink("otlp+https://c:1", environ={"OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE": str(missing)})


@pytest.mark.parametrize(
    ("url", "environ", "source", "fix"),
    [
        ("otlp+http://alice:s3cret@c:4318", {}, "the sink URL", "otlp+http://c:4318"),
        (
            "otlp",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://alice:s3cret@c:4318/base"},
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://c:4318/base",
        ),
        (
            "otlp",
            {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://:s3cret@c/logs"},
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
            "https://c/logs",
        ),
    ],
)
def test_credentials_in_the_url_are_refused_without_saying_the_password(
    url: str, environ: dict[str, str], source: str, fix: str
) -> None:
    """They were not sent (401 at each batch), and the password was in every report."""
    with pytest.raises(ConfigurationError) as raised:
        OtlpSink(url, environ=environ)
    message = str(raised.value)
    assert message.startswith(f"{source} holds credentials")
    assert f"give {fix} and pass them as a header" in message
    assert "OTEL_EXPORTER_OTLP_HEADERS='Authorization=Basic" in message
    assert "s3cret" not in message


# -- What a refusal says --------------------------------------------------------------------

# google.rpc.Status { int32 code = 1; string message = 2 } has the wire layout of
# ExportLogsPartialSuccess { int64 rejected_log_records = 1; string error_message = 2 }.
RPC_STATUS = ExportLogsPartialSuccess(
    rejected_log_records=3, error_message="log record 3: time is out of range"
).SerializeToString()


@pytest.mark.parametrize(
    ("status", "headers", "payload", "path", "said"),
    [
        (
            400,
            {},
            ("application/x-protobuf", RPC_STATUS),
            "",
            "the collector answered HTTP 400: log record 3: time is out of range",
        ),
        (
            401,
            {},
            ("text/plain; charset=utf-8", b"invalid api key\r\n\x1b[31m"),
            "",
            "the collector answered HTTP 401: invalid api key [31m; check the credentials it "
            "asks for: OTEL_EXPORTER_OTLP_HEADERS",
        ),
        (
            403,
            {},
            ("application/json", b'{"code": 7, "message": "tenant shop may not write"}'),
            "",
            "the collector answered HTTP 403: tenant shop may not write; check the credentials",
        ),
        (
            404,
            {},
            ("text/plain", b"404 page not found"),
            "/v1/logs",
            "the collector answered HTTP 404: 404 page not found; boundlog adds /v1/logs to "
            "the path of a sink URL (and of OTEL_EXPORTER_OTLP_ENDPOINT): drop /v1/logs",
        ),
        (
            308,
            {"Location": "https://intake.example/otlp/v1/logs"},
            ("text/html", b"<html>moved</html>"),
            "",
            "the collector answered HTTP 308; it redirects to "
            "https://intake.example/otlp/v1/logs: point the sink there",
        ),
        (
            400,
            {},
            ("text/plain", b"x" * 100_000),
            "",
            "the collector answered HTTP 400: " + "x" * 197 + "...",
        ),
    ],
    ids=["rpc-status", "401-text", "403-json", "404-path-twice", "308", "long-reason"],
)
def test_a_refusal_says_the_collectors_reason_and_what_to_do(
    capfd: pytest.CaptureFixture[str],
    status: int,
    headers: dict[str, str],
    payload: tuple[str, bytes],
    path: str,
    said: str,
) -> None:
    """It said only "<url> answered HTTP 400", after the same URL."""
    with otlp_collector([(status, headers, 0)], payload=payload) as running:
        url = f"http://{LOOPBACK}:{running.port}"
        log = AccessLog(f"otlp+{url}{path}", flush_interval=3600)
        submit_all(log, 2)
        log.close()
    assert (log.stats().written, log.stats().failed) == (0, 2)
    [line] = [line for line in capfd.readouterr().err.splitlines() if "cannot write" in line]
    assert f"cannot write to {url}{path}/v1/logs: {said}" in line, line
    assert line.partition("cannot write to")[2].count(url) == 1


def test_an_answer_is_read_no_further_than_its_bound(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A 16 MiB answer was read whole (a 200 MiB one cost 400 MiB).  Its records are
    written; the rest of the answer is left unread, said once."""
    huge = ("application/x-protobuf", b"\x7a\x80\x80\x80\x08" + b"x" * (16 << 20))
    with otlp_collector(payload=huge) as running:
        tracemalloc.start()
        try:
            log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=3600)
            submit_all(log, 5)
            assert log.flush(timeout=120)
            submit_all(log, 5)
            log.close()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert (log.stats().written, log.stats().failed) == (10, 0)
    assert running.requests == 2
    assert peak < 4 << 20, peak
    assert capfd.readouterr().err.count("answers with more than 64 KiB") == 1


def test_a_collector_that_asks_for_a_client_certificate_gets_the_one_the_variables_name(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY (mTLS) were ignored: the
    handshake failed at each attempt, and nothing was written."""
    ca, certificate, key = write_certificates(tmp_path / "server", "collector")
    client_ca, client_certificate, client_key = write_certificates(
        tmp_path / "client", "clients", usage="clientAuth"
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(ca))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE", str(client_certificate))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", str(client_key))
    with otlp_collector(tls=(certificate, key), client_ca=client_ca) as running:
        log = AccessLog(
            f"otlp+https://localhost:{running.port}", flush_interval=0.01, close_timeout=10
        )
        submit_all(log, 2)
        log.close()
    assert (log.stats().written, len(running.paths)) == (2, 2)
    assert "boundlog" not in capfd.readouterr().err

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", str(tmp_path / "gone.key"))
    with pytest.raises(ConfigurationError, match=r"CLIENT_KEY='.*gone\.key': no such file"):
        OtlpSink(f"otlp+https://localhost:{running.port}")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE")
    with pytest.raises(ConfigurationError, match="CLIENT_KEY is set but not"):
        OtlpSink(f"otlp+https://localhost:{running.port}")


def test_each_request_says_boundlog_and_its_version_as_its_user_agent() -> None:
    with otlp_collector() as running:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{running.port}", flush_interval=3600)
        submit_all(log, 2)
        log.close()
    assert [headers["User-Agent"] for headers in running.headers] == [f"boundlog/{__version__}"]
    # One of the variable's wins, whatever its case: a request has one User-Agent.
    mine = OtlpSink("otlp", environ={"OTEL_EXPORTER_OTLP_HEADERS": "user-agent=mine/1"})
    assert [value for name, value in mine.headers.items() if name.lower() == "user-agent"] == [
        "mine/1"
    ]


def test_close_giving_up_counts_the_requests_already_answered_as_written() -> None:
    """Three requests (10, 10 and 4 records): the first written, the second answered
    503 until close() gives up: the first ten are written, the rest failed."""
    with otlp_collector([(200, {}, 0), (503, {}, 0)]) as running:
        stats = send_hostile(running, close_timeout=1)
    assert len(running.paths) == 10
    assert (stats.written, stats.failed) == (10, 14)


def test_a_new_connection_closed_without_an_answer_is_still_reported(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Only a connection kept from an earlier request is sent again without a word: a
    collector that closes each new connection without answering is failing, and said."""
    listener = socket.create_server((LOOPBACK, 0))
    port = listener.getsockname()[1]

    def close_each_connection() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(1 << 16)

    thread = threading.Thread(target=close_each_connection, daemon=True)
    thread.start()
    try:
        log = AccessLog(f"otlp+http://{LOOPBACK}:{port}", flush_interval=0.01, close_timeout=0.5)
        submit_all(log, 2)
        while f"cannot send to http://{LOOPBACK}:{port}/v1/logs" not in capfd.readouterr().err:
            log.flush(timeout=0.2)
        log.close()
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        listener.close()
        thread.join()
    stats = log.stats()
    assert (stats.written, stats.failed) == (0, 2)
    assert stats.write_errors >= 1


def test_what_close_gives_up_on_is_in_its_closing_line_only(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A collector whose connect never completes (its listen queue full: the SYNs are
    dropped): close() gives up, ends the connect, and nothing of the log outlives it
    (the writer stayed in connect() for its whole timeout); and the monitor, looking
    once a second, does not report the records given up on as a loss of its own just
    before the closing line does."""
    with socket.create_server((LOOPBACK, 0), backlog=0) as listener:
        port = listener.getsockname()[1]
        waiting = []
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex((LOOPBACK, port))
            waiting.append(filler)
        try:
            log = AccessLog(f"otlp+http://{LOOPBACK}:{port}", flush_interval=0)
            submit_all(log)
            stats = log.close(timeout=0.5)
            assert not log._writer.thread.is_alive()
        finally:
            for filler in waiting:
                filler.close()
    reports = loss_reports(capfd.readouterr().err)
    assert reports.periodic == []
    assert reports.final == [(0, stats.failed, reports.final[0][2])]
    assert stats.failed == COUNT
