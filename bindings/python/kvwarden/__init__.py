"""kvwarden: Python bindings (ctypes) for the kvwarden inference engine.

Two APIs share one engine:

- ``kvwarden.Llama``: llama-cpp-python's API (``create_completion``,
  ``create_chat_completion``, ``__call__``; OpenAI-shaped dicts and stream
  chunks). See ``kvwarden.llama``.
- ``kvwarden.Engine``: plain text in and out, tenants, streams you can abort:

    import kvwarden
    with kvwarden.Engine("stories260K.bin", tokenizer_path="tok512.bin") as eng:
        print(eng.generate("Once upon a time", max_tokens=32))
        for piece in eng.stream("The cat", max_tokens=32, stop=["."]):
            print(piece, end="", flush=True)

The shared library is found through $KVWARDEN_LIB, else a copy bundled next
to this module, else the system library path.

All Engine methods are thread-safe; ctypes releases the GIL during every
library call, so threads generate concurrently.

Engines do not survive fork(): in a child process every call raises
ForkedError. With multiprocessing use the "spawn" (or "forkserver") start
method and open the engine in the child.
"""

from __future__ import annotations

import ctypes
import errno
import operator
import os
import re
import threading
from ctypes import byref, c_char, c_char_p, c_float, c_int32, c_size_t, c_uint64, c_void_p
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from . import _lib
from ._lib import lib

__all__ = [
    "Llama", "Engine", "Stream", "KvwardenError", "InvalidArgumentError", "RejectedError",
    "AbortedError", "IsolationError", "NotFoundError", "ClosedError", "ModelLoadError",
    "UnsupportedModelError", "PromptTooLongError",
    "ForkedError", "ModelNotFoundError", "version", "library_path", "BUILTIN_STORIES",
    "BUILTIN_SYNTHETIC", "pull", "LlamaState", "LlamaGrammar", "chat_parse",
    "LlamaPromptLookupDecoding",
]

#: The story model compiled into the library (Karpathy's TinyStories 260K,
#: MIT): a model path that needs no file.
BUILTIN_STORIES = "builtin:stories260K"
#: The random-weight test model (also what ``Engine(None)`` loads).
BUILTIN_SYNTHETIC = "builtin:synthetic"

library_path = _lib.path


def version() -> str:
    """The library's version string."""
    return lib.kvw_version().decode()


class KvwardenError(Exception):
    """Base of every kvwarden error. status is the C kvw_status code."""

    def __init__(self, message: str, status: int = _lib.ERR_INTERNAL):
        super().__init__(message)
        self.status = status


class InvalidArgumentError(KvwardenError, ValueError):
    """Bad input: invalid UTF-8, empty prompt, bad sampling parameters, ..."""

    def __init__(self, message: str, status: int = _lib.ERR_INVALID_ARGUMENT,
                 reason: Optional[str] = None):
        super().__init__(message, status)
        self.reason = reason


class RejectedError(KvwardenError):
    """Admission refused the request (too long, quota, overloaded).

    reason is "too_long", "quota" or "overloaded"; for "too_long", limit is
    the engine's max_context and requested the tokens the request needs."""

    def __init__(self, message: str, status: int = _lib.ERR_REJECTED, reason: Optional[str] = None,
                 limit: int = 0, requested: int = 0, prompt_tokens: int = 0):
        super().__init__(message, status)
        self.reason = reason
        self.limit = limit
        self.requested = requested
        self.prompt_tokens = prompt_tokens


class PromptTooLongError(RejectedError, ValueError):
    """The prompt does not fit in the context (reason "too_long"). A
    ValueError, as llama-cpp-python raises for a prompt longer than the
    context window."""


class AbortedError(KvwardenError):
    """The request was aborted (abort(), an early close, or engine close)."""


class IsolationError(KvwardenError):
    """A KV isolation check failed: an incident, the request was ended."""


class NotFoundError(KvwardenError):
    """Unknown or freed request."""


class ClosedError(KvwardenError):
    """The engine was closed."""


class ModelLoadError(KvwardenError, OSError, ValueError):
    """The model or tokenizer could not be read. An OSError, and a
    ValueError as llama-cpp-python raises for a model it cannot load."""


class UnsupportedModelError(KvwardenError, ValueError):
    """The model file is readable but describes something kvwarden cannot
    run: its architecture, a tensor type, its RoPE scaling type, or a tensor
    missing or unexpected for its architecture (the message names it). A
    ValueError, as llama-cpp-python raises for a model it cannot load."""


class ModelNotFoundError(ModelLoadError, FileNotFoundError):
    """The model or tokenizer file does not exist (a FileNotFoundError, and
    a ValueError as llama-cpp-python raises for a missing model path)."""

    def __init__(self, what: str, path: str):
        KvwardenError.__init__(self, f"{what} not found: {path}", _lib.ERR_IO)
        self.errno = errno.ENOENT
        self.strerror = f"{what} not found"
        self.filename = path

    def __str__(self) -> str:
        return f"{self.strerror}: {self.filename}"


_INT_RANGES = {
    ctypes.c_int32: (-(1 << 31), (1 << 31) - 1),
    ctypes.c_int64: (-(1 << 63), (1 << 63) - 1),
    ctypes.c_uint32: (0, (1 << 32) - 1),
    ctypes.c_uint64: (0, (1 << 64) - 1),
}


def _assign(struct: ctypes.Structure, name: str, value: Any) -> None:
    """Sets a C struct field, refusing what ctypes would silently wrap or
    truncate: out-of-range ints raise ValueError, wrong types TypeError."""
    ctype = dict(struct._fields_)[name]
    if ctype in _INT_RANGES:
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        lo, hi = _INT_RANGES[ctype]
        if not lo <= value <= hi:
            raise ValueError(f"{name}={value} is out of range [{lo}, {hi}]")
    elif ctype in (ctypes.c_float, ctypes.c_double):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, not {type(value).__name__}")
        value = float(value)
    setattr(struct, name, value)


class ForkedError(KvwardenError):
    """Called in a child process after fork(): the library cannot work there
    (its runtime's threads do not survive fork). Use the "spawn" start
    method of multiprocessing and open the engine in the child."""


_ERRORS = {
    _lib.ERR_ABORTED: AbortedError,
    _lib.ERR_ISOLATION: IsolationError,
    _lib.ERR_NOT_FOUND: NotFoundError,
    _lib.ERR_CLOSED: ClosedError,
    _lib.ERR_IO: ModelLoadError,
    _lib.ERR_UNSUPPORTED: UnsupportedModelError,
    _lib.ERR_FORKED: ForkedError,
}


def _error(status: int) -> KvwardenError:
    """The exception for a failed call, from the calling thread's last error.
    Must run on the thread that made the failing call (it does: ctypes calls
    run on the calling Python thread)."""
    msg = (lib.kvw_last_error() or b"").decode("utf-8", "replace")
    if not msg:
        msg = lib.kvw_status_string(status).decode()
    # The C function's name ("kvw_generate: ...") means nothing to a Python
    # caller; the rest of the message names the Python-visible parameter.
    msg = re.sub(r"^kvw_\w+: ", "", msg).replace("params.", "")
    info = _lib.kvw_error_info()
    info.struct_size = ctypes.sizeof(info)
    lib.kvw_last_error_info(byref(info))
    reason = _lib.REJECT_REASONS.get(info.reason) if info.status == status else None
    if status == _lib.ERR_REJECTED:
        cls = PromptTooLongError if reason == "too_long" else RejectedError
        return cls(msg, status, reason, info.limit, info.requested, info.prompt_tokens)
    if status == _lib.ERR_INVALID_ARGUMENT:
        return InvalidArgumentError(msg, status, reason)
    return _ERRORS.get(status, KvwardenError)(msg, status)


def _init(s: Any) -> None:
    """Fills a versioned struct with the library's defaults, cut to this module's size of it."""
    _check(_lib.SIZED_INIT[type(s)](byref(s), ctypes.sizeof(s)))


def _new(cls: Any) -> Any:
    s = cls()
    _init(s)
    return s


def _check(status: int) -> None:
    if status != _lib.OK:
        raise _error(status)


def _seed(seed: Optional[int]) -> int:
    """kvw_request_params.seed for a Python seed (None: no fixed seed)."""
    if seed is None:
        return _lib.SEED_RANDOM
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int or None, not {type(seed).__name__}")
    if not 0 <= seed < _lib.SEED_RANDOM:
        raise InvalidArgumentError(f"seed {seed} is outside [0, 2**64 - 2] (None means no fixed seed)")
    return seed


def _json_call(call: Callable[[Any, int, Any], int]) -> str:
    """Runs a kvw_chat_* call with the size-query protocol."""
    n = c_size_t()
    _check(call(None, 0, byref(n)))
    while True:
        buf = (c_char * (n.value + 1))()
        st = call(buf, n.value + 1, byref(n))
        if st != _lib.ERR_BUFFER_TOO_SMALL:  # tool call IDs are drawn anew
            _check(st)
            return buf.raw[: n.value].decode("utf-8")


def chat_parse(parser: Dict[str, Any], text: str) -> Dict[str, Any]:
    """Reads a chat output as Engine.chat_prepare's parser says: returns the
    assistant message {"role", "content", "reasoning_content"?,
    "tool_calls"?} in OpenAI's shape."""
    import json
    pj = _text(json.dumps(parser), "parser")
    t = _text(text, "text")
    return json.loads(_json_call(lambda buf, size, n: lib.kvw_chat_parse(pj, t, buf, size, n)))


def _text(s: str, what: str) -> bytes:
    if not isinstance(s, str):
        raise TypeError(f"{what} must be str, not {type(s).__name__}")
    # surrogateescape'd or lone surrogates cannot be UTF-8: pass the bytes
    # through so that the library reports invalid UTF-8 precisely.
    b = s.encode("utf-8", "surrogateescape")
    if b"\x00" in b:
        raise InvalidArgumentError(f"{what} contains a NUL character")
    return b


class Stream:
    """Iterator over the text pieces of one request (Engine.stream).

    Closing it before the end (close(), leaving a with block, or garbage
    collection) aborts the request. After the end, result holds the finish
    reason and counts, and prompt_tokens / tokens the token IDs.
    """

    _BUF = 4096

    def __init__(self, engine: "Engine", rid: int):
        self._engine = engine
        self._h = engine._h
        self.id = rid
        self._buf = ctypes.create_string_buffer(self._BUF)
        self._len = c_size_t()
        self._done = c_int32()
        self._open = True
        self.result: Optional[dict] = None
        self.tokens: list[int] = []
        self.prompt_tokens: list[int] = []
        #: With logprobs=True: (token, logprob) per generated token; with
        #: top_logprobs=N, the N most likely (token, logprob) of each step.
        self.logprobs: Optional[List[tuple]] = None
        self.top_logprobs: Optional[List[List[tuple]]] = None
        #: With keep_logits=True: the raw logits of the last step.
        self.logits: Optional[List[float]] = None
        #: With prompt_logprobs=True: (token, logprob) per prompt token after
        #: the first; with top_logprobs=N also the N most likely of each.
        self.prompt_logprobs: Optional[List[tuple]] = None
        self.prompt_top_logprobs: Optional[List[List[tuple]]] = None
        self._want = (False, 0, False)
        self._want_prompt = False
        #: With logprobs=True: the (token, logprob, top) records of the
        #: tokens of the piece next() returned last (top: the top_logprobs
        #: alternatives, [] without them), read as the piece arrives; after
        #: the end, tail_logprobs holds those of tokens that brought no text
        #: (a stop string's), if any.
        self.piece_logprobs: List[tuple] = []
        self.tail_logprobs: List[tuple] = []

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> str:
        if not self._open:
            raise StopIteration
        try:
            return self._next()
        except KeyboardInterrupt:
            # Ctrl-C while waiting: stop the request now rather than when
            # the stream is garbage collected, then let it propagate.
            self.close()
            raise

    def _next(self) -> str:
        while True:
            # A bounded wait keeps Ctrl-C responsive.
            st = lib.kvw_next(self._h, self.id, 100, self._buf, self._BUF, byref(self._len),
                              byref(self._done))
            if st == _lib.ERR_TIMEOUT:
                continue
            if st != _lib.OK:
                err = _error(st)
                self._finish()
                raise err
            piece = self._buf.raw[: self._len.value].decode("utf-8")
            if self._want[0] or self._want[1]:
                # Read before _finish frees the request.
                self.tail_logprobs += self._next_logprobs()
            if piece:
                self.piece_logprobs, self.tail_logprobs = self.tail_logprobs, []
            if self._done.value:
                self._finish()
                if piece:
                    return piece
                raise StopIteration
            if piece:
                return piece

    def _next_logprobs(self) -> List[tuple]:
        """The records of the latest kvw_next (kvw_next_logprobs)."""
        recs = _logprob_list(lambda out, cap, n: lib.kvw_next_logprobs(self._h, self.id, out, cap, n))
        if not self._want[1]:
            return [(t, lp, []) for t, lp in recs]
        return [(t, lp, _logprob_list(lambda out, cap, n, i=i: lib.kvw_next_top_logprobs(
            self._h, self.id, i, out, cap, n))) for i, (t, lp) in enumerate(recs)]

    def _finish(self) -> None:
        if not self._open:
            return
        self._open = False
        res = _lib.kvw_result()
        _init(res)
        if lib.kvw_request_result(self._h, self.id, byref(res)) == _lib.OK:
            self.result = _result_dict(res)
            if res.done:
                self.tokens = _request_tokens(self._h, self.id, _lib.TOKENS_GENERATED)
                self.prompt_tokens = _request_tokens(self._h, self.id, _lib.TOKENS_PROMPT)
                self._collect()
        lib.kvw_request_free(self._h, self.id)

    def _collect(self) -> None:
        want_lp, top, logits = self._want
        if want_lp or top:
            self.logprobs = _logprob_list(lambda out, cap, n: lib.kvw_request_logprobs(
                self._h, self.id, out, cap, n))
            if top:
                self.top_logprobs = [_logprob_list(lambda out, cap, n, i=i: lib.kvw_request_top_logprobs(
                    self._h, self.id, i, out, cap, n)) for i in range(len(self.logprobs))]
        if self._want_prompt:
            self.prompt_logprobs = _logprob_list(lambda out, cap, n: lib.kvw_request_prompt_logprobs(
                self._h, self.id, out, cap, n))
            if top:
                self.prompt_top_logprobs = [_logprob_list(
                    lambda out, cap, n, i=i: lib.kvw_request_prompt_top_logprobs(self._h, self.id, i, out, cap, n))
                    for i in range(len(self.prompt_logprobs))]
        if logits:
            n = c_size_t()
            if lib.kvw_request_logits(self._h, self.id, None, 0, byref(n)) == _lib.OK:
                arr = (ctypes.c_float * max(n.value, 1))()
                if lib.kvw_request_logits(self._h, self.id, arr, n.value, byref(n)) == _lib.OK:
                    self.logits = list(arr[: n.value])

    def abort(self) -> None:
        """Aborts the request; iteration then ends with AbortedError."""
        if self._open:
            _check(lib.kvw_abort(self._h, self.id))

    def close(self) -> None:
        """Stops the request (aborting it if it still runs) and frees it."""
        if self._open:
            self._open = False
            lib.kvw_abort(self._h, self.id)  # no-op if ended; errors irrelevant here
            lib.kvw_request_free(self._h, self.id)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _request_tokens(h, rid: int, which: int) -> list[int]:
    n = c_size_t()
    if lib.kvw_request_tokens(h, rid, which, None, 0, byref(n)) != _lib.OK:
        return []
    arr = (c_int32 * max(n.value, 1))()
    if lib.kvw_request_tokens(h, rid, which, arr, n.value, byref(n)) != _lib.OK:
        return []
    return list(arr[: n.value])


def _logprob_list(call) -> List[tuple]:
    n = c_size_t()
    if call(None, 0, byref(n)) != _lib.OK:
        return []
    arr = (_lib.kvw_token_logprob * max(n.value, 1))()
    if call(arr, n.value, byref(n)) != _lib.OK:
        return []
    return [(e.token, e.logprob) for e in arr[: n.value]]


def _logit_bias(bias: Dict[Any, float]):
    """C arrays of a logit_bias mapping (token ID, or its decimal string as
    OpenAI sends it, to a bias)."""
    if not isinstance(bias, dict):
        raise TypeError(f"logit_bias must be a dict of token ID to bias, not {type(bias).__name__}")
    if len(bias) > _lib.MAX_LOGIT_BIAS:
        raise InvalidArgumentError(f"logit_bias has {len(bias)} entries, at most {_lib.MAX_LOGIT_BIAS}")
    ids, vals = [], []
    for k, v in bias.items():
        try:
            tok = int(k) if isinstance(k, str) else operator.index(k)
        except (TypeError, ValueError):
            raise TypeError(f"logit_bias key {k!r} is not a token ID") from None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"logit_bias[{k!r}] must be a number, not {type(v).__name__}")
        if not -(1 << 31) <= tok < (1 << 31):
            raise InvalidArgumentError(f"logit_bias key {tok} is not a token ID")
        ids.append(tok)
        vals.append(float(v))
    return (c_int32 * len(ids))(*ids), (ctypes.c_float * len(vals))(*vals)


def _tokens_array(tokens: Sequence[int], what: str = "tokens"):
    """A C int32 array of token IDs; non-ints raise TypeError and values
    outside int32 ValueError (the library checks the vocabulary)."""
    if isinstance(tokens, (str, bytes)):
        raise TypeError(f"{what} must be a list of token IDs, not {type(tokens).__name__}")
    ids = list(tokens)
    for i, t in enumerate(ids):
        # Any integer type (numpy's included, as llama-cpp-python's
        # input_ids are numpy arrays), not bool.
        if isinstance(t, bool) or not hasattr(t, "__index__"):
            raise TypeError(f"{what}[{i}] must be an int token ID, not {type(t).__name__}")
        t = ids[i] = operator.index(t)
        if not -(1 << 31) <= t < (1 << 31):
            raise InvalidArgumentError(f"{what}[{i}] = {t} is not a token ID")
    return (c_int32 * max(len(ids), 1))(*ids), len(ids)


def _read_text(call) -> str:
    """A string from a size-query call(buf, size, out_len)."""
    n = c_size_t()
    _check(call(None, 0, byref(n)))
    buf = (c_char * (n.value + 1))()
    _check(call(buf, n.value + 1, byref(n)))
    return buf.raw[: n.value].decode("utf-8", "replace")


class LlamaState:
    """A saved sequence (Llama.save_state / Engine.save_state), as
    llama-cpp-python's LlamaState: input_ids (the tokens), n_tokens,
    llama_state (the sealed bytes: tokens, model fingerprint and MAC) and
    llama_state_size, seed. scores is always None (kvwarden keeps no
    per-token logits). Picklable; load it only into the same model."""

    def __init__(self, input_ids: List[int], scores: Any, n_tokens: int, llama_state: bytes,
                 llama_state_size: int, seed: Optional[int]):
        self.input_ids = input_ids
        self.scores = scores
        self.n_tokens = n_tokens
        self.llama_state = llama_state
        self.llama_state_size = llama_state_size
        self.seed = seed


def pull(ref: str, filename: Optional[str] = None, cache_dir: Optional[str] = None,
         progress: Optional[Callable[[int, int], Any]] = None) -> str:
    """Downloads a GGUF from a Hugging Face hub into kvwarden's cache (as
    `kvwarden pull`: resume, size and SHA-256 checks, HF_ENDPOINT/HF_TOKEN)
    and returns the cached file's path. ref is "owner/repo[:tag-or-file]"
    (or with filename, just "owner/repo"); filename may be a glob pattern
    ("*Q4_K_M.gguf") that must match one file. progress(done, total) is
    called as bytes arrive; returning True from it stops the download
    (AbortedError; it resumes next time). Bad references and patterns that
    match no file (or several) raise InvalidArgumentError (a ValueError);
    network and verification failures ModelLoadError (an OSError)."""
    cb = None
    if progress is not None:
        def trampoline(done, total, _ud, _p=progress):
            try:
                return 1 if _p(int(done), int(total)) is True else 0
            except Exception:  # never let an exception cross into C
                return 1
        cb = _lib.PROGRESS_CALLBACK(trampoline)
    else:
        cb = ctypes.cast(None, _lib.PROGRESS_CALLBACK)
    r = _text(ref, "ref")
    f = None if filename is None else _text(filename, "filename")
    c = None if cache_dir is None else _text(os.fspath(cache_dir), "cache_dir")
    size = 4096
    while True:
        buf = (c_char * size)()
        n = c_size_t()
        st = lib.kvw_pull(r, f, c, cb, None, buf, size, byref(n))
        if st == _lib.ERR_BUFFER_TOO_SMALL:  # the file is cached now; ask again
            size = n.value + 1
            continue
        _check(st)
        return buf.raw[: n.value].decode("utf-8", "surrogateescape")


def _result_dict(r: "_lib.kvw_result") -> dict:
    return {
        "done": bool(r.done),
        "status": lib.kvw_status_string(r.status).decode(),
        "finish_reason": _lib.FINISH_REASONS.get(r.finish_reason),
        "prompt_tokens": r.prompt_tokens,
        "generated_tokens": r.generated_tokens,
        "cached_tokens": r.cached_tokens,
        "ttft_ms": r.ttft_ms,
        "prefill_ms": r.prefill_ms,
        "decode_ms": r.decode_ms,
        "decode_tps": r.decode_tps,
    }


class Engine:
    """One kvwarden engine. Use as a context manager, or call close().

    model_path is a .gguf file, a llama2.c .bin checkpoint (with
    tokenizer_path), BUILTIN_STORIES (a small story model compiled into the
    library), or None for BUILTIN_SYNTHETIC (random weights, for tests); a
    missing file raises ModelNotFoundError, a FileNotFoundError. Keyword arguments
    are the fields of kvw_engine_params (kv_memory_bytes, kv_type ("f16",
    "f32", "q8_0" or "q4_0"), max_context, tenant_quota, page_size, n_threads, zero_on_release,
    spec_type ("none", "ngram" or "draft" with spec_draft_model: speculative decoding, output
    unchanged), spec_draft_max, ...).
    zero_on_release=True scrubs KV bytes in every tier: freed device pages, and
    every host buffer that held them (host-tier copies, compressed or not, when
    dropped; compression and CUDA staging buffers). n_threads is the number of
    compute threads (default: the physical cores); the CPU worker pool is
    shared by all engines of the process, the last one opened sets it. log, if given, is called as
    log(level: int, message: str) from engine threads; it must not raise.
    The environment variable KVWARDEN_WEIGHTS (auto, the default; map;
    recache; copy) chooses how the model file is placed in memory: auto
    puts the weights on 2 MiB pages where that is cheap and safe (decode is
    1.2-1.4x slower per CPU-second on 4 KiB pages) and logs its choice at
    LOG_INFO. It is read when the engine opens (setting os.environ after
    import works); a bad value raises InvalidArgumentError.
    """

    def __init__(self, model_path: Optional[str] = None, tokenizer_path: Optional[str] = None, *,
                 log: Optional[Callable[[int, str], None]] = None, log_level: int = _lib.LOG_WARN,
                 **params: Any) -> None:
        p = _new(_lib.kvw_engine_params)
        if tokenizer_path is not None:
            p.tokenizer_path = _text(str(tokenizer_path), "tokenizer_path")
        for k, v in params.items():
            if k in ("struct_size", "log_callback", "log_user_data", "reserved0", "reserved1") or not hasattr(p, k):
                raise TypeError(f"Engine() got an unexpected keyword argument {k!r}")
            if isinstance(v, str):
                setattr(p, k, _text(v, k))
            else:
                _assign(p, k, v)
        self._log_cb = None
        if log is not None:
            def trampoline(level, msg, _ud, _log=log):
                try:
                    _log(level, msg.decode("utf-8", "replace"))
                except Exception:  # never let an exception cross into C
                    pass
            # Kept alive on self: C may call it until kvw_engine_close returns.
            self._log_cb = _lib.LOG_CALLBACK(trampoline)
            p.log_callback = self._log_cb
            p.log_level = log_level
        for what, path in (("model", model_path), ("tokenizer", tokenizer_path)):
            if path is not None and not str(path).startswith("builtin:") and not os.path.exists(path):
                raise ModelNotFoundError(what, str(path))
        h = c_void_p()
        mp = None if model_path is None else _text(str(model_path), "model_path")
        _check(lib.kvw_engine_open(mp, byref(p), byref(h)))
        self._h = h
        self._closed = False
        self._lock = threading.Lock()

    # -- lifecycle --

    def close(self) -> None:
        """Closes the engine; running streams end with AbortedError (or
        NotFoundError for their later calls). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _check(lib.kvw_engine_close(self._h))
        self._log_cb = None  # no more calls after close returned

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._closed

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not getattr(self, "_closed", True):
                self.close()
        except Exception:
            pass

    # -- requests --

    @staticmethod
    def _params(max_tokens=128, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
                repeat_penalty=1.0, repeat_last_n=0, seed=None, stop=None, tenant=None,
                add_bos=True, parse_special=False, logprobs=False, top_logprobs=0,
                keep_logits=False, grammar=None, json_schema=None, presence_penalty=0.0,
                frequency_penalty=0.0, logit_bias=None, prompt_logprobs=False, keep_tokens=None,
                spec_type=None, spec_draft_max=0, spec_ngram_min=0, spec_ngram_max=0):
        p = _new(_lib.kvw_request_params)
        if max_tokens is None:
            max_tokens = _lib.MAX_TOKENS_UNLIMITED
        for name, value in (("max_tokens", max_tokens), ("temperature", temperature),
                            ("top_k", top_k), ("top_p", top_p), ("min_p", min_p),
                            ("repeat_penalty", repeat_penalty), ("repeat_last_n", repeat_last_n)):
            _assign(p, name, value)
        p.seed = _seed(seed)
        p.no_bos = 0 if add_bos else 1
        # Special-token text ("<|im_start|>") becomes the token only when
        # asked: prompts are untrusted text by default.
        p.parse_special = 1 if parse_special else 0
        p.logprobs = 1 if logprobs else 0
        _assign(p, "top_logprobs", top_logprobs or 0)
        p.keep_logits = 1 if keep_logits else 0
        # Constrained output: GBNF or a JSON Schema (text), compiled by the
        # library at submission.
        if grammar is not None:
            p.grammar = _text(grammar, "grammar")
        if json_schema is not None:
            p.json_schema = _text(json_schema, "json_schema")
        keep = []
        # OpenAI's penalties and logit bias; the library checks the ranges
        # (InvalidArgumentError naming the parameter).
        _assign(p, "presence_penalty", presence_penalty)
        _assign(p, "frequency_penalty", frequency_penalty)
        if logit_bias:
            toks, biases = _logit_bias(logit_bias)
            keep += [toks, biases]
            p.logit_bias_tokens, p.logit_bias, p.n_logit_bias = toks, biases, len(logit_bias)
        p.prompt_logprobs = 1 if prompt_logprobs else 0
        if keep_tokens:
            # Control tokens spelled out in the output (tool-call markup
            # such as "<|python_tag|>"), as chat_prepare lists them.
            if isinstance(keep_tokens, str):
                raise TypeError("keep_tokens must be a list of token texts, not a str")
            texts = [_text(t, "keep_tokens entry") for t in keep_tokens]
            arr = (ctypes.c_char_p * len(texts))(*texts)
            keep.append(arr)
            p.keep_tokens = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
            p.n_keep_tokens = len(texts)
        # Speculative decoding for this request ("ngram" or "none"); None
        # keeps the engine's (Engine(spec_type=...)). Output is unchanged.
        if spec_type is not None:
            p.spec_type = _text(spec_type, "spec_type")
            for name, value in (("spec_draft_max", spec_draft_max), ("spec_ngram_min", spec_ngram_min),
                                ("spec_ngram_max", spec_ngram_max)):
                _assign(p, name, value)
        if tenant is not None:
            p.tenant = _text(tenant, "tenant")
        if stop:
            if isinstance(stop, str):
                stop = [stop]
            arr = (ctypes.c_char_p * len(stop))(*[_text(s, "stop string") for s in stop])
            keep.append(arr)
            p.stop = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
            p.n_stop = len(stop)
        return p, keep

    def generate(self, prompt: str, *, max_tokens: int = 128, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: Optional[int] = None,
                 stop: Optional[Sequence[str]] = None, tenant: Optional[str] = None,
                 **sampling: Any) -> str:
        """Generates a completion of prompt and returns its text (greedy by
        default). sampling takes min_p, repeat_penalty, repeat_last_n,
        add_bos and parse_special (special-token text in prompt becomes the
        token; set it for apply_chat_template's text). seed: any int in
        [0, 2**64 - 2], 0 included, is a fixed seed; None draws one per
        request. Raises RejectedError, AbortedError, IsolationError, ...;
        out-of-range numbers raise ValueError.

        Ctrl-C (KeyboardInterrupt, or any exception raised in this thread
        meanwhile) aborts the request and propagates to the caller."""
        # Built on the stream, not on kvw_generate with a callback: an
        # exception raised inside a ctypes callback is printed and lost,
        # while here it surfaces between bounded waits and the with block
        # aborts and frees the request.
        with self.stream(prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                         top_p=top_p, seed=seed, stop=stop, tenant=tenant, **sampling) as s:
            return "".join(s)

    def stream(self, prompt: Union[str, Sequence[int]], *, max_tokens: Optional[int] = 128,
               temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
               seed: Optional[int] = None, stop: Optional[Sequence[str]] = None,
               tenant: Optional[str] = None, **sampling: Any) -> Stream:
        """Submits prompt and returns a Stream: an iterator of text pieces.
        Closing the iterator early aborts the request.

        prompt is text, or a list of token IDs used exactly as given (no BOS
        added). max_tokens: 0 means the default (128), None or -1 runs
        until the model ends its generation or the context is full.
        sampling also takes logprobs=True (Stream.logprobs), top_logprobs=N
        (Stream.top_logprobs, at most 20) and keep_logits=True
        (Stream.logits, the raw logits of the last step), all read after
        the stream ended; and grammar= (GBNF text) or json_schema= (JSON
        Schema text) to constrain the output (an invalid one raises
        InvalidArgumentError naming the place). OpenAI's presence_penalty
        and frequency_penalty (each in [-2, 2], over the generated tokens)
        and logit_bias ({token ID: bias in [-100, 100]}, -100 bans the
        token) apply too; prompt_logprobs=True records the prompt tokens'
        log-probabilities (Stream.prompt_logprobs, and with top_logprobs
        Stream.prompt_top_logprobs; one forward step per prompt token).
        keep_tokens=[...] (at most 64 texts, e.g. Engine.chat_prepare's
        "keep_tokens") makes those control tokens ("<|python_tag|>",
        "[TOOL_CALLS]") appear in the output as their text instead of
        nothing, so that tool-call markup can be parsed."""
        p, keep = self._params(max_tokens, temperature, top_k, top_p, seed=seed, stop=stop,
                               tenant=tenant, **sampling)
        rid = c_uint64()
        if isinstance(prompt, str):
            st = lib.kvw_submit(self._h, _text(prompt, "prompt"), byref(p), byref(rid))
        else:
            arr, n = _tokens_array(prompt, "prompt")
            st = lib.kvw_submit_tokens(self._h, arr, n, byref(p), byref(rid))
        del keep
        _check(st)
        s = Stream(self, rid.value)
        s._want = (bool(p.logprobs), int(p.top_logprobs), bool(p.keep_logits))
        s._want_prompt = bool(p.prompt_logprobs)
        return s

    # -- chat --

    def apply_chat_template(self, messages: Sequence[Dict[str, Any]],
                            add_generation_prompt: bool = True,
                            template_name: Optional[str] = None) -> str:
        """Renders messages ([{"role": ..., "content": ...}, ...]) with the
        model's chat template (the GGUF's tokenizer.chat_template, the
        engine's chat_template=..., or ChatML when the file has none), as
        Hugging Face's apply_chat_template(tokenize=False) does.
        add_generation_prompt ends with the assistant's turn header;
        template_name picks a named template of the file (e.g. "tool_use").
        Generate from the text with parse_special=True. A template that
        raises (e.g. one refusing a system message) raises
        InvalidArgumentError carrying the template's message."""
        msgs = list(messages)
        arr = (_lib.kvw_chat_message * max(len(msgs), 1))()
        for i, m in enumerate(msgs):
            content = m.get("content")
            if content is None:
                content = ""
            elif not isinstance(content, str):  # OpenAI text parts
                content = "".join(part.get("text", "") for part in content)
            arr[i].role = _text(str(m["role"]), f"messages[{i}].role")
            arr[i].content = _text(content, f"messages[{i}].content")
        name = None if template_name is None else _text(template_name, "template_name")
        n = c_size_t()
        gen = int(bool(add_generation_prompt))
        _check(lib.kvw_chat_apply_template(self._h, arr, len(msgs), gen, name, None, 0, byref(n)))
        while True:
            buf = (c_char * (n.value + 1))()
            st = lib.kvw_chat_apply_template(self._h, arr, len(msgs), gen, name, buf, n.value + 1,
                                             byref(n))
            if st != _lib.ERR_BUFFER_TOO_SMALL:  # a template printing the time may grow
                _check(st)
                return buf.raw[: n.value].decode("utf-8")

    def chat_prepare(self, request: Dict[str, Any]) -> Dict[str, Any]:
        """Renders a chat request with tools (the chat part of an OpenAI
        body: messages, tools, tool_choice, parallel_tool_calls,
        reasoning_format, chat_template_kwargs) into the model's own
        template, as the server does: returns {"prompt", "grammar" (GBNF
        forcing a call for tool_choice "required" or a named function, else
        None), "keep_tokens", "parser"}. Generate from the prompt with
        parse_special=True, then read the output with chat_parse(parser,
        text). Malformed tools, clashing names, a tool_choice naming a
        missing tool raise InvalidArgumentError naming the problem."""
        import json
        req = _text(json.dumps(request, ensure_ascii=False), "request")
        out = _json_call(lambda buf, size, n: lib.kvw_chat_prepare(self._h, req, buf, size, n))
        return json.loads(out)

    # -- tokens --

    def tokenize(self, text: str, add_bos: bool = True, special: bool = False) -> List[int]:
        """Token IDs of text, with BOS first unless add_bos is False.
        special=True turns special-token text ("<|im_start|>") into the
        special token; leave it off for untrusted text."""
        b = _text(text, "text")
        flags = (_lib.TOKENIZE_ADD_BOS if add_bos else 0) | (_lib.TOKENIZE_SPECIAL if special else 0)
        n = c_size_t()
        _check(lib.kvw_tokenize_ex(self._h, b, flags, None, 0, byref(n)))
        arr = (c_int32 * max(n.value, 1))()
        _check(lib.kvw_tokenize_ex(self._h, b, flags, arr, n.value, byref(n)))
        return list(arr[: n.value])

    def embed(self, inputs: Sequence[str], *, pooling: Optional[str] = None, normalize: bool = True,
              dimensions: int = 0, truncate: bool = False, tenant: Optional[str] = None) -> List[List[float]]:
        """Embedding vectors of texts, one per input, in order (kvw_embed).
        pooling is "mean", "cls" or "last" (None: the model's
        <arch>.pooling_type; a generative model without one raises
        InvalidArgumentError unless a pooling is named; per-token vectors,
        pooling none, are embed_tokens()). normalize scales
        each vector to unit L2 norm; dimensions keeps the first values
        (Matryoshka) before that; truncate cuts an input longer than the
        engine takes instead of raising PromptTooLongError."""
        if isinstance(inputs, str):
            raise TypeError("inputs must be a list of str (wrap a single text in a list)")
        texts = [_text(t, f"inputs[{i}]") for i, t in enumerate(inputs)]
        p = _new(_lib.kvw_embed_params)
        names = {None: _lib.POOLING_MODEL, "mean": _lib.POOLING_MEAN, "cls": _lib.POOLING_CLS, "last": _lib.POOLING_LAST}
        if pooling not in names:
            hint = " (per-token vectors: embed_tokens())" if pooling == "none" else ""
            raise InvalidArgumentError(f"pooling {pooling!r} (want None, 'mean', 'cls' or 'last'){hint}")
        p.pooling = names[pooling]
        p.normalize = 1 if normalize else 0
        _assign(p, "dimensions", dimensions)
        p.truncate = 1 if truncate else 0
        if tenant is not None:
            p.tenant = _text(tenant, "tenant")
        arr = (c_char_p * max(len(texts), 1))(*texts)
        n, dim = c_size_t(), c_int32()
        _check(lib.kvw_embed(self._h, arr, len(texts), byref(p), None, 0, byref(n), byref(dim)))
        out = (c_float * max(n.value, 1))()
        _check(lib.kvw_embed(self._h, arr, len(texts), byref(p), out, n.value, byref(n), byref(dim)))
        d = dim.value
        return [list(out[i * d:(i + 1) * d]) for i in range(len(texts))]

    def embed_tokens(self, inputs: Sequence[str], *, normalize: bool = True, dimensions: int = 0,
                     truncate: bool = False, tenant: Optional[str] = None) -> List[List[List[float]]]:
        """Per-token embeddings (pooling none): for each input, one vector
        per token (after BOS/EOS and truncation), each scaled to unit L2
        norm unless normalize is False (kvw_embed_tokens). Works with a
        generative model too; other arguments as embed()."""
        if isinstance(inputs, str):
            raise TypeError("inputs must be a list of str (wrap a single text in a list)")
        texts = [_text(t, f"inputs[{i}]") for i, t in enumerate(inputs)]
        p = _new(_lib.kvw_embed_params)
        p.pooling = _lib.POOLING_NONE
        p.normalize = 1 if normalize else 0
        _assign(p, "dimensions", dimensions)
        p.truncate = 1 if truncate else 0
        if tenant is not None:
            p.tenant = _text(tenant, "tenant")
        arr = (c_char_p * max(len(texts), 1))(*texts)
        n, dim = c_size_t(), c_int32()
        counts = (c_size_t * max(len(texts), 1))()
        _check(lib.kvw_embed_tokens(self._h, arr, len(texts), byref(p), None, 0, byref(n), byref(dim), counts))
        out = (c_float * max(n.value, 1))()
        _check(lib.kvw_embed_tokens(self._h, arr, len(texts), byref(p), out, n.value, byref(n), byref(dim), None))
        d, res, at = dim.value, [], 0
        for i in range(len(texts)):
            res.append([list(out[(at + t) * d:(at + t + 1) * d]) for t in range(counts[i])])
            at += counts[i]
        return res

    def rerank(self, query: str, documents: Sequence[str], *, tenant: Optional[str] = None) -> List[float]:
        """Relevance scores of documents against query, in document order,
        with a cross-encoder (a model with pooling rank), as llama-server's
        /rerank computes them (kvw_rerank)."""
        if isinstance(documents, str):
            raise TypeError("documents must be a list of str")
        q = _text(query, "query")
        docs = [_text(d, f"documents[{i}]") for i, d in enumerate(documents)]
        arr = (c_char_p * max(len(docs), 1))(*docs)
        t = None if tenant is None else _text(tenant, "tenant")
        n = c_size_t()
        _check(lib.kvw_rerank(self._h, q, arr, len(docs), t, None, 0, byref(n)))
        out = (c_float * max(n.value, 1))()
        _check(lib.kvw_rerank(self._h, q, arr, len(docs), t, out, n.value, byref(n)))
        return list(out[: n.value])

    def detokenize(self, tokens: Sequence[int], special: bool = False) -> str:
        """The text of tokens (out-of-vocabulary IDs raise
        InvalidArgumentError). Control tokens (BOS, "<|im_end|>") produce
        nothing unless special is True."""
        arr, n_tok = _tokens_array(tokens)
        flags = _lib.DETOKENIZE_SPECIAL if special else 0
        return _read_text(lambda buf, size, n: lib.kvw_detokenize_ex(self._h, arr, n_tok, flags, buf, size, n))

    @property
    def model_info(self) -> Dict[str, int]:
        """The model's shape: n_embd, n_layer, n_head, n_head_kv,
        n_ctx_train, n_vocab, n_ff."""
        mi = _lib.kvw_model_info()
        _init(mi)
        _check(lib.kvw_model_info_get(self._h, byref(mi)))
        return {name: getattr(mi, name) for name, _ in mi._fields_ if name != "struct_size"}

    @property
    def metadata(self) -> Dict[str, str]:
        """The model's metadata: GGUF key to value as text, every key that
        is not an array (as llama.cpp's llama_model_meta_* and
        llama-cpp-python's Llama.metadata give them)."""
        count = c_int32()
        _check(lib.kvw_model_meta_count(self._h, byref(count)))
        out = {}
        for i in range(count.value):
            k = _read_text(lambda buf, size, n: lib.kvw_model_meta_key_by_index(self._h, i, buf, size, n))
            out[k] = _read_text(lambda buf, size, n: lib.kvw_model_meta_val_by_index(self._h, i, buf, size, n))
        return out

    # -- saved state --

    def save_state(self, tokens: Sequence[int]) -> bytes:
        """Seals tokens (a sequence: prompt and generated tokens) to this
        engine's model. The bytes hold no KV; see load_state."""
        arr, n_tok = _tokens_array(tokens)
        size = c_size_t()
        _check(lib.kvw_state_save(self._h, arr, n_tok, None, 0, byref(size)))
        buf = (ctypes.c_uint8 * max(size.value, 1))()
        _check(lib.kvw_state_save(self._h, arr, n_tok, buf, size.value, byref(size)))
        return bytes(buf[: size.value])

    def load_state(self, state: bytes) -> List[int]:
        """Checks a state save_state made and returns its tokens. Submit
        them (followed by new ones) to continue the sequence: their KV comes
        from the tenant's prefix cache while it holds them, and is computed
        again otherwise. A state of another model, or one that was altered
        or cut short, raises InvalidArgumentError (a ValueError) saying
        which."""
        if not isinstance(state, (bytes, bytearray, memoryview)):
            raise TypeError(f"state must be bytes, not {type(state).__name__}")
        data = bytes(state)
        src = (ctypes.c_uint8 * max(len(data), 1)).from_buffer_copy(data or b"\0")
        n = c_size_t()
        _check(lib.kvw_state_load(self._h, src, len(data), None, 0, byref(n)))
        arr = (c_int32 * max(n.value, 1))()
        _check(lib.kvw_state_load(self._h, src, len(data), arr, n.value, byref(n)))
        return list(arr[: n.value])

    @property
    def max_context(self) -> int:
        """The most tokens (prompt + generated) one request may hold."""
        out = c_int32()
        _check(lib.kvw_engine_max_context(self._h, byref(out)))
        return out.value

    @property
    def vocab(self) -> Dict[str, int]:
        """The vocabulary: {"size", "bos", "eos"}."""
        n, bos, eos = c_int32(), c_int32(), c_int32()
        _check(lib.kvw_vocab_info(self._h, byref(n), byref(bos), byref(eos)))
        return {"size": n.value, "bos": bos.value, "eos": eos.value}

    def stats(self) -> Dict[str, Union[int, float]]:
        """Engine and KV pool metrics (kvw_stats) as a dict."""
        s = _lib.kvw_stats()
        _init(s)
        _check(lib.kvw_engine_stats(self._h, byref(s)))
        return {name: getattr(s, name) for name, _ in s._fields_
                if name not in ("struct_size", "reserved0")}

    def erase_tenant_kv(self, tenant: str) -> Dict[str, int]:
        """Crypto-erases tenant's cached KV (kvw_tenant_erase_kv): rotates the
        tenant's key epoch, so its pages outside the device pool are
        unreadable at once, and drops its prefix-cache pages. Returns what
        was erased: {"key_epoch", "prefix_device_pages", "prefix_host_pages",
        "host_pages", "host_bytes", "disk_files", "disk_bytes"}."""
        r = _lib.kvw_erase_result()
        _init(r)
        _check(lib.kvw_tenant_erase_kv(self._h, _text(tenant, "tenant"), byref(r)))
        return {name: getattr(r, name) for name, _ in r._fields_
                if name not in ("struct_size", "reserved0")}


from .llama import Llama  # noqa: E402  (needs Engine above)
from .grammar import LlamaGrammar  # noqa: E402
from .llama import LlamaPromptLookupDecoding  # noqa: E402
