# The trainer image: the package and its dependencies. The default torch wheel of the
# package index is a CUDA build (what a GPU host wants); for a small CPU-only image pass
# --build-arg TORCH_PIP_ARGS="--index-url <your CPU wheel index>".
FROM python:3.11-slim
ARG TORCH_PIP_ARGS=""
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY envsched_gnn ./envsched_gnn
RUN pip install ${TORCH_PIP_ARGS} torch==2.13.0 && pip install .
CMD ["envsched-gnn", "run"]
