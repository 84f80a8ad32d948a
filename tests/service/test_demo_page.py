"""The HTTP API's demo page (``GET /``, ``service/static/index.html``): served whole, loads
nothing from elsewhere, calls only routes that exist, and its script, run in node, builds
requests the real server accepts and draws the attention the real server sends."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from service.httpapi import PAGE, ROUTES
from tests.service.test_httpapi import call

NODE = shutil.which("node") or shutil.which("nodejs")


@pytest.fixture(scope="module")
def server(server_factory):
    return server_factory(server={"http_port": 0})


def script() -> str:
    (body,) = re.findall(r"<script>(.*?)</script>", PAGE.read_text(), re.S)
    return body


def run_page(expression: str):
    """``expression`` evaluated in node after the page's script (no DOM: its start is not
    called), as JSON."""
    assert NODE, "node is needed (make apt installs nodejs)"
    program = (
        "const vm = require('vm'); const context = {}; vm.createContext(context);"
        f"vm.runInContext({json.dumps(script())}, context);"
        f"process.stdout.write(JSON.stringify(vm.runInContext({json.dumps(expression)}, context)));"
    )
    done = subprocess.run([NODE, "-e", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_page_is_served_whole_and_self_contained(server):
    status, headers, data = call(server.http_port, "GET", "/")
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    assert data == PAGE.read_bytes()
    page = data.decode()
    # nothing from the network: no absolute URL anywhere, no external script or style
    assert not re.search(r"https?://|//[a-z]", page, re.I), re.search(r"https?://\S+", page)
    assert "<script src" not in page and "<link" not in page
    # every route it fetches exists, with the verb it uses
    fetched = re.findall(r'fetch\("([^"]+)"(, \{\s*method: "(\w+)")?', page)
    assert {path for path, _, _ in fetched} == {"/v1/translate", "/v1/models"}
    for path, _, verb in fetched:
        assert (verb or "GET", path) in ROUTES


def test_its_requests_are_accepted_and_its_heatmap_reads_the_servers_attention(server, tiny_bundle):
    text = f"  {tiny_bundle.sentences[2]} \n\n{tiny_bundle.sentences[3]}\n"
    request = run_page(f"translateRequest({json.dumps(text)}, 'tiny', '3', '9')")
    assert request["texts"] == [tiny_bundle.sentences[2].strip(), tiny_bundle.sentences[3]]
    assert request["options"]["beam_size"] == 3 and request["options"]["n_best"] == 3
    status, _, data = call(server.http_port, "POST", "/v1/translate", request)
    assert status == 200, data
    reply = json.loads(data)
    matrix = reply["translations"][0]["hypotheses"][0]["attention"]
    rows = run_page(f"attentionRows({json.dumps(matrix)})")
    assert len(rows) == matrix["rows"] and all(len(r["cells"]) == matrix["cols"] for r in rows)
    flat = [c["value"] for r in rows for c in r["cells"]]
    assert flat == pytest.approx(matrix["values"])
    for r, token in zip(rows, matrix["target_tokens"], strict=True):
        assert r["label"] == (token.replace("\u2581", " ").strip() or token)
        assert sum(c["value"] for c in r["cells"]) == pytest.approx(1.0, abs=1e-3)
        assert all(0 <= c["shade"] <= 1 for c in r["cells"])


def test_page_functions_on_edge_cases(server):
    assert run_page("translateRequest(' \\n ', 'm', 'x', '-2')") == {
        "texts": [],
        "model": "m",
        "options": {"beam_size": 1, "n_best": 1, "return_scores": True, "return_attention": True},
    }
    assert run_page("attentionRows(undefined)") == []
    assert run_page("attentionRows({rows: 0, cols: 3, values: []})") == []
    # NaN and out-of-range weights are drawn clipped, never as an invalid colour
    rows = run_page("attentionRows({rows: 1, cols: 3, values: ['NaN', 1.5, -1]})")
    assert [c["shade"] for c in rows[0]["cells"]] == [0, 1, 0]
    assert run_page("shown('\\u2581Hola')") == "Hola" and run_page("shown('\\u2581')") == "\u2581"
    # the error line of a real refusal
    status, _, data = call(
        server.http_port, "POST", "/v1/translate", {"texts": ["a"], "model": "x"}
    )
    line = run_page(f"errorLine({status}, {data.decode()})")
    assert line.startswith("INVALID_ARGUMENT (HTTP 400): unknown model 'x'")
    assert run_page("errorLine(502, null)") == "HTTP 502"
    # a translation the length limit cut says so, as the server marks it
    status, _, data = call(
        server.http_port,
        "POST",
        "/v1/translate",
        {"texts": ["A house."], "options": {"max_length": 2}},
    )
    hypothesis = json.loads(data)["translations"][0]["hypotheses"][0]
    assert run_page(f"finishNote({json.dumps(hypothesis)})") == " (cut at the length limit)"
    assert run_page("finishNote({finish_reason: 'FINISH_REASON_EOS'})") == ""
