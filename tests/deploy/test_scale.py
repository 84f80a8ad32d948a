"""Scale-out: two ``nmt-serve`` processes behind nginx configured from
deploy/nginx/nginx.conf (grpc_pass over HTTP/2); every RPC succeeds and both replicas
serve some of them."""

from __future__ import annotations

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
    replicas = [start_serve(processes, f"replica-{i}", tiny_bundle.repo) for i in (1, 2)]
    lb_port = free_port()
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    conf = prefix / "nginx.conf"
    backends = [port for _, port, _ in replicas]
    conf.write_text(local_nginx_conf(NGINX_CONF.read_text(), backends, lb_port, prefix))
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
    for child, _, _ in replicas:
        assert child.alive(), child.log()
    assert processes.stop(nginx) == 0
    for child, _, _ in replicas:
        assert processes.stop(child) == 0, child.log()
