# syntax=docker/dockerfile:1
# One image for every gharc process: the controller (`gharc controller`), the listener pods
# the controller creates from its own image (`gharc listener`) and the legacy webhook
# server (`gharc webhook-server`). The charts run it as uid 1001 with a read-only root
# filesystem: bytecode is compiled at build time and nothing writes outside /tmp.
#
# entrypoints: gharc controller, gharc listener, gharc webhook-server
#
# The base is pinned to a full patch tag; for reproducible builds pin its digest as well:
#   docker buildx imagetools inspect python:3.11.14-slim-bookworm
# and use PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:<digest>.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/gharc
COPY pyproject.toml README.md ./
COPY gharc ./gharc
RUN /opt/gharc/bin/pip install . \
 && /opt/gharc/bin/python -m compileall -q /opt/gharc \
 && /opt/gharc/bin/gharc controller --help >/dev/null \
 && /opt/gharc/bin/gharc listener --help >/dev/null

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 1001 gharc \
 && useradd --system --uid 1001 --gid 1001 --home-dir /tmp --no-create-home \
      --shell /usr/sbin/nologin gharc
COPY --from=build /opt/gharc /opt/gharc
ENV PATH=/opt/gharc/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER 1001:1001
WORKDIR /tmp
ENTRYPOINT ["gharc"]
CMD ["controller"]
