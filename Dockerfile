# ratatoskr: both planes behind gunicorn. Data lives on the /data volume; the key comes from
# a secret file (RATATOSKR_HEIMDALL_KEY_FILE), never from the image.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    RATATOSKR_HOST=0.0.0.0 \
    RATATOSKR_PORT=8000 \
    RATATOSKR_MEMORY_DB=/data/memory.db \
    RATATOSKR_AFFECT_DB=/data/affect.db \
    PROMETHEUS_MULTIPROC_DIR=/tmp/ratatoskr-metrics

RUN groupadd --system --gid 10001 ratatoskr \
    && useradd --system --uid 10001 --gid ratatoskr --home-dir /app --shell /usr/sbin/nologin ratatoskr

# Built from /src and installed into site-packages; /src is removed, so nothing in the
# working directory shadows the installed package (with its C accelerator).
COPY pyproject.toml setup.py README.md /src/
COPY ratatoskr /src/ratatoskr
# gcc only to build the C accelerators (ratatoskr/memory/_pack.c, _rank.c), then removed again
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install /src \
    && apt-get purge -y --auto-remove gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* /src \
    && python -c "from ratatoskr.memory.vector_pack import ACCELERATED; assert ACCELERATED" \
    && python -c "from ratatoskr.memory.accelerators import RANK as RANK_ACCELERATED; assert RANK_ACCELERATED" \
    && python -c "from ratatoskr.sqlite.replica import litestream_binary; assert litestream_binary()" \
    && mkdir -p /data /backups /tmp/ratatoskr-metrics \
    && chown ratatoskr:ratatoskr /data /backups /tmp/ratatoskr-metrics

WORKDIR /app
COPY deploy ./deploy

USER ratatoskr
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"]

# the same command line tests/server runs: gunicorn master as PID 1's child of python
STOPSIGNAL SIGTERM
CMD ["python", "-m", "ratatoskr", "serve"]
