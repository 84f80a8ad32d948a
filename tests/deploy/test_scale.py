"""Scale-out: two ``nmt-serve`` processes behind nginx configured from
deploy/nginx/nginx.conf (grpc_pass over HTTP/2, proxy_pass for the HTTP/JSON API); every
call succeeds and both replicas serve some of them, over each protocol."""

from __future__ import annotations

import http.client
import json
import re
import shutil

from nmt_api.nmt.v1 import translator_pb2 as pb
from tests.deploy.helpers import (
    NGINX_CONF,
    free_port,
    is_serving,
    local_nginx_conf,
    scrape,
    start_serve,
    wait_until,
)
from tests.service.server_helpers import TIMEOUT, stub_for

REQUESTS = 20


def test_nginx_spreads_grpc_requests_over_two_replicas(tiny_bundle, processes, tmp_path):
    assert shutil.which("nginx"), "nginx is not on PATH (make apt)"
    http_ports = [free_port(), free_port()]
    replicas = [
        start_serve(processes, f"replica-{i}", tiny_bundle.repo, "--http-port", str(http))
        for i, http in zip((1, 2), http_ports, strict=True)
    ]
    lb_port, lb_http = free_port(), free_port()
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    conf = prefix / "nginx.conf"
    backends = [port for _, port, _ in replicas]
    conf.write_text(
        local_nginx_conf(
            NGINX_CONF.read_text(),
            backends,
            lb_port,
            prefix,
            http_backends=http_ports,
            http_listen=lb_http,
        )
    )
    nginx = processes.start(
        "nginx", ["nginx", "-c", str(conf), "-p", str(prefix), "-g", "daemon off;"]
    )
    ready = wait_until(lambda: not nginx.alive() or is_serving(lb_port), timeout=30)
    assert ready and nginx.alive(), nginx.log() + (prefix / "error.log").read_text()

    channel, stub = stub_for(lb_port)
    replies = []
    with channel:
        for i in range(REQUESTS):
            text = tiny_bundle.sentences[1 + i % 10]
            reply = stub.Translate(pb.TranslateRequest(texts=[text]), timeout=TIMEOUT)
            replies.append(reply)
    assert all(r.translations[0].hypotheses[0].text for r in replies)
    assert {r.model for r in replies} == {"tiny"}

    served = [
        scrape(metrics).value("nmt_requests_total", method="Translate", code="OK")
        for _, _, metrics in replicas
    ]
    assert sum(served) == REQUESTS, served
    assert all(n > 0 for n in served), f"one replica got no request: {served}"
    access = (prefix / "access.log").read_text()
    assert access.count("grpc_status=0") >= REQUESTS
    # calls that sent no id are logged under the one the translator made up (its gRPC
    # trailer), the key of its own log lines (helper-81's audit: nginx logged "-")
    rids = re.findall(r"/nmt\.v1\.Translator/.* grpc_status=0 .* rid=(\S+)$", access, re.M)
    assert len(rids) >= REQUESTS and all(re.fullmatch(r"[0-9a-f]{32}", r) for r in rids), rids

    # the HTTP/JSON API through the same balancer: every call answered, both replicas used
    for i in range(REQUESTS):
        conn = http.client.HTTPConnection("127.0.0.1", lb_http, timeout=TIMEOUT)
        body = json.dumps({"texts": [tiny_bundle.sentences[1 + i % 10]]})
        conn.request("POST", "/v1/translate", body=body, headers={"X-Request-Id": f"h{i}"})
        response = conn.getresponse()
        reply = json.loads(response.read())
        conn.close()
        assert response.status == 200, reply
        assert response.getheader("X-Request-Id") == f"h{i}"
        assert reply["translations"][0]["hypotheses"][0]["text"]
    after = [
        scrape(metrics).value("nmt_requests_total", method="Translate", code="OK")
        for _, _, metrics in replicas
    ]
    assert sum(after) == 2 * REQUESTS, after
    assert all(a > b for a, b in zip(after, served, strict=True)), (served, after)
    # an HTTP call without an id: logged under the X-Request-Id the translator answered
    conn = http.client.HTTPConnection("127.0.0.1", lb_http, timeout=TIMEOUT)
    conn.request("POST", "/v1/translate", body=json.dumps({"texts": ["Hi."]}))
    made_up = conn.getresponse().getheader("X-Request-Id")
    conn.close()
    assert wait_until(lambda: f"rid={made_up}\n" in (prefix / "access.log").read_text(), 10)
    assert "rid=h3\n" in (prefix / "access.log").read_text()
    for child, _, _ in replicas:
        assert child.alive(), child.log()
    assert processes.stop(nginx) == 0
    for child, _, _ in replicas:
        assert processes.stop(child) == 0, child.log()
