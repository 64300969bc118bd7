"""Where a Kubernetes API server is and how to log in to it: a kubeconfig's context, or the pod's own service
account (in-cluster); the TLS context for it, built once per cluster."""

from __future__ import annotations

import base64
import binascii
import json
import os
import ssl
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchdog.exceptions import UsageError

__all__ = ["SERVICE_ACCOUNT_DIR", "ClusterAccess", "load_access"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = Path("~/.kube/config")

_CONTEXTS: dict[tuple[bytes | None, bytes | None, bytes | None, bool], ssl.SSLContext] = {}
_CONTEXTS_LOCK = threading.Lock()


@dataclass(frozen=True)
class ClusterAccess:
    """An API server and the credentials for it. The token never appears in a repr, a message or a log."""

    server: str  # https://host:port, no trailing slash
    where: str  # what a person reads: the context's name, or "in-cluster"
    ca: bytes | None = field(default=None, repr=False)  # PEM; None: the system's authorities
    token: str | None = field(default=None, repr=False)
    token_file: Path | None = None  # read at each request: a projected service-account token rotates
    client_cert: bytes | None = field(default=None, repr=False)
    client_key: bytes | None = field(default=None, repr=False)
    insecure: bool = False  # insecure-skip-tls-verify
    namespace: str | None = None  # the context's (or the service account's) namespace

    def bearer(self) -> str | None:
        """The bearer token to send now (the file's current content where the token is a file)."""
        if self.token_file is not None:
            try:
                return self.token_file.read_text().strip() or None
            except OSError as exc:
                raise UsageError(
                    f"cannot read the token file {self.token_file}: {exc.strerror or exc}"
                ) from exc
        return self.token

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context for this server, built once per (CA, client certificate) and kept (building one
        costs tens of milliseconds); None for a plain-http server. Blocking: call it in a worker thread."""
        if not self.server.startswith("https:"):
            return None
        key = (self.ca, self.client_cert, self.client_key, self.insecure)
        with _CONTEXTS_LOCK:
            context = _CONTEXTS.get(key)
            if context is None:
                context = _CONTEXTS[key] = self._build_context()
        return context

    def _build_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca.decode() if self.ca else None)
        if self.ca is None:
            context.load_default_certs()
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert is not None and self.client_key is not None:
            # ssl loads a certificate chain only from files: the key lives in a private temporary directory for
            # the moment it is read
            with tempfile.TemporaryDirectory(prefix="watchdog-k8s-") as tmp:
                cert, key = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
                cert.write_bytes(self.client_cert)
                key.touch(mode=0o600)
                key.write_bytes(self.client_key)
                try:
                    context.load_cert_chain(cert, key)
                except ssl.SSLError as exc:
                    raise UsageError(
                        f"{self.where}: the client certificate or key cannot be used: {exc}"
                    ) from exc
        return context


def _named(items: object, name: str, what: str, source: str) -> dict[str, Any]:
    """The entry `name` of a kubeconfig's list of `what`s, with `_dir`: the folder of the file it came from."""
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and item.get("name") == name and isinstance(item.get(what), Mapping):
            return {**item[what], "_dir": item.get("_dir", ".")}
    raise UsageError(f"{source}: no {what} named {name!r}")


def _read_yaml(path: Path) -> Mapping[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read the kubeconfig {path}: {exc.strerror or exc}") from exc
    try:
        data: object = json.loads(text)  # kubectl also writes JSON; YAML needs PyYAML
    except ValueError:
        try:
            import yaml  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415 - only YAML needs it
        except ImportError as exc:
            raise UsageError(
                f"the kubeconfig {path} is YAML, which needs PyYAML: pip install 'llm-launch-watchdog[k8s]'"
            ) from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise UsageError(f"the kubeconfig {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, Mapping):
        raise UsageError(f"the kubeconfig {path} is not a kubeconfig (no mapping at its top)")
    return data


def _merged(paths: list[Path]) -> Mapping[str, Any]:
    """The kubeconfig files merged as kubectl does: the first file that sets a name (or current-context) wins;
    each entry keeps the folder of its file (`_dir`): its relative file names are relative to it."""
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    for path in paths:
        data = _read_yaml(path)
        if "current-context" not in merged and data.get("current-context"):
            merged["current-context"] = data["current-context"]
        for key in ("clusters", "users", "contexts"):
            seen = {item.get("name") for item in merged[key]}
            for item in data.get(key) or []:
                if isinstance(item, Mapping) and item.get("name") not in seen:
                    merged[key].append({**item, "_dir": str(path.parent)})
    return merged


def _data(entry: Mapping[str, Any], key: str, where: str) -> bytes | None:
    """The bytes of `key-data` (base64) or of the file `key` names (relative to the kubeconfig's folder)."""
    if entry.get(f"{key}-data"):
        try:
            return base64.b64decode(str(entry[f"{key}-data"]), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise UsageError(f"{where}: {key}-data is not base64") from exc
    if entry.get(key):
        path = Path(str(entry.get("_dir", "."))) / Path(str(entry[key])).expanduser()
        try:
            return path.read_bytes()
        except OSError as exc:
            raise UsageError(f"{where}: cannot read {key} {path}: {exc.strerror or exc}") from exc
    return None


def _from_kubeconfig(paths: list[Path], context: str | None) -> ClusterAccess:
    config = _merged(paths)
    source = "the kubeconfig " + ":".join(str(p) for p in paths)
    name = context or config.get("current-context")
    if not name:
        raise UsageError(
            f"{source} has no current-context; name one (k8s://CONTEXT/NAMESPACE/POD or context = ...)"
        )
    ctx = _named(config.get("contexts"), str(name), "context", source)
    where = f"context {name}"
    cluster = _named(config.get("clusters"), str(ctx.get("cluster")), "cluster", source)
    user = _named(config.get("users"), str(ctx["user"]), "user", source) if ctx.get("user") else {}
    if user.get("exec") or user.get("auth-provider"):
        plugin = "an exec plugin" if user.get("exec") else "an auth-provider"
        raise UsageError(
            f"{where}: user {ctx.get('user')} logs in through {plugin}, which watchdog does not run; give it a "
            "token (a service account's: kubectl create token NAME) or a client certificate in a kubeconfig"
        )
    if user.get("username") or user.get("password"):
        raise UsageError(f"{where}: basic authentication (username/password) is not supported; use a token")
    server = str(cluster.get("server") or "").rstrip("/")
    if not server.startswith(("https://", "http://")):
        raise UsageError(f"{where}: cluster {ctx.get('cluster')} has no https:// server")
    token_file = user.get("tokenFile")
    return ClusterAccess(
        server=server,
        where=where,
        ca=_data(cluster, "certificate-authority", where),
        token=str(user["token"]) if user.get("token") else None,
        token_file=Path(str(user.get("_dir", "."))) / Path(str(token_file)) if token_file else None,
        client_cert=_data(user, "client-certificate", where),
        client_key=_data(user, "client-key", where),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        namespace=str(ctx["namespace"]) if ctx.get("namespace") else None,
    )


def _in_cluster(root: Path, env: Mapping[str, str]) -> ClusterAccess:
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise UsageError("not in a cluster (KUBERNETES_SERVICE_HOST is not set)")
    if ":" in host:
        host = f"[{host}]"
    try:
        ca = (root / "ca.crt").read_bytes()
    except OSError as exc:
        raise UsageError(f"in-cluster: cannot read {root / 'ca.crt'}: {exc.strerror or exc}") from exc
    try:
        namespace: str | None = (root / "namespace").read_text().strip() or None
    except OSError:
        namespace = None
    return ClusterAccess(
        server=f"https://{host}:{port}",
        where="in-cluster",
        ca=ca,
        token_file=root / "token",
        namespace=namespace,
    )


def load_access(
    context: str | None = None,
    kubeconfig: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    service_account: Path = SERVICE_ACCOUNT_DIR,
) -> ClusterAccess:
    """How to reach the API server, as kubectl would find it: the kubeconfig `kubeconfig` names, else those of
    KUBECONFIG (a `:`-separated list), else ~/.kube/config, with `context` or its current context; with none of
    them and no context named, the pod's service account (in-cluster).

    Raises:
        UsageError: no way to reach a cluster, an unusable kubeconfig, or a login watchdog cannot do (exec
            plugins, auth providers, basic authentication).
    """
    env = os.environ if environ is None else environ
    if kubeconfig:
        paths = [Path(kubeconfig).expanduser()]
    elif env.get("KUBECONFIG"):
        paths = [Path(p).expanduser() for p in env["KUBECONFIG"].split(os.pathsep) if p]
        paths = [p for p in paths if p.exists()] or paths[:1]
    else:
        paths = [DEFAULT_KUBECONFIG.expanduser()]
        if not paths[0].exists() and context is None and env.get("KUBERNETES_SERVICE_HOST"):
            return _in_cluster(service_account, env)
        if not paths[0].exists():
            raise UsageError(
                f"no kubeconfig ({paths[0]} does not exist, KUBECONFIG is not set) and not in a cluster: "
                "give kubeconfig = PATH, or run in a pod with a service account"
            )
    return _from_kubeconfig(paths, context)
