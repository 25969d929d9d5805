"""Readers of the combined format read every field of boundlog's lines whole.

lnav, goaccess and the ``apachelogs`` parser each read a file of combined lines whose
paths, queries, Referers and User-Agents hold quotes, backslashes, control bytes,
invalid UTF-8 and forged field endings.  Each must give back every field whole, as it
was written (lnav and goaccess show the escapes, which unescape to the bytes sent;
apachelogs unescapes them itself).  lnav ends a quoted field at the first ``"`` even
after a backslash, which is why boundlog writes ``"`` as ``\\x22``.  A reader that is
not installed skips its test; ``make test`` installs lnav and goaccess, or stops.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote_to_bytes

import pytest

from _records import make_record, request_header
from boundlog import Record, unescape
from boundlog.formats._apache import make_format

HOSTILE = [
    b'say "hi"',
    b"back\\slash\\",
    b'\\"',
    b'ends in a quote"',
    b'x" 200 0 "-" "forged',
    b"\\x22 is not a quote",
    b"ctl\x01\x1b[31m\x7f",
    b"tab\there",
    b"cr\rlf\nend",
    b"\xff\xfe",
    b"caf\xc3\xa9",
    b"\xe2\x80\xa8",
    b"%22%5c",
]
READER_TIMEOUT = 60


def hostile_records() -> list[Record]:
    """One record per hostile value, in its path, query, Referer and User-Agent, each
    from a client of its own (goaccess lists at most 10 agents under one host)."""
    return [
        make_record(
            time=1700000000.0 + number,
            client=f"10.0.0.{number + 1}",
            path=b"/r/%d/" % number + value.replace(b"?", b"").replace(b" ", b""),
            query=b"q=" + value.replace(b" ", b""),
            referer=b"http://example.test/" + value,
            user_agent=b"agent " + value,
        )
        for number, value in enumerate(HOSTILE)
    ]


@pytest.fixture
def combined_log(tmp_path: Path) -> Path:
    path = tmp_path / "access.log"
    path.write_bytes(make_format("combined", utc=True).format_batch(hostile_records()))
    return path


def run_reader(command: list[str], home: Path) -> str:
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=READER_TIMEOUT,
        env={**os.environ, "HOME": str(home)},
        check=True,
    )
    return result.stdout


@pytest.mark.skipif(shutil.which("lnav") is None, reason="lnav is not installed")
def test_lnav_reads_every_field_whole(combined_log: Path, tmp_path: Path) -> None:
    """lnav's access_log table has each line's path, query, Referer and User-Agent as written."""
    query = ";SELECT cs_uri_stem, cs_uri_query, cs_referer, cs_user_agent FROM access_log"
    output = run_reader(
        ["lnav", "-n", "-c", query, "-c", ":write-json-to -", str(combined_log)], tmp_path
    )
    rows = json.loads(output)
    expected = [
        (
            record.path,
            record.query,
            request_header(record, b"referer"),
            request_header(record, b"user-agent"),
        )
        for record in hostile_records()
    ]
    read = [
        tuple(
            unescape(row[name].encode("ascii"))
            for name in ("cs_uri_stem", "cs_uri_query", "cs_referer", "cs_user_agent")
        )
        for row in rows
    ]
    assert read == expected


@pytest.mark.skipif(shutil.which("goaccess") is None, reason="goaccess is not installed")
def test_goaccess_reads_every_field_whole(combined_log: Path, tmp_path: Path) -> None:
    """goaccess's report lists each request, Referer and User-Agent as written (goaccess
    percent-decodes requests and agents itself)."""
    report = tmp_path / "report.json"
    run_reader(
        [
            "goaccess", str(combined_log), "--log-format=COMBINED", "--agent-list",
            "--enable-panel=REFERRERS", "-o", str(report),
        ],
        tmp_path,
    )  # fmt: skip
    panels = json.loads(report.read_text())
    assert panels["general"]["valid_requests"] == len(HOSTILE)
    assert panels["general"]["failed_requests"] == 0
    records = hostile_records()

    def unescaped(values: list[str]) -> set[bytes]:
        return {unescape(value.encode("ascii")) for value in values}

    assert unescaped([item["data"] for item in panels["requests"]["data"]]) == {
        unquote_to_bytes(record.path + b"?" + record.query) for record in records
    }
    assert unescaped([item["data"] for item in panels["referrers"]["data"]]) == {
        request_header(record, b"referer") for record in records
    }
    agents = [agent for host in panels["hosts"]["data"] for agent in host["items"]]
    assert unescaped(agents) == {
        unquote_to_bytes(request_header(record, b"user-agent") or b"") for record in records
    }


def test_apachelogs_reads_every_field_whole(combined_log: Path) -> None:
    """The apachelogs parser reads each line and unescapes its fields to the bytes sent."""
    apachelogs = pytest.importorskip("apachelogs")
    parser = apachelogs.LogParser(apachelogs.COMBINED)
    lines = combined_log.read_text("ascii").splitlines()
    for line, record in zip(lines, hostile_records(), strict=True):
        entry = parser.parse(line)
        assert entry.request_line.encode("latin-1") == (
            b"GET " + record.path + b"?" + record.query + b" HTTP/1.1"
        )
        assert entry.headers_in["Referer"].encode("latin-1") == request_header(record, b"referer")
        assert entry.headers_in["User-Agent"].encode("latin-1") == request_header(
            record, b"user-agent"
        )
