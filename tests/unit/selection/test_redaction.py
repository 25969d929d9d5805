"""Query redaction: listed parameters' values never reach a line, in any format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _examples import examples
from _records import make_record
from boundlog import DEFAULT_REDACTED_QUERY, AccessLog, Record
from boundlog.record._headers import REDACTED, HeaderReader
from boundlog.selection._redaction import QueryRedaction

DEFAULT = QueryRedaction(DEFAULT_REDACTED_QUERY)


@pytest.mark.parametrize(
    ("query", "logged"),
    [
        (b"token=abc", b"token=[redacted]"),
        (b"page=2&password=hunter2&sort=asc", b"page=2&password=[redacted]&sort=asc"),
        (b"PASSWORD=x&Access_Token=y", b"PASSWORD=[redacted]&Access_Token=[redacted]"),
        # Percent-encoded names are what the application decodes them to.
        (b"pass%77ord=x", b"pass%77ord=[redacted]"),
        (b"%74%6F%6B%65%6E=x", b"%74%6F%6B%65%6E=[redacted]"),
        (b"api%5Fkey=x", b"api%5Fkey=[redacted]"),
        (b"a=1;token=t;b=2", b"a=1;token=[redacted];b=2"),
        (b"token=a&token=b", b"token=[redacted]&token=[redacted]"),
        (b"X-Amz-Signature=abc&X-Amz-Date=1", b"X-Amz-Signature=[redacted]&X-Amz-Date=1"),
        # Names nested in brackets, as PHP, Rails and qs send forms, plain or escaped.
        (b"password[]=x&password[]=y", b"password[]=[redacted]&password[]=[redacted]"),
        (b"user[name]=ann&user[password]=x", b"user[name]=ann&user[password]=[redacted]"),
        (b"a[b][Token]=x&a[0]=1", b"a[b][Token]=[redacted]&a[0]=1"),
        (b"password[0]=x", b"password[0]=[redacted]"),
        (b"user%5Bpassword%5D=x", b"user%5Bpassword%5D=[redacted]"),
        (
            b"user[passwords]=x&tokens[]=y&filter[status]=z",
            b"user[passwords]=x&tokens[]=y&filter[status]=z",
        ),
        # The value's own '=' and escapes go with it.
        (b"token=a=b%20c&x=1", b"token=[redacted]&x=1"),
        # Not listed, or no value to hide: unchanged.
        (b"key=name&code=FR&session=1", b"key=name&code=FR&session=1"),
        (b"tokens=1&my_token=2&token", b"tokens=1&my_token=2&token"),
        (b"token=", b"token="),
        (b"q=token%3Dabc", b"q=token%3Dabc"),
        (b"q=a%20b&x=password", b"q=a%20b&x=password"),
        (b"", b""),
    ],
)
def test_listed_parameters_are_redacted(query: bytes, logged: bytes) -> None:
    """Values of listed names (any case, percent-encoded or not) become ``[redacted]``."""
    batch = [make_record(query=query)]
    DEFAULT(batch)
    assert Record._make(batch[0]).query == logged


def test_custom_names_replace_the_default_list() -> None:
    """``redact_query`` names the parameters; the default names are then not redacted."""
    batch = [make_record(query=b"key=k&token=t&SessionID=s")]
    QueryRedaction(["key", "sessionid"])(batch)
    assert Record._make(batch[0]).query == b"key=[redacted]&token=t&SessionID=[redacted]"


def test_a_batch_without_candidates_is_left_as_it_is() -> None:
    """Records whose query holds no listed name are the very same objects afterwards."""
    batch = [make_record(query=b"page=%d&q=a%%20b" % i) for i in range(100)] + [
        make_record(query=b"")
    ]
    before = list(batch)
    DEFAULT(batch)
    assert all(after is record for after, record in zip(batch, before, strict=True))


def test_only_the_records_that_need_it_are_rewritten() -> None:
    """In a batch with one secret, the other records are untouched."""
    batch = [make_record(query=b"a=1"), make_record(query=b"token=x"), make_record(query=b"b=2")]
    first, _, last = batch
    DEFAULT(batch)
    assert batch[0] is first
    assert batch[2] is last
    assert Record._make(batch[1]).query == b"token=[redacted]"


SECRET = st.binary(min_size=1).filter(lambda value: not {*b"&;"} & {*value})


@settings(max_examples=examples(300), deadline=None)
@given(
    name=st.sampled_from(DEFAULT_REDACTED_QUERY),
    secret=SECRET,
    prefix=st.lists(st.sampled_from([b"a=1", b"q=x%20y", b"", b"z"]), max_size=3),
    encode=st.booleans(),
    upper=st.booleans(),
)
def test_a_listed_value_never_survives(
    name: str, secret: bytes, prefix: list[bytes], encode: bool, upper: bool
) -> None:
    """Whatever the value, and however the name is spelt, the secret is gone."""
    raw = name.upper().encode() if upper else name.encode()
    if encode:
        raw = b"%%%02X" % raw[0] + raw[1:]
    query = b"&".join([*prefix, raw + b"=" + secret])
    batch = [make_record(query=query)]
    DEFAULT(batch)
    assert Record._make(batch[0]).query == b"&".join([*prefix, raw + b"=[redacted]"])


@pytest.mark.parametrize("log_format", ["common", "combined", "json"])
def test_every_format_logs_the_redacted_query(tmp_path: Path, log_format: str) -> None:
    """The rewrite happens before formatting, so every format shows the same query."""
    path = tmp_path / "access.log"
    with AccessLog(str(path), log_format) as log:
        log.submit(make_record(path=b"/login", query=b"user=ann&password=hunter2"))
    line = path.read_bytes()
    assert b"hunter2" not in line
    if log_format == "json":
        assert json.loads(line)["query"] == "user=ann&password=[redacted]"
    else:
        assert b'"GET /login?user=ann&password=[redacted] HTTP/1.1"' in line
    assert log.stats().filtered == 0


def test_redact_query_empty_turns_redaction_off(tmp_path: Path) -> None:
    """``redact_query=()`` logs the query exactly as it came."""
    path = tmp_path / "access.log"
    with AccessLog(str(path), "common", redact_query=()) as log:
        log.submit(make_record(query=b"token=visible"))
    assert b"?token=visible " in path.read_bytes()


def test_sensitive_headers_stay_masked_next_to_the_query() -> None:
    """Headers are masked by the header reader; the query by the rewrite: both together."""
    record = make_record(query=b"token=t", request_headers=[(b"Authorization", b"Bearer t")])
    batch = [record]
    DEFAULT(batch)
    assert HeaderReader(["authorization"]).values(Record._make(batch[0]).request_headers) == (
        REDACTED,
    )
    assert Record._make(batch[0]).query == b"token=" + REDACTED


@settings(max_examples=examples(300), deadline=None)
@given(
    name=st.sampled_from(DEFAULT_REDACTED_QUERY),
    secret=SECRET,
    outer=st.lists(st.sampled_from([b"user", b"a", b"0", b""]), max_size=2),
    inner=st.lists(st.sampled_from([b"", b"0", b"x"]), max_size=2),
    escape=st.booleans(),
)
def test_a_listed_name_in_brackets_never_leaks(
    name: str, secret: bytes, outer: list[bytes], inner: list[bytes], escape: bool
) -> None:
    """``user[password]``, ``password[]``, ``a[b][token][0]``: the secret is gone."""
    parts = [*outer, name.encode(), *inner]
    raw = parts[0] + b"".join(b"[" + part + b"]" for part in parts[1:])
    if escape:
        raw = raw.replace(b"[", b"%5B").replace(b"]", b"%5D")
    batch = [make_record(query=b"q=1&" + raw + b"=" + secret)]
    DEFAULT(batch)
    assert Record._make(batch[0]).query == b"q=1&" + raw + b"=[redacted]"


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "query",
    [
        pytest.param(b"%" * 262144, id="escapes"),
        pytest.param(b"a" + b"%a" * 131072, id="escaped-name-without-value"),
        pytest.param(b"a" + b"[token" * 43690, id="unclosed-brackets"),
        pytest.param(b"a" + b"[x]" * 87381 + b"=1", id="brackets"),
    ],
)
def test_a_hostile_query_costs_linear_work(query: bytes) -> None:
    """Queries built to make a backtracking search quadratic (hours for these 256 KiB),
    next to a secret in the same batch so that every query is searched, take one pass:
    the guard only catches a hang, the work takes milliseconds."""
    batch = [make_record(query=b"token=1"), make_record(query=query)]
    DEFAULT(batch)
    assert [Record._make(record).query for record in batch] == [b"token=[redacted]", query]
