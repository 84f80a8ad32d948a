# Stand-in for prom/prometheus (PROMETHEUS_IMAGE of docker-compose.yml), built from Debian
# bookworm's prometheus package (2.42) by deploy/docker/standins.py. Laid out like the real
# image: config at /etc/prometheus/prometheus.yml, data in the /prometheus volume owned by
# nobody, the binary as ENTRYPOINT so compose's `command:` passes only flags.
ARG BASE_IMAGE=nmt-standin/debian:bookworm
FROM ${BASE_IMAGE}
# Only the binary (it links libc alone): the package's dependencies are the web UI's
# JavaScript libraries, 220 MB of them, and the deployment uses the HTTP API (Grafana,
# the tests), not the UI.
WORKDIR /tmp/prometheus-deb
RUN apt-get update \
    && apt-get download prometheus \
    && dpkg-deb -x prometheus_*.deb . \
    && install -m 0755 usr/bin/prometheus /usr/bin/ \
    && cd / && rm -rf /tmp/prometheus-deb /var/lib/apt/lists/* \
    && mkdir -p /prometheus /etc/prometheus \
    && chown nobody:nogroup /prometheus \
    && prometheus --version
USER nobody
WORKDIR /prometheus
EXPOSE 9090
VOLUME ["/prometheus"]
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
