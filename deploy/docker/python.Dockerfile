# Stand-in for python:3.11-slim (the PYTHON_IMAGE of the serving Dockerfile), built from
# Debian bookworm's own Python 3.11 by deploy/docker/standins.py. Provides what the serving
# Dockerfile uses of python:3.11-slim: a `python` command, a venv with pip (ensurepip), and
# groupadd/useradd. The base already carries this host's apt sources, CA certificates and
# pip index settings, so `pip install` inside a build reaches the index as the host does.
ARG BASE_IMAGE=nmt-standin/debian:bookworm
FROM ${BASE_IMAGE}
# One layer: the vfs storage driver copies every layer in full.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python-is-python3 \
    && rm -rf /var/lib/apt/lists/* \
    && python --version
ENV LANG=C.UTF-8
CMD ["python3"]
