"""What a k8s target names: a pod (or a label selector's pods) of a namespace, a container, a kubeconfig and its
context; its TARGET form `k8s://[CONTEXT/]NAMESPACE/POD[/CONTAINER]` and the path the source reads."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode

from watchdog.exceptions import UsageError

__all__ = ["PodRef", "parse_pod_path", "split_pod_target"]

# DNS-1123: a namespace and a container are labels, a pod's name a subdomain
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_FORMS = "NAMESPACE/POD[/CONTAINER] or NAMESPACE?selector=LABELS[&container=NAME]"


@dataclass(frozen=True)
class PodRef:
    """What a k8s target follows: the pod `pod` (or the newest pod that `selector` matches) of `namespace`,
    its container `container` (None: the pod's first), through `kubeconfig` (None: kubectl's) and `context`."""

    namespace: str
    pod: str | None = None
    selector: str | None = None
    container: str | None = None
    context: str | None = None
    kubeconfig: str | None = None

    @property
    def path(self) -> str:
        """The target's path (`parse_pod_path` reads it back)."""
        base = f"{self.namespace}/{self.pod}" + (f"/{self.container}" if self.container else "")
        query = {}
        if self.selector is not None:
            base = self.namespace
            query["selector"] = self.selector
            if self.container:
                query["container"] = self.container
        if self.kubeconfig:
            query["kubeconfig"] = self.kubeconfig
        return base + (f"?{urlencode(query, quote_via=quote, safe='/=,!')}" if query else "")

    def __str__(self) -> str:
        """What a person reads: `pod ns/name` or `the pods app=vllm of ns`."""
        container = f" (container {self.container})" if self.container else ""
        if self.selector is not None:
            return f"the pods {self.selector} of namespace {self.namespace}{container}"
        return f"pod {self.namespace}/{self.pod}{container}"


def _check(name: str, what: str, path: str) -> str:
    if not _NAME.match(name):
        raise UsageError(f"k8s target {path!r}: {name!r} is not a valid {what} name; expected {_FORMS}")
    return name


def parse_pod_path(path: str, context: str | None = None) -> PodRef:
    """The `PodRef` of a k8s target's path: `NAMESPACE/POD[/CONTAINER]` or
    `NAMESPACE?selector=LABELS[&container=NAME]`, each with an optional `kubeconfig=PATH` in the query.

    Raises:
        UsageError: the path is not of these forms.
    """
    base, _, query = path.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True)) if query else {}
    unknown = set(options) - {"selector", "container", "kubeconfig"}
    if unknown:
        raise UsageError(f"k8s target {path!r}: unknown option {sorted(unknown)[0]!r}; expected {_FORMS}")
    parts = base.split("/")
    kubeconfig = options.get("kubeconfig") or None
    if "selector" in options:
        if len(parts) != 1 or not options["selector"].strip():
            raise UsageError(f"k8s target {path!r}: a selector takes NAMESPACE?selector=LABELS")
        container = options.get("container") or None
        return PodRef(
            namespace=_check(parts[0], "namespace", path),
            selector=options["selector"].strip(),
            container=_check(container, "container", path) if container else None,
            context=context,
            kubeconfig=kubeconfig,
        )
    if "container" in options or len(parts) not in (2, 3):
        raise UsageError(f"k8s target {path!r}: expected {_FORMS}")
    return PodRef(
        namespace=_check(parts[0], "namespace", path),
        pod=_check(parts[1], "pod", path),
        container=_check(parts[2], "container", path) if len(parts) == 3 and parts[2] else None,
        context=context,
        kubeconfig=kubeconfig,
    )


def split_pod_target(text: str) -> tuple[str | None, str]:
    """(context, path) of what follows `k8s://` (or a launch's `pod = ...`): `[CONTEXT/]NAMESPACE/POD[/CONTAINER]`.

    Two parts are NAMESPACE/POD; three NAMESPACE/POD/CONTAINER (what `kubectl logs -n NS POD -c C` names); four
    or more CONTEXT/NAMESPACE/POD/CONTAINER, the context being all before the last three parts (an EKS context
    is an ARN with a slash in it), and an empty CONTAINER the pod's first (`ctx/ns/pod/`). A `?query` (the
    selector form, `kubeconfig=`) is kept with the path.

    Raises:
        UsageError: the text is not of these forms.
    """
    base, mark, query = text.partition("?")
    parts = base.split("/")
    context = None
    if len(parts) >= 4:
        context, parts = "/".join(parts[:-3]), parts[-3:]
        if not context:
            raise UsageError(f"k8s target {text!r}: empty context; expected [CONTEXT/]{_FORMS}")
        if not parts[2]:
            parts = parts[:2]
    path = "/".join(parts) + mark + query
    parse_pod_path(path, context)  # checks it
    return context, path
