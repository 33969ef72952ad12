"""The llama-cpp-python-style API: ``Llama``, with OpenAI-shaped results.

    from kvwarden import Llama

    llm = Llama(model_path="stories260K.gguf", n_ctx=512, verbose=False)
    out = llm("Once upon a time", max_tokens=32, stop=["."])
    print(out["choices"][0]["text"], out["usage"])

    chat = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Tell me a story."}])
    print(chat["choices"][0]["message"]["content"])

    for chunk in llm.create_completion("The cat", max_tokens=32, stream=True):
        print(chunk["choices"][0]["text"], end="", flush=True)

Method names, parameters, defaults and result shapes follow
llama-cpp-python (``create_completion``, ``create_chat_completion``,
``__call__``, ``tokenize``, ``detokenize``, ``n_ctx``), so code written for
it runs with only the import and the constructor changed. Parameters that
kvwarden does not implement (logprobs, grammars, mirostat, ...) are accepted
at their neutral default and raise ``NotImplementedError`` when set, rather
than being ignored.

Unlike llama-cpp-python, one ``Llama`` may be used from many threads at
once: the engine batches concurrent requests.
"""

from __future__ import annotations

import os
import random
import sys
import time
import uuid
from typing import Any, Dict, Iterator, List, Literal, Optional, Sequence, TypedDict, Union

from . import _lib
from . import Engine, Stream

__all__ = [
    "Llama",
    "CompletionChoice", "CompletionUsage", "Completion", "CompletionChunk",
    "ChatCompletionMessage", "ChatCompletionChoice", "ChatCompletion",
    "ChatCompletionChunkDelta", "ChatCompletionChunkChoice", "ChatCompletionChunk",
    "CHAT_STOP",
]

FinishReason = Optional[Literal["stop", "length"]]


class CompletionUsage(TypedDict):
    """Token counts of one request, as OpenAI reports them."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class CompletionChoice(TypedDict):
    """One choice of a text completion (kvwarden always returns one)."""

    text: str
    index: int
    logprobs: None
    finish_reason: FinishReason


class Completion(TypedDict):
    """The result of ``create_completion`` (OpenAI's ``text_completion``)."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: List[CompletionChoice]
    usage: CompletionUsage


class CompletionChunk(TypedDict):
    """One streamed piece of a text completion; the last one carries the
    finish reason (and ``usage``)."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: List[CompletionChoice]


class ChatCompletionMessage(TypedDict):
    """The assistant's reply."""

    role: Literal["assistant"]
    content: str


class ChatCompletionChoice(TypedDict):
    """One choice of a chat completion."""

    index: int
    message: ChatCompletionMessage
    logprobs: None
    finish_reason: FinishReason


class ChatCompletion(TypedDict):
    """The result of ``create_chat_completion`` (OpenAI's
    ``chat.completion``)."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: List[ChatCompletionChoice]
    usage: CompletionUsage


class ChatCompletionChunkDelta(TypedDict, total=False):
    """What a chat chunk adds: the role (first chunk) or content."""

    role: Literal["assistant"]
    content: str


class ChatCompletionChunkChoice(TypedDict):
    """One choice of a streamed chat chunk."""

    index: int
    delta: ChatCompletionChunkDelta
    logprobs: None
    finish_reason: FinishReason


class ChatCompletionChunk(TypedDict):
    """One streamed piece of a chat completion (OpenAI's
    ``chat.completion.chunk``)."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: List[ChatCompletionChunkChoice]


Message = Dict[str, Any]

#: The stop string the fixed chat format adds, so that a model that goes on
#: to write the next user turn stops there (the server does the same).
CHAT_STOP = "\n\nUser:"

_ROLES = ("system", "developer", "user", "assistant", "tool")

# Sampling parameters llama-cpp-python has and kvwarden does not implement,
# with the value that means "off". Any other value raises NotImplementedError.
_NEUTRAL = {
    "suffix": None,
    "logprobs": None,
    "top_logprobs": None,
    "typical_p": 1.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "tfs_z": 1.0,
    "mirostat_mode": 0,
    "mirostat_tau": 5.0,
    "mirostat_eta": 0.1,
    "stopping_criteria": None,
    "logits_processor": None,
    "grammar": None,
    "logit_bias": None,
    "response_format": None,
    "tools": None,
    "tool_choice": None,
    "functions": None,
    "function_call": None,
}


def _unsupported(given: Dict[str, Any]) -> None:
    for name, value in given.items():
        if name not in _NEUTRAL:
            raise TypeError(f"unexpected keyword argument {name!r}")
        neutral = _NEUTRAL[name]
        if value is None or value == neutral:
            continue
        if name == "logprobs" and value is False:
            continue
        raise NotImplementedError(f"{name}={value!r} is not supported by kvwarden "
                                  f"(leave it at {neutral!r})")


def _message_text(i: int, content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise ValueError(f"messages[{i}].content[{j}]: only text parts are supported")
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise TypeError(f"messages[{i}].content must be a string, a list of text parts or None")


def format_chat(messages: Sequence[Message]) -> str:
    """Renders messages in kvwarden's fixed chat format, the one the server
    uses when it applies no model template: ``"<Role>: <content>\\n\\n"``
    per message (``developer`` counts as system), then ``"Assistant:"``.
    Generation should stop at ``CHAT_STOP``."""
    if not messages:
        raise ValueError("messages must hold at least one message")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TypeError(f"messages[{i}] must be a dict with 'role' and 'content'")
        role = m.get("role")
        if role not in _ROLES:
            raise ValueError(f"messages[{i}].role {role!r}: want one of {', '.join(_ROLES)}")
        if role == "developer":
            role = "system"
        out.append(f"{role.capitalize()}: {_message_text(i, m.get('content'))}\n\n")
    out.append("Assistant:")
    return "".join(out)


class Llama:
    """A model loaded into a kvwarden engine, with llama-cpp-python's API.

    Args:
        model_path: a ``.gguf`` file, a llama2.c ``.bin`` checkpoint (give
            ``tokenizer_path`` too), or ``"builtin:stories260K"`` (the small
            story model compiled into the library). A missing file raises
            ``FileNotFoundError``.
        n_ctx: most tokens (prompt + completion) one request may hold;
            0 = the model's context, bounded by the KV pool.
        n_threads: CPU threads for the forward pass (None = the library's
            default, the number of physical cores).
        n_gpu_layers: None (default) uses a GPU when one is present; 0 runs
            on the CPU; any other value asks for the GPU ("auto" device).
            kvwarden runs the whole model on one device, so partial offload
            is not available.
        seed: base seed for sampling; None (or -1, or llama.cpp's
            0xFFFFFFFF) draws a fresh seed per request. With a seed, the
            sequence of outputs is reproducible run to run.
        verbose: print the engine's log lines (info and above) to stderr.
        tokenizer_path: tokenizer of a llama2.c checkpoint.
        chat_format: only None (the fixed format, see ``format_chat``) is
            supported.
        **engine_params: fields of the C ``kvw_engine_params``
            (kv_memory_bytes, page_size, tenant_quota, ...).
    """

    def __init__(self, model_path: str, *, n_ctx: int = 0, n_threads: Optional[int] = None,
                 n_gpu_layers: Optional[int] = None, seed: Optional[int] = None,
                 verbose: bool = True, tokenizer_path: Optional[str] = None,
                 chat_format: Optional[str] = None, **engine_params: Any) -> None:
        if not isinstance(model_path, (str, os.PathLike)):
            raise TypeError("model_path must be a path (str), e.g. 'model.gguf' or 'builtin:stories260K'")
        if chat_format is not None:
            raise NotImplementedError(f"chat_format={chat_format!r} is not supported: kvwarden "
                                      "uses the model's own template or its fixed format")
        for name in ("n_ctx",):
            if not isinstance(n_ctx, int) or isinstance(n_ctx, bool) or n_ctx < 0:
                raise ValueError(f"{name} must be an int >= 0, got {n_ctx!r}")
        params: Dict[str, Any] = dict(engine_params)
        if n_ctx:
            params["max_context"] = n_ctx
        if n_threads is not None:
            if not hasattr(_lib.kvw_engine_params, "n_threads"):
                raise NotImplementedError("n_threads is not supported by this libkvwarden")
            params["n_threads"] = n_threads
        if n_gpu_layers is not None and "device" not in params:
            params["device"] = "cpu" if n_gpu_layers == 0 else "auto"
        log = None
        if verbose:
            def log(level: int, msg: str) -> None:
                print(msg, file=sys.stderr, flush=True)
        self.model_path = os.fspath(model_path)
        self.verbose = verbose
        self._engine = Engine(self.model_path, tokenizer_path=tokenizer_path, log=log,
                              log_level=_lib.LOG_INFO, **params)
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise TypeError(f"seed must be an int or None, not {type(seed).__name__}")
        if seed in (None, -1, 0xFFFFFFFF):
            self._rng = random.Random()
        else:
            self._rng = random.Random(seed)

    # -- lifecycle --

    @property
    def engine(self) -> Engine:
        """The underlying ``kvwarden.Engine`` (generate/stream, stats, ...)."""
        return self._engine

    def close(self) -> None:
        """Closes the engine. Idempotent."""
        self._engine.close()

    def __enter__(self) -> "Llama":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- model facts --

    def n_ctx(self) -> int:
        """The most tokens one request may hold."""
        return self._engine.max_context

    def n_vocab(self) -> int:
        """The vocabulary size."""
        return int(self._engine.vocab["size"])

    def token_bos(self) -> int:
        """The beginning-of-sequence token."""
        return int(self._engine.vocab["bos"])

    def token_eos(self) -> int:
        """The end-of-sequence token."""
        return int(self._engine.vocab["eos"])

    def tokenize(self, text: Union[bytes, str], add_bos: bool = True,
                 special: bool = False) -> List[int]:
        """Token IDs of text (UTF-8 bytes, as llama-cpp-python takes, or
        str). ``special`` is accepted for compatibility."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        return self._engine.tokenize(text, add_bos=add_bos)

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        """The UTF-8 bytes of tokens (as llama-cpp-python returns them)."""
        return self._engine.detokenize(list(tokens)).encode("utf-8")

    # -- completions --

    def _seed(self, seed: Optional[int]) -> int:
        if seed is not None and seed not in (-1, 0xFFFFFFFF):
            if not isinstance(seed, int) or isinstance(seed, bool):
                raise TypeError(f"seed must be an int or None, not {type(seed).__name__}")
            return seed
        # Fixed seeds drawn from the Llama's own generator.
        return self._rng.getrandbits(63) | 1

    def _start(self, prompt: str, max_tokens: Optional[int], temperature: float, top_p: float,
               min_p: float, top_k: int, repeat_penalty: float, seed: Optional[int],
               stop: Union[None, str, Sequence[str]], parse_special: bool = False) -> Stream:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be str, not {type(prompt).__name__}")
        if max_tokens is None or (isinstance(max_tokens, int) and not isinstance(max_tokens, bool)
                                  and max_tokens <= 0):
            # llama-cpp-python: None or <= 0 means "up to the context".
            max_tokens = max(1, self.n_ctx() - len(self._engine.tokenize(prompt)))
        if stop is None:
            stop = []
        elif isinstance(stop, str):
            stop = [stop]
        return self._engine.stream(prompt, max_tokens=max_tokens, temperature=temperature,
                                   top_k=top_k, top_p=top_p, min_p=min_p,
                                   repeat_penalty=repeat_penalty, seed=self._seed(seed),
                                   stop=[s for s in stop if s] or None,
                                   parse_special=parse_special)

    @staticmethod
    def _usage(s: Stream) -> CompletionUsage:
        r = s.result or {}
        p, c = int(r.get("prompt_tokens", 0)), int(r.get("generated_tokens", 0))
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    @staticmethod
    def _finish(s: Stream) -> FinishReason:
        reason = (s.result or {}).get("finish_reason")
        return "length" if reason == "length" else "stop"

    def create_completion(self, prompt: str, suffix: Optional[str] = None,
                          max_tokens: Optional[int] = 16, temperature: float = 0.8,
                          top_p: float = 0.95, min_p: float = 0.05, typical_p: float = 1.0,
                          logprobs: Optional[int] = None, echo: bool = False,
                          stop: Union[None, str, List[str]] = [],
                          frequency_penalty: float = 0.0, presence_penalty: float = 0.0,
                          repeat_penalty: float = 1.0, top_k: int = 40, stream: bool = False,
                          seed: Optional[int] = None, model: Optional[str] = None,
                          **unsupported: Any) -> Union[Completion, Iterator[CompletionChunk]]:
        """Completes prompt; returns an OpenAI ``text_completion`` dict, or
        with ``stream=True`` an iterator of chunks (the last one has the
        finish reason and ``usage``). Defaults are llama-cpp-python's.

        Raises ``kvwarden.RejectedError`` when the prompt does not fit,
        ``ValueError`` for bad parameters, ``NotImplementedError`` for
        parameters kvwarden does not implement (suffix, logprobs, ...)."""
        _unsupported({"suffix": suffix, "logprobs": logprobs, "typical_p": typical_p,
                      "frequency_penalty": frequency_penalty,
                      "presence_penalty": presence_penalty, **unsupported})
        s = self._start(prompt, max_tokens, temperature, top_p, min_p, top_k, repeat_penalty,
                        seed, stop)
        meta = {"id": f"cmpl-{uuid.uuid4()}", "object": "text_completion",
                "created": int(time.time()), "model": model or self.model_path}
        if stream:
            return self._completion_chunks(s, meta, prompt if echo else "")
        with s:
            text = "".join(s)
        if echo:
            text = prompt + text
        return {**meta, "choices": [{"text": text, "index": 0, "logprobs": None,  # type: ignore[typeddict-item]
                                     "finish_reason": self._finish(s)}],
                "usage": self._usage(s)}

    def _completion_chunks(self, s: Stream, meta: Dict[str, Any],
                           echo: str) -> Iterator[CompletionChunk]:
        with s:
            if echo:
                yield {**meta, "choices": [{"text": echo, "index": 0, "logprobs": None,  # type: ignore[misc]
                                            "finish_reason": None}]}
            for piece in s:
                yield {**meta, "choices": [{"text": piece, "index": 0, "logprobs": None,  # type: ignore[misc]
                                            "finish_reason": None}]}
        yield {**meta, "choices": [{"text": "", "index": 0, "logprobs": None,  # type: ignore[misc]
                                    "finish_reason": self._finish(s)}],
               "usage": self._usage(s)}

    def __call__(self, prompt: str, *args: Any, **kwargs: Any
                 ) -> Union[Completion, Iterator[CompletionChunk]]:
        """Same as ``create_completion``."""
        return self.create_completion(prompt, *args, **kwargs)

    def _chat_prompt(self, messages: Sequence[Message]) -> "tuple[str, List[str], bool]":
        # The model's own chat template when the library can render it
        # (Engine.apply_chat_template); kvwarden's fixed format otherwise.
        # A render holds special-token text that must become tokens.
        apply = getattr(self._engine, "apply_chat_template", None)
        if apply is not None:
            format_chat(messages)  # the same checks of roles and content
            return apply(list(messages), add_generation_prompt=True), [], True
        return format_chat(messages), [CHAT_STOP], False

    def create_chat_completion(self, messages: List[Message], temperature: float = 0.2,
                               top_p: float = 0.95, top_k: int = 40, min_p: float = 0.05,
                               stream: bool = False, stop: Union[None, str, List[str]] = [],
                               seed: Optional[int] = None, max_tokens: Optional[int] = None,
                               repeat_penalty: float = 1.0, model: Optional[str] = None,
                               **unsupported: Any
                               ) -> Union[ChatCompletion, Iterator[ChatCompletionChunk]]:
        """Answers a conversation; returns an OpenAI ``chat.completion``
        dict, or with ``stream=True`` an iterator of
        ``chat.completion.chunk`` dicts (role first, then content, then one
        with the finish reason and ``usage``). messages are
        ``{"role": ..., "content": ...}`` dicts (system, developer, user,
        assistant, tool). ``max_tokens=None`` runs up to the context.

        Raises as ``create_completion``; tools, functions and
        response_format raise ``NotImplementedError``."""
        _unsupported(unsupported)
        prompt, extra_stop, special = self._chat_prompt(messages)
        if stop is None:
            stop = []
        elif isinstance(stop, str):
            stop = [stop]
        s = self._start(prompt, max_tokens, temperature, top_p, min_p, top_k, repeat_penalty,
                        seed, list(stop) + extra_stop, parse_special=special)
        meta = {"id": f"chatcmpl-{uuid.uuid4()}", "object": "chat.completion",
                "created": int(time.time()), "model": model or self.model_path}
        if stream:
            return self._chat_chunks(s, {**meta, "object": "chat.completion.chunk"})
        with s:
            text = "".join(s)
        return {**meta, "choices": [{"index": 0,  # type: ignore[typeddict-item]
                                     "message": {"role": "assistant", "content": text.lstrip(" ")},
                                     "logprobs": None, "finish_reason": self._finish(s)}],
                "usage": self._usage(s)}

    def _chat_chunks(self, s: Stream, meta: Dict[str, Any]) -> Iterator[ChatCompletionChunk]:
        with s:
            yield {**meta, "choices": [{"index": 0, "delta": {"role": "assistant"},  # type: ignore[misc]
                                        "logprobs": None, "finish_reason": None}]}
            first = True
            for piece in s:
                if first:
                    # The fixed format ends with "Assistant:"; the model's
                    # leading space is not part of the answer (as in the
                    # non-streamed reply).
                    piece = piece.lstrip(" ")
                    if not piece:
                        continue
                    first = False
                yield {**meta, "choices": [{"index": 0, "delta": {"content": piece},  # type: ignore[misc]
                                            "logprobs": None, "finish_reason": None}]}
        yield {**meta, "choices": [{"index": 0, "delta": {}, "logprobs": None,  # type: ignore[misc]
                                    "finish_reason": self._finish(s)}],
               "usage": self._usage(s)}
