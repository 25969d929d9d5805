"""Network sink URLs: what each scheme takes, and the errors a wrong one gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from boundlog import AccessLog, ConfigurationError, NetworkSink, OtlpSink
from boundlog.sinks._urls import SCHEMES, parse_url


@pytest.mark.parametrize(
    ("url", "framing", "transport", "host", "port", "path"),
    [
        ("tcp://127.0.0.1:5170", "lines", "tcp", "127.0.0.1", 5170, ""),
        ("tls://logs.example.com:6000", "lines", "tls", "logs.example.com", 6000, ""),
        ("syslog://collector:1514", "syslog", "tcp", "collector", 1514, ""),
        ("syslog://collector", "syslog", "tcp", "collector", 514, ""),
        ("syslog+tls://collector", "syslog", "tls", "collector", 6514, ""),
        ("syslog+udp://[::1]:5514", "syslog", "udp", "::1", 5514, ""),
        ("syslog+udp://10.0.0.5", "syslog", "udp", "10.0.0.5", 514, ""),
        ("syslog+unix:///dev/log", "syslog", "unix", "", 0, "/dev/log"),
        ("relp://10.0.0.5:2514", "relp", "tcp", "10.0.0.5", 2514, ""),
        ("SYSLOG://Collector:1514/", "syslog", "tcp", "collector", 1514, ""),
    ],
)
def test_each_scheme_parses(
    url: str, framing: str, transport: str, host: str, port: int, path: str
) -> None:
    """Every scheme gives its framing and transport; syslog schemes have default ports."""
    address = parse_url(url)
    assert (address.framing, address.transport) == (framing, transport)
    assert (address.host, address.port, address.path) == (host, port, path)
    assert address.url == url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("gelf://collector:12201", "unknown network sink scheme 'gelf'"),
        ("relp://collector", "needs a port"),
        ("http://collector:80", "unknown network sink scheme 'http'"),
        ("tcp://collector", "needs a port"),
        ("tls://collector:0", "needs a port"),
        ("tcp://collector:99999", "tcp:// needs a port from 1 to 65535"),
        ("tcp://collector:port", "tcp:// needs a port from 1 to 65535"),
        ("tcp://:5170", "expected tcp://HOST:PORT"),
        ("tcp://collector:5170/path", "expected tcp://HOST:PORT"),
        ("tcp://collector:5170?x=1", "no query nor fragment"),
        ("tcp://collector:5170#top", "no query nor fragment"),
        ("tcp://user:secret@collector:5170", "no user name nor password"),
        ("syslog+unix://dev/log", "absolute path"),
        ("syslog+unix://", "absolute path"),
        # Pasted from a file: the sink's name in every report would break its line.
        ("syslog://collector:514\n", "holds a space or a control character: remove it"),
        ("tcp://collector:51 70", "holds a space or a control character: remove it"),
    ],
)
def test_a_malformed_url_is_a_configuration_error(url: str, message: str) -> None:
    """Refused at construction, by AccessLog as by NetworkSink; never opened as a file."""
    with pytest.raises(ConfigurationError, match=message.replace("?", r"\?")):
        NetworkSink(url)
    with pytest.raises(ConfigurationError, match=message.replace("?", r"\?")):
        AccessLog(url)


def test_an_unknown_scheme_lists_the_valid_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error names every scheme, and no file named like the URL appears."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError) as raised:
        AccessLog("sylsog://collector:514")
    for scheme in SCHEMES:
        assert f"{scheme}://" in str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_options_belong_to_their_schemes() -> None:
    """A syslog field on tcp://, ssl_context on a plaintext scheme, a bad facility: errors."""
    import ssl

    with pytest.raises(ConfigurationError, match="app_name"):
        NetworkSink("tcp://127.0.0.1:5170", app_name="web")
    with pytest.raises(ConfigurationError, match="facility"):
        NetworkSink("tls://127.0.0.1:5170", facility="local0")
    with pytest.raises(ConfigurationError, match="ssl_context is for tls"):
        NetworkSink("syslog://127.0.0.1", ssl_context=ssl.create_default_context())
    with pytest.raises(ConfigurationError, match="unknown facility 'local9'"):
        NetworkSink("syslog://127.0.0.1", facility="local9")
    with pytest.raises(ConfigurationError, match="unknown severity"):
        NetworkSink("syslog://127.0.0.1", severity=8)
    with pytest.raises(ConfigurationError, match="app_name must be"):
        NetworkSink("syslog://127.0.0.1", app_name="my app")
    with pytest.raises(ConfigurationError, match="max_datagram is for"):
        NetworkSink("syslog://127.0.0.1", max_datagram=4096)
    with pytest.raises(ConfigurationError, match="max_datagram must be"):
        NetworkSink("syslog+udp://127.0.0.1", max_datagram=100)
    with pytest.raises(ConfigurationError, match="max_datagram must be at most 65507"):
        NetworkSink("syslog+udp://127.0.0.1", max_datagram=70000)
    with pytest.raises(
        ConfigurationError, match=r"max_message is for .* not syslog\+udp:// \(max_"
    ):
        NetworkSink("syslog+udp://127.0.0.1", max_message=4096)
    with pytest.raises(ConfigurationError, match=r"max_message is for .* not relp://"):
        NetworkSink("relp://127.0.0.1:2514", max_message=4096)
    with pytest.raises(ConfigurationError, match="max_message must be"):
        NetworkSink("syslog://127.0.0.1", max_message=100)
    with pytest.raises(ConfigurationError, match="retry_max must be"):
        NetworkSink("syslog://127.0.0.1", retry_max=-1)
    with pytest.raises(ConfigurationError, match="retry_initial must be more than 0"):
        NetworkSink("syslog://127.0.0.1", retry_initial=0)
    with pytest.raises(ConfigurationError, match="connect_timeout must be more than 0"):
        NetworkSink("syslog://127.0.0.1", connect_timeout=0)
    NetworkSink("syslog://127.0.0.1", facility=16, severity="warning", app_name="web")


def test_constructing_never_touches_the_network() -> None:
    """A host that cannot be resolved, a port nobody listens on: the log is made at once."""
    with AccessLog("syslog://no-such-host.invalid:514", close_timeout=0) as log:
        assert repr(log) == "<AccessLog syslog://no-such-host.invalid:514 policy=drop open>"


@pytest.mark.parametrize(
    "url", [" syslog://collector:514", "otlp+http://collector:4318\n", "\totlp"]
)
def test_a_url_with_blanks_around_it_is_refused_not_taken_for_a_file(url: str) -> None:
    """Not a file named " syslog://collector:514" in the working directory."""
    with pytest.raises(ConfigurationError, match="holds a space or a control character"):
        AccessLog(url)


def test_an_otlp_endpoint_variable_with_a_newline_is_refused_naming_it() -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318\n"}
    with pytest.raises(ConfigurationError, match=r"OTEL_EXPORTER_OTLP_ENDPOINT .* holds a space"):
        OtlpSink("otlp", environ=environ)
