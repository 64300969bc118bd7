"""What the twenty-ninth round's public logs of the llama.cpp family (LM Studio's runtime, a llama.cpp fork) and of
Python servers the profiles do not know (TabbyAPI, Xinference) showed (issue 30, helper i30-cases29b), read from the
engines' and libraries' own source and pinned on the real log that showed it (tests/fixtures/corpus/llamacpp and
other)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.core.envelope import parse

# lmstudio-bug-tracker#2153 (2026-07): --fit cannot measure the MTP draft ('requires ctx_other'), says so, loads on
_LMSTUDIO_FIT = (
    "llamacpp-2026-lmstudio-0.4.19-mtp-draft-ctx-other-e-line-normal-during-fitting-loading-cut-lmstudio2153"
)
# scrya-com/rotorquant#9 (2026): the fit's dry run meets an unknown architecture, catches it, the real load begins
_FIT_RETRY = (
    "llamacpp-2026-rotorquant-fork-fit-unknown-architecture-gemma4-then-reload-metadata-cut-rotorquant9"
)
# theroyallab/tabbyAPI#392 (2025-10): a chat request answered 500, Uvicorn's ASGI traceback behind TabbyAPI's prefix
_TABBY_ASGI = "other-2025-tabbyapi-exl3-tool-call-chat-500-asgi-exception-traceback-served-on-cut-tabbyapi392"
# xorbitsai/inference#2925 (2025-02): the REST API's ERROR line with xoscar's relayed message, a cut traceback
_XOSCAR = (
    "other-2025-xinference-restful-api-launch-model-backendcompilerfailed-init-typeerror-xoscar-cut-issue2925"
)


def test_a_draft_whose_memory_fit_cannot_measure_is_survived() -> None:
    """--fit measures a draft model's memory first; an MTP assistant's context needs its target's and fails ('...
    requires ctx_other to be set (this warning is normal during memory fitting)'), which common/fit.cpp catches and
    llama-server says at W level ('[spec] failed to measure draft model memory: ...'): the load goes on.
    lmstudio-bug-tracker#2153 was a crash at the end of its crop."""
    out = _verdict("llamacpp", _LMSTUDIO_FIT)
    assert (out["state"], out["phase"]) == ("loading_weights", "loading_weights")


def test_the_fits_dry_run_loader_error_is_not_the_launchs_end() -> None:
    """--fit (2026, on by default) loads the model in a dry run first: its 'error loading model ... unknown model
    architecture' and 'llama_model_load_from_file_impl: failed to load model' are caught ('llama_params_fit:
    encountered an error while trying to fit params ...', 'fitting params to free memory took ...') and the real load
    begins. rotorquant#9 was a crash at the dry run's first error line."""
    out = _verdict("llamacpp", _FIT_RETRY)
    assert (out["state"], out["phase"]) == ("loading_weights", "loading_weights")


def test_a_level_prefix_keeps_the_messages_own_indent() -> None:
    """Uvicorn's level prefix has a fixed width (uvicorn/logging.py: 'ERROR:' padded to column 10): blanks past it are
    the message's own, a traceback line's indent where a server prints each line of an exception behind it
    (TabbyAPI)."""
    line = '2025-10-24 12:03:54.003 ERROR:      File "/x/uvicorn/middleware/proxy_headers.py", line 60, in __call__'
    assert parse(line).content.startswith('  File "/x/uvicorn/')
    assert parse("2025-10-24 12:03:53.998 INFO:     127.0.0.1:45888 - x").content.startswith("127.0.0.1")


def test_uvicorns_asgi_error_behind_a_servers_prefix_is_a_request_error() -> None:
    """Uvicorn catches what a request raises in run_asgi ('Exception in ASGI application') and answers it 500: with the
    frames' indent kept and the frame line wrapped at the blank before its function ('..., line 409, in' / 'run_asgi')
    joined, tabbyAPI#392's traceback is a request's, not a crash: the server serves."""
    out = _verdict("other", _TABBY_ASGI)
    assert (out["state"], out["phase"]) == ("ready", "ready")


def test_xoscars_relayed_message_is_the_cause_of_a_cut_launch_traceback() -> None:
    """xoscar relays an actor's exception with str() '[address=A, pid=N] <its message>' (backends/message.pyx
    _AsCauseBase), which Xinference's REST API logs before the traceback (restful_api.py launch_model,
    logger.error(str(e), exc_info=True)): that message is the cause, not 'a traceback cut before its exception'.
    xinference#2925."""
    found = _error(_verdict("other", _XOSCAR))
    assert (
        "BackendCompilerFailed.__init__() missing 1 required positional argument: 'inner_exception'"
        in str(found["summary"])
    )


def test_backend_compiler_failed_places_the_crash_in_torch_compile() -> None:
    """torch._dynamo raises BackendCompilerFailed only around torch.compile's backend (output_graph.py
    call_user_compiler): a launch that fails with it was compiling (capturing_graphs). xinference#2925 said
    starting."""
    out = _verdict("other", _XOSCAR)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
