# syntax=docker/dockerfile:1
# One image for every gharc process: the controller (`gharc controller`), the listener pods
# the controller creates from its own image (`gharc listener`) and the legacy webhook
# server (`gharc webhook-server`). The charts run it as uid 1001 with a read-only root
# filesystem: bytecode is compiled at build time and nothing writes outside /tmp.
#
# entrypoints: gharc controller, gharc listener, gharc webhook-server
#
# Supply chain: the base is pinned by tag and by digest (the multi-platform index), every
# Python package comes from requirements.lock with its hashes checked (--require-hashes)
# and gharc itself is installed with --no-deps, so nothing unlocked gets in. The build
# writes a CycloneDX SBOM of those packages to /opt/gharc/sbom.cdx.json (scripts/sbom.py).
# To move the base: pick the new tag, read its index digest with
#   docker buildx imagetools inspect python:<tag> --format '{{json .Manifest.Digest}}'
# and change both parts below together.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/gharc
COPY requirements.lock ./
RUN /opt/gharc/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY scripts/sbom.py ./scripts/sbom.py
COPY gharc ./gharc
RUN /opt/gharc/bin/pip install --no-deps --no-build-isolation . \
 && /opt/gharc/bin/pip check \
 && /opt/gharc/bin/python scripts/sbom.py requirements.lock > /opt/gharc/sbom.cdx.json \
 && /opt/gharc/bin/python -m compileall -q /opt/gharc \
 && /opt/gharc/bin/gharc controller --help >/dev/null \
 && /opt/gharc/bin/gharc listener --help >/dev/null

FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --system --gid 1001 gharc \
 && useradd --system --uid 1001 --gid 1001 --home-dir /tmp --no-create-home \
      --shell /usr/sbin/nologin gharc
ENV PATH=/opt/gharc/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
WORKDIR /tmp
ENTRYPOINT ["gharc"]
CMD ["controller"]

# `docker build --target sim`: the product plus the test world (fake GitHub, kubelet and
# runner simulators: the top-level `testworld` package, never in the wheel), for the
# simulated runner pods of the test world only.
FROM runtime AS sim
COPY --from=build /opt/gharc /opt/gharc
COPY testworld /opt/testworld/testworld
ENV PYTHONPATH=/opt/testworld
USER 1001:1001

# The default target: what users run.
FROM runtime
COPY --from=build /opt/gharc /opt/gharc
RUN gharc controller --help >/dev/null \
 && gharc listener --help >/dev/null \
 && gharc webhook-server --help >/dev/null
USER 1001:1001
