# The extender (and, later, the placement manager and node agent) image. Not built in this repository's
# CI (no container engine there); the product is tested by running the same entry point on the host.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY scheduling scheduling
COPY kubeio kubeio
COPY extender extender
COPY placement placement
COPY nodeagent nodeagent
RUN pip install --no-cache-dir .
USER 65534
CMD ["gunicorn", "--config", "python:extender.gunicorn_conf", "extender.wsgi:create()"]
