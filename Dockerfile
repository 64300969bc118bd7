# watchdog: the daemon (`watchdog run`) in a container, with the config and keys mounted read-only.
# Step by step: docs/operations.md ("Docker"). The bind mount below needs BuildKit (Docker >= 23's default).
#
#   docker build -t watchdog .
#   docker run -d --name watchdog --init --stop-timeout 30 -p 127.0.0.1:9469:9469 \
#     -v /etc/llm-launch-watchdog:/etc/llm-launch-watchdog:ro -v watchdog-state:/var/lib/llm-launch-watchdog watchdog
# The base by exact version (Python and Debian release), so that a rebuild gets the same interpreter; add
# `@sha256:<digest>` to pin its bytes too (`docker buildx imagetools inspect python:3.11.15-slim-bookworm`).
FROM python:3.11.15-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# A fixed uid/gid (10001), so that the keys mounted from the host can be given to it (chgrp 10001, 0640).
RUN groupadd --system --gid 10001 llm-launch-watchdog \
 && useradd --system --uid 10001 --gid llm-launch-watchdog --home-dir /var/lib/llm-launch-watchdog \
      --no-create-home --shell /usr/sbin/nologin llm-launch-watchdog \
 && install -d -o llm-launch-watchdog -g llm-launch-watchdog -m 0700 /var/lib/llm-launch-watchdog \
 && install -d -o root -g llm-launch-watchdog -m 0750 /etc/llm-launch-watchdog

# The project from the build context (.dockerignore lets in only what pyproject.toml builds the wheel from,
# and constraints.txt), mounted for this step only: no source layer, no pip cache, the build backend gone with
# pip's build env. The dependencies at the exact versions of constraints.txt, which CI tests.
# No compiler, no SSH client: asyncssh is pure Python and reads ~/.ssh/config itself; the dependencies
# come as binary wheels.
RUN --mount=type=bind,target=/src,rw \
    pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
      --constraint /src/constraints.txt /src

# SQLite state, outbox and history: a named volume keeps them across container upgrades.
VOLUME ["/var/lib/llm-launch-watchdog"]
WORKDIR /var/lib/llm-launch-watchdog
# By number (the user llm-launch-watchdog above), so that Kubernetes' runAsNonRoot can check it and the host
# sees the same ids (hadolint DL3066).
USER 10001:10001

# The config's [daemon] listen must be "0.0.0.0:9469" for a published port to reach the daemon.
EXPOSE 9469
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:9469/healthz', timeout=4).status != 200)"]

# docker stop sends SIGTERM: graceful (a second one exits at once); `docker kill -s HUP` reloads the config.
STOPSIGNAL SIGTERM
ENTRYPOINT ["watchdog"]
CMD ["run", "--config", "/etc/llm-launch-watchdog/config.toml"]
