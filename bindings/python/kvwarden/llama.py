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
it runs with only the import changed: the constructor takes
llama-cpp-python's arguments, prompts may be text or token lists, and
``metadata``, ``n_embd``, ``save_state``/``load_state``, ``reset``,
``from_pretrained``, ``chat_format`` and ``logprobs`` work as there.
Sampling parameters kvwarden does not implement (mirostat,
frequency/presence penalties, ...) are accepted at their neutral default
and raise ``NotImplementedError`` when set, rather than being ignored.

Unlike llama-cpp-python, one ``Llama`` may be used from many threads at
once: the engine batches concurrent requests.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
import uuid
import warnings
from typing import Any, Callable, Dict, Iterator, List, Literal, Optional, Sequence, TypedDict, Union

from . import _lib
from . import chat_formats as _chat_formats
from . import Engine, LlamaState, Stream, chat_parse, pull
from .grammar import LlamaGrammar, grammar_for_response_format

# Fields of kvw_engine_params a Llama passes through to its Engine.
_ENGINE_FIELDS = frozenset(name for name, _ in _lib.kvw_engine_params._fields_
                           if name not in ("struct_size", "log_callback", "log_user_data",
                                           "reserved0", "reserved1", "log_level", "tokenizer_path"))


def _progress_printer() -> Callable[[int, int], None]:
    last = [-1]

    def show(done: int, total: int) -> None:
        pct = int(done * 100 / total) if total else -1
        if pct != last[0]:
            last[0] = pct
            what = f"{pct}%" if total else f"{done >> 20} MiB"
            print(f"\rdownloading: {what}", end="" if pct != 100 else "\n", file=sys.stderr, flush=True)
    return show

__all__ = [
    "Llama",
    "CompletionChoice", "CompletionUsage", "Completion", "CompletionChunk",
    "ChatCompletionMessage", "ChatCompletionChoice", "ChatCompletion",
    "ChatCompletionChunkDelta", "ChatCompletionChunkChoice", "ChatCompletionChunk",
    "CHAT_STOP", "LlamaState", "KvwardenWarning", "LlamaGrammar",
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
    "typical_p": 1.0,
    "tfs_z": 1.0,
    "mirostat_mode": 0,
    "mirostat_tau": 5.0,
    "mirostat_eta": 0.1,
    "stopping_criteria": None,
    "logits_processor": None,
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


_warned: set = set()


class KvwardenWarning(UserWarning):
    """A llama-cpp-python argument that means nothing to kvwarden was
    given; it is ignored (said once per argument and process)."""


def _warn_once(name: str, why: str) -> None:
    if name in _warned:
        return
    _warned.add(name)
    warnings.warn(f"Llama(): {name} is ignored by kvwarden: {why}", KvwardenWarning, stacklevel=3)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# llama-cpp-python's constructor arguments with no meaning for kvwarden:
# name -> (the default, why it is ignored). Another value warns once.
_IGNORED = {
    "n_ubatch": (512, "the engine sizes its own steps (max_batch_tokens, see n_batch)"),
    "split_mode": (1, "kvwarden runs the model on one device"),
    "tensor_split": (None, "kvwarden runs the model on one device"),
    "use_mmap": (True, "kvwarden always maps the model file"),
    "use_mlock": (False, "kvwarden does not lock the model in RAM"),
    "offload_kqv": (True, "the KV cache lives on the model's device"),
    "flash_attn": (False, "kvwarden's attention kernels are its own"),
    "op_offload": (None, "kvwarden runs every operation on the model's device"),
    "swa_full": (None, "kvwarden keeps the full KV of every layer"),
    "no_perf": (False, "timings are always measured (Stream.result)"),
    "logits_all": (False, "logprobs need no extra setting in kvwarden"),
    "numa": (False, "kvwarden does not set a NUMA policy"),
    "spm_infill": (False, "kvwarden has no infill mode"),
    "lora_scale": (1.0, "LoRA adapters are not supported"),
    "local_dir_use_symlinks": ("auto", ""),
}

# Arguments that change what the model computes and kvwarden cannot do:
# name -> the value that means "off". Another value raises
# NotImplementedError naming it.
_REFUSED = {
    "vocab_only": False,
    "kv_overrides": None,
    "rope_scaling_type": -1,
    "attention_type": -1,
    "rope_freq_base": 0.0,
    "rope_freq_scale": 0.0,
    "yarn_ext_factor": -1.0,
    "yarn_attn_factor": 1.0,
    "yarn_beta_fast": 32.0,
    "yarn_beta_slow": 1.0,
    "yarn_orig_ctx": 0,
    "lora_base": None,
    "lora_path": None,
    "chat_handler": None,
    "tokenizer": None,
}

_REFUSED_WHY = {
    "rope_freq_base": "the engine uses the model's RoPE base",
    "rope_freq_scale": "the engine uses the model's RoPE scaling",
    "rope_scaling_type": "the engine uses the model's RoPE scaling",
    "lora_path": "LoRA adapters are not supported",
    "lora_base": "LoRA adapters are not supported",
    "vocab_only": "the engine always loads the weights",
    "kv_overrides": "model metadata cannot be overridden",
    "chat_handler": "use chat_format, or the model's own template",
    "tokenizer": "the engine uses the model's own tokenizer",
}

# llama.cpp's pooling_type values (LLAMA_POOLING_TYPE_*) -> kvwarden's
# pooling names; -1 (unspecified) takes the model's.
_POOLING = {-1: None, 0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}

# GGML types of llama.cpp's type_k/type_v: the KV cache types kvwarden has
# (GGML_TYPE_F32 0, F16 1, Q4_0 2, Q8_0 8).
_KV_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 8: "q8_0"}


class LlamaPromptLookupDecoding:
    """Speculative decoding by prompt lookup, as llama-cpp-python's
    ``llama_cpp.llama_speculative.LlamaPromptLookupDecoding``: pass it as
    ``Llama(..., draft_model=LlamaPromptLookupDecoding(num_pred_tokens=10))``.

    Drafts are the tokens that followed an earlier occurrence (in the prompt
    or the output) of the sequence's last 1 to max_ngram_size tokens; the
    engine verifies up to num_pred_tokens of them in one forward step. It
    runs inside the engine (``spec_type="ngram"``), so the output is the
    same as without it (greedy output identical) and repetitive text comes
    faster. llama-cpp-python's object of the same name is accepted too.
    """

    def __init__(self, max_ngram_size: int = 2, num_pred_tokens: int = 10) -> None:
        for name, v, hi in (("max_ngram_size", max_ngram_size, 16), ("num_pred_tokens", num_pred_tokens, 64)):
            if not _is_int(v) or not 1 <= v <= hi:
                raise ValueError(f"LlamaPromptLookupDecoding: {name} must be an int in 1..{hi}, got {v!r}")
        self.max_ngram_size = max_ngram_size
        self.num_pred_tokens = num_pred_tokens

    def engine_params(self) -> Dict[str, Any]:
        """The kvw_engine_params fields it stands for."""
        return {"spec_type": "ngram", "spec_draft_max": self.num_pred_tokens,
                "spec_ngram_min": 1, "spec_ngram_max": self.max_ngram_size}

    def __repr__(self) -> str:
        return f"LlamaPromptLookupDecoding(max_ngram_size={self.max_ngram_size}, num_pred_tokens={self.num_pred_tokens})"


def _draft_params(draft_model: Any) -> Dict[str, Any]:
    """Engine parameters for Llama's draft_model: prompt lookup (ours, or
    llama-cpp-python's class of that name); any other draft model is a
    Python object that kvwarden's engine cannot call, refused by name."""
    if type(draft_model).__name__ == "LlamaPromptLookupDecoding" and not isinstance(draft_model, LlamaPromptLookupDecoding):
        draft_model = LlamaPromptLookupDecoding(getattr(draft_model, "max_ngram_size", 2),
                                                getattr(draft_model, "num_pred_tokens", 10))
    if isinstance(draft_model, LlamaPromptLookupDecoding):
        return draft_model.engine_params()
    raise NotImplementedError(f"Llama(): draft_model={draft_model!r} is not supported by kvwarden (speculation "
                              "runs inside the engine, which cannot call a Python object: use "
                              "kvwarden.LlamaPromptLookupDecoding(), or a draft model file with "
                              "spec_type='draft', spec_draft_model=PATH)")


class Llama:
    """A model loaded into a kvwarden engine, with llama-cpp-python's API.

    Takes llama-cpp-python's constructor arguments. Those that mean nothing
    to kvwarden (n_ubatch, use_mmap, use_mlock, flash_attn, offload_kqv,
    numa, logits_all, tensor_split, ...) are accepted and, when set to
    something else than their default, ignored with one KvwardenWarning
    each. Those that change what the model computes and kvwarden cannot
    do (lora_path, rope_freq_base, rope_freq_scale, kv_overrides,
    vocab_only, a type_k/type_v other than f32/f16/q8_0/q4_0, ...) raise NotImplementedError
    naming them. An unknown argument raises TypeError naming Llama().

    Args:
        model_path: a ``.gguf`` file, a llama2.c ``.bin`` checkpoint (give
            ``tokenizer_path`` too), or ``"builtin:stories260K"`` (the small
            story model compiled into the library). A missing file raises
            ``FileNotFoundError``.
        n_ctx: most tokens (prompt + completion) one request may hold;
            0 (default) = the model's context, bounded by the KV pool.
        n_batch: tokens the engine processes in one step (its
            max_batch_tokens); None = the engine's default (512).
        n_threads: CPU threads for the forward pass (None = the library's
            default, the number of physical cores). n_threads_batch is
            used when n_threads is not given: kvwarden has one setting.
        n_gpu_layers: None uses a GPU when one is present; 0 runs on the
            CPU; -1 (all) or any other value asks for the GPU ("auto"
            device). kvwarden runs the whole model on one device, so a
            partial count warns once. main_gpu must be 0.
        seed: base seed for sampling; None (or -1, or llama.cpp's
            0xFFFFFFFF) draws a fresh seed per request. With a seed, the
            sequence of outputs is reproducible run to run.
        type_k, type_v: the KV cache type as a GGML type (0 f32, 1 f16,
            8 q8_0, 2 q4_0) or its name; kvwarden stores K and V in one
            type, so both must agree. q8_0 and q4_0 need a head dim that
            is a multiple of 32 and run on the CPU.
        last_n_tokens_size: the repetition penalty's window (default 64).
        chat_format: None uses the model's own chat template (ChatML when
            the file has none); a name ("chatml", "llama-2", "llama-3",
            "mistral-instruct", "gemma", "phi-3", "zephyr", "vicuna",
            "alpaca", "qwen") uses that format instead.
        verbose: print the engine's log lines (info and above) to stderr.
        draft_model: ``kvwarden.LlamaPromptLookupDecoding(...)`` (or
            llama-cpp-python's) turns on speculative decoding by prompt
            lookup; the output is unchanged. Other draft_model objects
            raise NotImplementedError: for a draft model give its file as
            ``spec_type="draft", spec_draft_model=PATH`` (engine fields,
            like spec_draft_max, spec_ngram_min, spec_ngram_max).
        tokenizer_path: tokenizer of a llama2.c checkpoint.
        **engine_params: fields of the C ``kvw_engine_params``
            (kv_memory_bytes, page_size, tenant_quota, ...).
    """

    def __init__(self, model_path: str, *, n_gpu_layers: Optional[int] = None,
                 main_gpu: int = 0, seed: Optional[int] = None, n_ctx: int = 0,
                 n_batch: Optional[int] = None, n_threads: Optional[int] = None,
                 n_threads_batch: Optional[int] = None, type_k: Optional[int] = None,
                 type_v: Optional[int] = None, last_n_tokens_size: int = 64,
                 chat_format: Optional[str] = None, verbose: bool = True,
                 tokenizer_path: Optional[str] = None, **kwargs: Any) -> None:
        if not isinstance(model_path, (str, os.PathLike)):
            raise TypeError("model_path must be a path (str), e.g. 'model.gguf' or 'builtin:stories260K'")
        self._embedding = bool(kwargs.pop("embedding", False))
        pooling_type = kwargs.pop("pooling_type", -1)
        if pooling_type not in _POOLING:
            raise ValueError(f"Llama(): unknown pooling_type {pooling_type!r} (-1 to 4, llama.cpp's values)")
        self._pooling = _POOLING[pooling_type]
        params: Dict[str, Any] = {}
        draft_model = kwargs.pop("draft_model", None)
        if draft_model is not None:
            params.update(_draft_params(draft_model))
        for name, value in kwargs.items():
            if name in _IGNORED:
                default, why = _IGNORED[name]
                if value != default and why:
                    _warn_once(name, why)
            elif name in _REFUSED:
                off = _REFUSED[name]
                if value is not None and value != off:
                    why = _REFUSED_WHY.get(name, "not supported")
                    raise NotImplementedError(f"Llama(): {name}={value!r} is not supported by kvwarden "
                                              f"({why}); leave it at {off!r}")
            elif name in _ENGINE_FIELDS:
                params[name] = value
            else:
                raise TypeError(f"Llama() got an unexpected keyword argument {name!r}")
        for name, v in (("n_ctx", n_ctx), ("last_n_tokens_size", last_n_tokens_size)):
            if not _is_int(v) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        if main_gpu not in (0, None):
            raise NotImplementedError(f"Llama(): main_gpu={main_gpu!r} is not supported by kvwarden "
                                      "(it uses the first GPU; set CUDA_VISIBLE_DEVICES to pick one)")
        if n_ctx:
            params["max_context"] = n_ctx
        if n_batch is not None:
            if not _is_int(n_batch) or n_batch <= 0:
                raise ValueError(f"n_batch must be an int > 0, got {n_batch!r}")
            params["max_batch_tokens"] = n_batch
        threads = n_threads if n_threads is not None else n_threads_batch
        if n_threads is not None and n_threads_batch is not None and n_threads_batch != n_threads:
            _warn_once("n_threads_batch", "kvwarden has one thread count; n_threads is used")
        if threads is not None:
            params["n_threads"] = threads
        if n_gpu_layers is not None and "device" not in params:
            if not _is_int(n_gpu_layers):
                raise TypeError(f"n_gpu_layers must be an int, not {type(n_gpu_layers).__name__}")
            params["device"] = "cpu" if n_gpu_layers == 0 else "auto"
        if type_k is not None or type_v is not None:
            kt, vt = (_KV_TYPES.get(t, t) if t is not None else None for t in (type_k, type_v))
            for name, t in (("type_k", kt), ("type_v", vt)):
                if t is not None and t not in _KV_TYPES.values():
                    raise NotImplementedError(f"Llama(): {name}={t!r} is not supported by kvwarden "
                                              "(KV cache types: 0 = f32, 1 = f16, 8 = q8_0, 2 = q4_0)")
            if kt is not None and vt is not None and kt != vt:
                raise NotImplementedError("Llama(): type_k and type_v must be the same KV cache type in kvwarden")
            params["kv_type"] = kt or vt
        self.chat_format = chat_format
        self._chat_stop: List[str] = []
        if chat_format is not None:
            if chat_format in _chat_formats.UNSUPPORTED:
                raise NotImplementedError(f"Llama(): chat_format={chat_format!r} is not supported by kvwarden "
                                          "(it needs more than a chat template)")
            if chat_format not in _chat_formats.FORMATS:
                raise ValueError(f"Llama(): unknown chat_format {chat_format!r}; kvwarden knows "
                                 + ", ".join(sorted(_chat_formats.FORMATS)))
            params["chat_template"], self._chat_stop = _chat_formats.FORMATS[chat_format]
        log = None
        if verbose:
            def log(level: int, msg: str) -> None:
                print(msg, file=sys.stderr, flush=True)
        self.model_path = os.fspath(model_path)
        self.verbose = verbose
        self.last_n_tokens_size = last_n_tokens_size
        if seed is not None and not _is_int(seed):
            raise TypeError(f"seed must be an int or None, not {type(seed).__name__}")
        self._seed_arg = seed
        if seed in (None, -1, 0xFFFFFFFF):
            self._rng = random.Random()
        else:
            self._rng = random.Random(seed)
        self._engine = Engine(self.model_path, tokenizer_path=tokenizer_path, log=log,
                              log_level=_lib.LOG_INFO, **params)
        self._input_ids: List[int] = []
        self._metadata: Optional[Dict[str, str]] = None
        if _is_int(n_gpu_layers) and 0 < n_gpu_layers < self._engine.model_info["n_layer"]:
            _warn_once("n_gpu_layers", f"kvwarden runs the whole model on one device, so "
                                       f"{n_gpu_layers} of {self._engine.model_info['n_layer']} layers "
                                       "means all of them (on the GPU when there is one)")

    @classmethod
    def from_pretrained(cls, repo_id: str, filename: Optional[str] = None,
                        additional_files: Optional[List[str]] = None,
                        local_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
                        local_dir_use_symlinks: Union[bool, str] = "auto",
                        cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
                        **kwargs: Any) -> "Llama":
        """Downloads a GGUF from a Hugging Face hub (as ``kvwarden pull``
        does: kvwarden's cache, resume, size and SHA-256 checks,
        HF_ENDPOINT/HF_TOKEN) and loads it. filename is a name or a glob
        pattern ("*Q4_K_M.gguf") that must match exactly one file of the
        repository (else ValueError, as llama-cpp-python); None picks the
        Q4_K_M file (else the first GGUF). cache_dir is kvwarden's cache root
        (default $KVWARDEN_CACHE_DIR, else ~/.cache/kvwarden); with
        local_dir the file is also linked (or, with
        local_dir_use_symlinks=False, copied) there. additional_files are
        downloaded beside it. Progress goes to stderr when verbose (the
        default). kwargs go to Llama()."""
        verbose = kwargs.get("verbose", True)
        progress = _progress_printer() if verbose else None
        paths = []
        for f in [filename] + list(additional_files or []):
            paths.append(pull(repo_id, filename=f, cache_dir=cache_dir, progress=progress))
        path = paths[0]
        if local_dir is not None:
            os.makedirs(local_dir, exist_ok=True)
            for i, src in enumerate(paths):
                dst = os.path.join(os.fspath(local_dir), os.path.basename(src))
                if not os.path.exists(dst):
                    if local_dir_use_symlinks is False:
                        shutil.copyfile(src, dst)
                    else:
                        try:
                            os.symlink(src, dst)
                        except OSError:
                            shutil.copyfile(src, dst)
                if i == 0:
                    path = dst
        return cls(model_path=path, **kwargs)

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

    # -- embeddings --

    def _need_embedding(self) -> None:
        if not self._embedding:
            raise RuntimeError("Llama model must be created with embedding=True to call this method")

    def embed(self, input: Union[str, List[str]], normalize: bool = False, truncate: bool = True,
              return_count: bool = False) -> Any:
        """Embeddings of input, as llama-cpp-python's Llama.embed: one
        vector (a list of floats) for a str, a list of vectors for a list;
        with pooling_type=0 (none) each vector is instead a list of
        per-token vectors.
        normalize=True scales each to unit L2 norm (llama-cpp-python's
        default is False; llama-server's and create_embedding's engine
        default is not used here). truncate cuts inputs longer than the
        context. return_count also returns the prompt tokens (as
        tokenize() counts them). Needs Llama(embedding=True)."""
        self._need_embedding()
        if self._pooling == "rank":
            raise ValueError("Llama(): pooling_type=4 (rank) scores query/document pairs; use rerank()")
        texts = [input] if isinstance(input, str) else list(input)
        vecs = self._vectors(texts, normalize=normalize, truncate=truncate)
        out: Any = vecs[0] if isinstance(input, str) else vecs
        if return_count:
            return out, sum(len(self.tokenize(t.encode("utf-8"))) for t in texts)
        return out

    def _vectors(self, texts: List[str], normalize: bool, truncate: bool) -> List[Any]:
        # Pooling none gives per-token vectors (each normalized when asked).
        if self._pooling == "none":
            return self._engine.embed_tokens(texts, normalize=normalize, truncate=truncate)
        return self._engine.embed(texts, pooling=self._pooling, normalize=normalize, truncate=truncate)

    def create_embedding(self, input: Union[str, List[str]], model: Optional[str] = None) -> Dict[str, Any]:
        """OpenAI's embeddings response for input, as llama-cpp-python's
        Llama.create_embedding (vectors unit-norm, as llama-server's).
        Needs Llama(embedding=True)."""
        self._need_embedding()
        texts = [input] if isinstance(input, str) else list(input)
        vecs = self._vectors(texts, normalize=True, truncate=True)
        n = sum(len(self.tokenize(t.encode("utf-8"))) for t in texts)
        return {
            "object": "list",
            "data": [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vecs)],
            "model": model if model is not None else self.model_path,
            "usage": {"prompt_tokens": n, "total_tokens": n},
        }

    def rerank(self, query: str, documents: List[str], top_n: Optional[int] = None) -> List[Dict[str, Any]]:
        """Scores documents against query with a cross-encoder (a model with
        pooling rank): llama-server's /rerank results, [{"index",
        "relevance_score"}] best first, the best top_n when given. Needs
        Llama(embedding=True)."""
        self._need_embedding()
        scores = self._engine.rerank(query, documents)
        res = sorted(({"index": i, "relevance_score": s} for i, s in enumerate(scores)),
                     key=lambda r: -r["relevance_score"])
        return res[:top_n] if top_n is not None else res

    # -- model facts --

    def n_ctx(self) -> int:
        """The most tokens one request may hold."""
        return self._engine.max_context

    def n_embd(self) -> int:
        """The model's width (embedding length)."""
        return int(self._engine.model_info["n_embd"])

    def n_vocab(self) -> int:
        """The vocabulary size."""
        return int(self._engine.vocab["size"])

    def token_bos(self) -> int:
        """The beginning-of-sequence token."""
        return int(self._engine.vocab["bos"])

    def token_eos(self) -> int:
        """The end-of-sequence token."""
        return int(self._engine.vocab["eos"])

    @property
    def metadata(self) -> Dict[str, str]:
        """The model's GGUF metadata, key to value as text (arrays left
        out), as llama-cpp-python's Llama.metadata (e.g.
        metadata["tokenizer.chat_template"]). Read once, on first use."""
        if self._metadata is None:
            self._metadata = self._engine.metadata
        return self._metadata

    def tokenize(self, text: Union[bytes, str], add_bos: bool = True,
                 special: bool = False) -> List[int]:
        """Token IDs of text (UTF-8 bytes, as llama-cpp-python takes, or
        str). special=True turns special-token text ("<|im_start|>") into
        the special token."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        return self._engine.tokenize(text, add_bos=add_bos, special=special)

    def detokenize(self, tokens: Sequence[int], prev_tokens: Optional[Sequence[int]] = None,
                   special: bool = False) -> bytes:
        """The UTF-8 bytes of tokens (as llama-cpp-python returns them).
        special=True renders control tokens (BOS, "<|im_end|>") as their
        text. prev_tokens, when given, is the context tokens follow (the
        bytes of tokens only are returned)."""
        if prev_tokens:
            prev = list(prev_tokens)
            whole = self._engine.detokenize(prev + list(tokens), special=special).encode("utf-8")
            head = self._engine.detokenize(prev, special=special).encode("utf-8")
            return whole[len(head):] if whole.startswith(head) else whole
        return self._engine.detokenize(list(tokens), special=special).encode("utf-8")

    # -- state --

    @property
    def input_ids(self) -> List[int]:
        """The tokens of the last completion (prompt and generated), as
        llama-cpp-python's input_ids after an eval."""
        return list(self._input_ids)

    @property
    def n_tokens(self) -> int:
        """len(input_ids)."""
        return len(self._input_ids)

    def reset(self) -> None:
        """Forgets the last completion's tokens (input_ids). The engine's
        prefix cache keeps what it holds; it never changes an output."""
        self._input_ids = []

    def save_state(self) -> LlamaState:
        """The last completion's sequence (input_ids) as a LlamaState,
        sealed to this model (llama_state: its tokens, the model's
        fingerprint and a MAC; no KV). load_state takes it back, in this
        or another process with the same model."""
        ids = list(self._input_ids)
        data = self._engine.save_state(ids) if ids else b""
        return LlamaState(input_ids=ids, scores=None, n_tokens=len(ids), llama_state=data,
                          llama_state_size=len(data), seed=self._seed_arg)

    def load_state(self, state: LlamaState) -> None:
        """Restores a save_state: input_ids and the seed. The sealed tokens
        are checked first: a state of another model, or an altered one,
        raises InvalidArgumentError (a ValueError) and changes nothing. As
        in llama-cpp-python, a later completion whose prompt starts with
        input_ids continues from them: the engine's prefix cache supplies
        their KV while it holds it (computed again otherwise; the output is
        the same either way). To continue the text, pass
        state.input_ids + new tokens as the prompt."""
        if not isinstance(state, LlamaState):
            raise TypeError(f"state must be a LlamaState, not {type(state).__name__}")
        ids = self._engine.load_state(state.llama_state) if state.n_tokens else []
        self._input_ids = ids
        if state.seed is not None and state.seed != self._seed_arg:
            self._seed_arg = state.seed
            self._rng = random.Random(state.seed) if state.seed not in (-1, 0xFFFFFFFF) else random.Random()

    # -- completions --

    def _seed(self, seed: Optional[int]) -> int:
        if seed is not None and seed not in (-1, 0xFFFFFFFF):
            if not _is_int(seed):
                raise TypeError(f"seed must be an int or None, not {type(seed).__name__}")
            return seed
        # Fixed seeds drawn from the Llama's own generator.
        return self._rng.getrandbits(63) | 1

    def _start(self, prompt: Union[str, Sequence[int]], max_tokens: Optional[int], temperature: float,
               top_p: float, min_p: float, top_k: int, repeat_penalty: float, seed: Optional[int],
               stop: Union[None, str, Sequence[str]], parse_special: bool = False,
               top_logprobs: Optional[int] = None, grammar: Optional[LlamaGrammar] = None,
               penalties: Optional[Dict[str, Any]] = None) -> Stream:
        if not isinstance(prompt, str):
            if isinstance(prompt, (bytes, bytearray, dict)) or not hasattr(prompt, "__iter__"):
                raise TypeError(f"prompt must be str or a list of token IDs, not {type(prompt).__name__}")
            prompt = list(prompt)
        if max_tokens is None or (_is_int(max_tokens) and max_tokens <= 0):
            # llama-cpp-python: None or <= 0 means "up to the context".
            max_tokens = _lib.MAX_TOKENS_UNLIMITED
        if stop is None:
            stop = []
        elif isinstance(stop, str):
            stop = [stop]
        extra: Dict[str, Any] = {}
        if top_logprobs is not None:
            extra = {"logprobs": True, "top_logprobs": top_logprobs}
        if grammar is not None:
            if not isinstance(grammar, LlamaGrammar):
                raise TypeError(f"grammar must be a LlamaGrammar (LlamaGrammar.from_string or "
                                f"from_json_schema), not {type(grammar).__name__}")
            extra.update(grammar.request_args())
        # presence_penalty, frequency_penalty, logit_bias, prompt_logprobs
        extra.update({k: v for k, v in (penalties or {}).items() if v is not None})
        return self._engine.stream(prompt, max_tokens=max_tokens, temperature=temperature,
                                   top_k=top_k, top_p=top_p, min_p=min_p,
                                   repeat_penalty=repeat_penalty,
                                   repeat_last_n=self.last_n_tokens_size, seed=self._seed(seed),
                                   stop=[s for s in stop if s] or None,
                                   parse_special=parse_special, **extra)

    def _ended(self, s: Stream) -> None:
        # What llama-cpp-python's input_ids hold after a completion.
        if s.prompt_tokens:
            self._input_ids = list(s.prompt_tokens) + list(s.tokens)

    @staticmethod
    def _usage(s: Stream) -> CompletionUsage:
        r = s.result or {}
        p, c = int(r.get("prompt_tokens", 0)), int(r.get("generated_tokens", 0))
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    @staticmethod
    def _finish(s: Stream) -> FinishReason:
        reason = (s.result or {}).get("finish_reason")
        return "length" if reason == "length" else "stop"

    def _pieces(self, s: Stream) -> List[str]:
        """The text each generated token adds (in context)."""
        prev = s.prompt_tokens[-1:] if s.prompt_tokens else []
        out, done = [], b""
        ids = list(prev)
        for t in s.tokens:
            ids.append(t)
            whole = self.detokenize(ids[len(prev):], prev_tokens=prev)
            out.append(whole[len(done):].decode("utf-8", "replace"))
            done = whole
        return out

    def _prompt_logprobs(self, s: Stream) -> Dict[str, Any]:
        """The echoed prompt's part of the completion logprobs: every
        prompt token (BOS included) in context; the first has None (nothing
        predicts it)."""
        toks, offsets, lps, tops = [], [], [], []
        pos, prev = 0, []
        for i, t in enumerate(s.prompt_tokens):
            piece = self.detokenize([t], prev_tokens=prev[-1:]).decode("utf-8", "replace")
            toks.append(piece)
            offsets.append(pos)
            pos += len(piece)
            if i == 0 or not s.prompt_logprobs or i - 1 >= len(s.prompt_logprobs):
                lps.append(None)
                tops.append(None)
            else:
                lp = s.prompt_logprobs[i - 1][1]
                alts = s.prompt_top_logprobs[i - 1] if s.prompt_top_logprobs else []
                d = {self.detokenize([a], prev_tokens=prev[-1:]).decode("utf-8", "replace"): v for a, v in alts}
                d[piece] = lp
                lps.append(lp)
                tops.append(d)
            prev.append(t)
        return {"tokens": toks, "text_offset": offsets, "token_logprobs": lps, "top_logprobs": tops}

    def _completion_logprobs(self, s: Stream, offset: int, echo: bool = False) -> Dict[str, Any]:
        """llama-cpp-python's completion logprobs: tokens, text_offset,
        token_logprobs and top_logprobs (a dict of piece to logprob per
        token, the chosen one included); with echo, the prompt's tokens
        first."""
        if echo:
            head = self._prompt_logprobs(s)
            rest = self._completion_logprobs(s, offset)
            return {k: head[k] + rest[k] for k in head}
        pieces = self._pieces(s)
        offsets, pos = [], offset
        for p in pieces:
            offsets.append(pos)
            pos += len(p)
        top = []
        for i, alts in enumerate(s.top_logprobs or [[] for _ in pieces]):
            d = {self.detokenize([t], special=True).decode("utf-8", "replace"): lp for t, lp in alts}
            d[pieces[i]] = s.logprobs[i][1] if s.logprobs else 0.0
            top.append(d)
        return {"tokens": pieces, "text_offset": offsets,
                "token_logprobs": [lp for _, lp in (s.logprobs or [])], "top_logprobs": top}

    def _chat_logprobs(self, s: Stream) -> Dict[str, Any]:
        """OpenAI's chat logprobs: {"content": [{token, logprob, bytes,
        top_logprobs: [{token, logprob, bytes}]}]}."""
        pieces = self._pieces(s)
        content = []
        for i, piece in enumerate(pieces):
            alts = []
            for t, lp in (s.top_logprobs[i] if s.top_logprobs else []):
                text = self.detokenize([t], special=True).decode("utf-8", "replace")
                alts.append({"token": text, "logprob": lp, "bytes": list(text.encode("utf-8"))})
            content.append({"token": piece, "logprob": s.logprobs[i][1] if s.logprobs else 0.0,
                            "bytes": list(piece.encode("utf-8")), "top_logprobs": alts})
        return {"content": content}

    # -- streamed logprobs: each chunk carries its own tokens' (Stream.piece_logprobs) --

    def _record_pieces(self, recs: List[tuple], text: Optional[str], prev: List[int]) -> List[str]:
        """The text of each token of recs, which together brought text
        (usually one token: all of it; None for tokens whose text was not
        sent, a stop string's); prev holds the token before them."""
        if len(recs) == 1 and text is not None:
            return [text]
        out = []
        for t, _, _ in recs:
            out.append(self.detokenize([t], prev_tokens=prev[-1:]).decode("utf-8", "replace"))
            prev = [t]
        return out

    def _chunk_completion_logprobs(self, recs: List[tuple], pieces: List[str], offset: int) -> Dict[str, Any]:
        """_completion_logprobs of the tokens of one chunk."""
        offsets, top = [], []
        for (_, lp, alts), piece in zip(recs, pieces):
            offsets.append(offset)
            offset += len(piece)
            d = {self.detokenize([a], special=True).decode("utf-8", "replace"): v for a, v in alts}
            d[piece] = lp
            top.append(d)
        return {"tokens": pieces, "text_offset": offsets, "token_logprobs": [lp for _, lp, _ in recs],
                "top_logprobs": top}

    def _chunk_chat_logprobs(self, recs: List[tuple], pieces: List[str]) -> Dict[str, Any]:
        """_chat_logprobs of the tokens of one chunk."""
        content = []
        for (_, lp, alts), piece in zip(recs, pieces):
            tops = []
            for a, v in alts:
                text = self.detokenize([a], special=True).decode("utf-8", "replace")
                tops.append({"token": text, "logprob": v, "bytes": list(text.encode("utf-8"))})
            content.append({"token": piece, "logprob": lp, "bytes": list(piece.encode("utf-8")),
                            "top_logprobs": tops})
        return {"content": content}

    def create_completion(self, prompt: Union[str, List[int]], suffix: Optional[str] = None,
                          max_tokens: Optional[int] = 16, temperature: float = 0.8,
                          top_p: float = 0.95, min_p: float = 0.05, typical_p: float = 1.0,
                          logprobs: Optional[int] = None, echo: bool = False,
                          stop: Union[None, str, List[str]] = [],
                          frequency_penalty: float = 0.0, presence_penalty: float = 0.0,
                          repeat_penalty: float = 1.0, top_k: int = 40, stream: bool = False,
                          seed: Optional[int] = None, model: Optional[str] = None,
                          grammar: Optional[LlamaGrammar] = None,
                          logit_bias: Optional[Dict[int, float]] = None,
                          **unsupported: Any) -> Union[Completion, Iterator[CompletionChunk]]:
        """Completes prompt (text, or a list of token IDs used as given);
        returns an OpenAI ``text_completion`` dict, or with ``stream=True``
        an iterator of chunks (the last one has the finish reason and
        ``usage``). Defaults are llama-cpp-python's. ``logprobs=N`` (0 to
        20) fills choices[0]["logprobs"] as llama-cpp-python does (tokens,
        text_offset, token_logprobs, top_logprobs) with the model's own
        log-probabilities, for the generated tokens (with stream=True, each
        chunk has those of its own tokens as they arrive); with
        ``echo=True`` the prompt's tokens come first (the first with None;
        streamed, in the last chunk). ``grammar=`` (a ``LlamaGrammar``) constrains the
        output to a GBNF grammar or a JSON Schema; it ends with "stop" once
        the grammar is complete. ``presence_penalty`` and
        ``frequency_penalty`` (OpenAI's, each in [-2, 2], over the generated
        tokens) and ``logit_bias`` ({token ID: bias in [-100, 100]}; -100
        bans the token) shape the sampling.

        Raises ``kvwarden.PromptTooLongError`` (a ``ValueError``) when the
        prompt does not fit, ``ValueError`` for bad parameters (an invalid
        grammar or schema: ``InvalidArgumentError`` naming the place),
        ``NotImplementedError`` for parameters kvwarden does not implement
        (suffix, mirostat, ...)."""
        _unsupported({"suffix": suffix, "typical_p": typical_p, **unsupported})
        if logprobs is not None and (not _is_int(logprobs) or not 0 <= logprobs <= _lib.MAX_TOP_LOGPROBS):
            raise ValueError(f"logprobs must be an int in [0, {_lib.MAX_TOP_LOGPROBS}] or None, got {logprobs!r}")
        want_prompt = bool(echo) and logprobs is not None
        s = self._start(prompt, max_tokens, temperature, top_p, min_p, top_k, repeat_penalty,
                        seed, stop, top_logprobs=logprobs, grammar=grammar,
                        penalties={"presence_penalty": presence_penalty, "frequency_penalty": frequency_penalty,
                                   "logit_bias": logit_bias, "prompt_logprobs": want_prompt or None})
        meta = {"id": f"cmpl-{uuid.uuid4()}", "object": "text_completion",
                "created": int(time.time()), "model": model or self.model_path}
        echo_text = ""
        if echo:
            echo_text = prompt if isinstance(prompt, str) else self.detokenize(prompt).decode("utf-8", "replace")
        if stream:
            return self._completion_chunks(s, meta, echo_text, logprobs is not None)
        with s:
            text = "".join(s)
        self._ended(s)
        lp = self._completion_logprobs(s, len(echo_text), bool(echo)) if logprobs is not None else None
        return {**meta, "choices": [{"text": echo_text + text, "index": 0, "logprobs": lp,  # type: ignore[typeddict-item]
                                     "finish_reason": self._finish(s)}],
                "usage": self._usage(s)}

    def _completion_chunks(self, s: Stream, meta: Dict[str, Any], echo: str,
                           want_lp: bool) -> Iterator[CompletionChunk]:
        # Each chunk carries its own tokens' logprobs, as llama-cpp-python
        # streams them; the echoed prompt's (known only at the end) and
        # those of tokens that brought no text come with the last chunk.
        offset, prev = len(echo), []
        with s:
            if echo:
                yield {**meta, "choices": [{"text": echo, "index": 0, "logprobs": None,  # type: ignore[misc]
                                            "finish_reason": None}]}
            for piece in s:
                lp = None
                if want_lp and s.piece_logprobs:
                    recs = s.piece_logprobs
                    lp = self._chunk_completion_logprobs(recs, self._record_pieces(recs, piece, prev), offset)
                    prev = [recs[-1][0]]
                offset += len(piece)
                yield {**meta, "choices": [{"text": piece, "index": 0, "logprobs": lp,  # type: ignore[misc]
                                            "finish_reason": None}]}
        self._ended(s)
        lp = None
        if want_lp and (echo or s.tail_logprobs):
            tail = s.tail_logprobs
            lp = self._chunk_completion_logprobs(tail, self._record_pieces(tail, None, prev), offset)
            if echo:
                head = self._prompt_logprobs(s)
                lp = {k: head[k] + lp[k] for k in head}
        yield {**meta, "choices": [{"text": "", "index": 0, "logprobs": lp,  # type: ignore[misc]
                                    "finish_reason": self._finish(s)}],
               "usage": self._usage(s)}

    def __call__(self, prompt: Union[str, List[int]], *args: Any, **kwargs: Any
                 ) -> Union[Completion, Iterator[CompletionChunk]]:
        """Same as ``create_completion``."""
        return self.create_completion(prompt, *args, **kwargs)

    def _chat_prompt(self, messages: Sequence[Message]) -> "tuple[str, List[str], bool]":
        # The chat format's template, else the model's own chat template
        # when the library can render it (Engine.apply_chat_template);
        # kvwarden's fixed format otherwise. A render holds special-token
        # text that must become tokens.
        apply = getattr(self._engine, "apply_chat_template", None)
        if apply is not None:
            format_chat(messages)  # the same checks of roles and content
            return apply(list(messages), add_generation_prompt=True), list(self._chat_stop), True
        return format_chat(messages), [CHAT_STOP], False

    def create_chat_completion(self, messages: List[Message], temperature: float = 0.2,
                               top_p: float = 0.95, top_k: int = 40, min_p: float = 0.05,
                               stream: bool = False, stop: Union[None, str, List[str]] = [],
                               seed: Optional[int] = None, max_tokens: Optional[int] = None,
                               repeat_penalty: float = 1.0, model: Optional[str] = None,
                               logprobs: Optional[bool] = None, top_logprobs: Optional[int] = None,
                               response_format: Optional[Dict[str, Any]] = None,
                               grammar: Optional[LlamaGrammar] = None,
                               presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                               logit_bias: Optional[Dict[int, float]] = None,
                               tools: Optional[List[Dict[str, Any]]] = None,
                               tool_choice: Optional[Union[str, Dict[str, Any]]] = None,
                               parallel_tool_calls: Optional[bool] = None,
                               **unsupported: Any
                               ) -> Union[ChatCompletion, Iterator[ChatCompletionChunk]]:
        """Answers a conversation; returns an OpenAI ``chat.completion``
        dict, or with ``stream=True`` an iterator of
        ``chat.completion.chunk`` dicts (role first, then content, then one
        with the finish reason and ``usage``). messages are
        ``{"role": ..., "content": ...}`` dicts (system, developer, user,
        assistant, tool). ``max_tokens=None`` runs up to the context.
        ``logprobs=True`` (with ``top_logprobs=N``, 0 to 20) fills
        choices[0]["logprobs"] in OpenAI's shape ({"content": [...]}; with
        stream=True, each chunk has those of its own tokens). ``response_format``
        ``{"type": "json_object"}`` (optionally with ``"schema"``, as
        llama-cpp-python) or ``{"type": "json_schema", "json_schema":
        {"name": ..., "schema": ..., "strict": ...}}``, or ``grammar=`` (a
        ``LlamaGrammar``), constrain the reply. ``presence_penalty``,
        ``frequency_penalty`` and ``logit_bias`` as in ``create_completion``.

        ``tools`` (OpenAI function tools), ``tool_choice`` ("none", "auto",
        "required" or {"type": "function", "function": {"name": ...}}; the
        last two are enforced with a grammar) and ``parallel_tool_calls``
        render the tools into the model's own chat template and read the
        reply's tool calls into ``message["tool_calls"]`` (finish_reason
        "tool_calls"), as the server does (docs/TOOLS.md), streamed as
        OpenAI tool_calls deltas with stream=True; ``logprobs`` work there
        too (streamed, the records of held-back markup come with the next
        chunk).

        Raises as ``create_completion``; the legacy functions and
        function_call raise ``NotImplementedError``."""
        _unsupported(unsupported)
        if top_logprobs is not None and (not _is_int(top_logprobs)
                                         or not 0 <= top_logprobs <= _lib.MAX_TOP_LOGPROBS):
            raise ValueError(f"top_logprobs must be an int in [0, {_lib.MAX_TOP_LOGPROBS}] or None, "
                             f"got {top_logprobs!r}")
        want_lp = bool(logprobs) or bool(top_logprobs)
        if tools is not None or tool_choice is not None:
            return self._chat_with_tools(messages, tools, tool_choice, parallel_tool_calls, grammar,
                                         response_format, stream, stop, max_tokens, temperature, top_p,
                                         min_p, top_k, repeat_penalty, seed, model,
                                         {"presence_penalty": presence_penalty,
                                          "frequency_penalty": frequency_penalty, "logit_bias": logit_bias},
                                         (top_logprobs or 0) if want_lp else None)
        rf_grammar = grammar_for_response_format(response_format)
        if rf_grammar is not None and grammar is not None:
            raise ValueError("response_format and grammar both constrain the output; give one")
        grammar = grammar or rf_grammar
        prompt, extra_stop, special = self._chat_prompt(messages)
        if stop is None:
            stop = []
        elif isinstance(stop, str):
            stop = [stop]
        s = self._start(prompt, max_tokens, temperature, top_p, min_p, top_k, repeat_penalty,
                        seed, list(stop) + extra_stop, parse_special=special,
                        top_logprobs=(top_logprobs or 0) if want_lp else None, grammar=grammar,
                        penalties={"presence_penalty": presence_penalty, "frequency_penalty": frequency_penalty,
                                   "logit_bias": logit_bias})
        meta = {"id": f"chatcmpl-{uuid.uuid4()}", "object": "chat.completion",
                "created": int(time.time()), "model": model or self.model_path}
        if stream:
            return self._chat_chunks(s, {**meta, "object": "chat.completion.chunk"}, want_lp)
        with s:
            text = "".join(s)
        self._ended(s)
        return {**meta, "choices": [{"index": 0,  # type: ignore[typeddict-item]
                                     "message": {"role": "assistant", "content": text.lstrip(" ")},
                                     "logprobs": self._chat_logprobs(s) if want_lp else None,
                                     "finish_reason": self._finish(s)}],
                "usage": self._usage(s)}

    def _chat_with_tools(self, messages: List[Message], tools: Optional[List[Dict[str, Any]]],
                         tool_choice: Any, parallel_tool_calls: Optional[bool],
                         grammar: Optional[LlamaGrammar], response_format: Optional[Dict[str, Any]],
                         stream: bool, stop: Union[None, str, List[str]], max_tokens: Optional[int],
                         temperature: float, top_p: float, min_p: float, top_k: int,
                         repeat_penalty: float, seed: Optional[int], model: Optional[str],
                         penalties: Dict[str, Any], top_logprobs: Optional[int] = None) -> Any:
        request: Dict[str, Any] = {"messages": list(messages)}
        if tools is not None:
            request["tools"] = tools
        if tool_choice is not None:
            request["tool_choice"] = tool_choice
        if parallel_tool_calls is not None:
            request["parallel_tool_calls"] = bool(parallel_tool_calls)
        prep = self._engine.chat_prepare(request)
        if prep.get("grammar") is not None:
            if grammar is not None or grammar_for_response_format(response_format) is not None:
                raise ValueError("a tool_choice that forces a call constrains the output; "
                                 "grammar and response_format cannot be given with it")
            grammar = LlamaGrammar.from_string(prep["grammar"])
        else:
            grammar = grammar or grammar_for_response_format(response_format)
        if stop is None:
            stop = []
        elif isinstance(stop, str):
            stop = [stop]
        # The family's markup may be control tokens (Llama 3.1's
        # <|python_tag|>, Mistral's [TOOL_CALLS]) that decode to nothing
        # unless kept: the parser would never see the call.
        s = self._start(prep["prompt"], max_tokens, temperature, top_p, min_p, top_k, repeat_penalty,
                        seed, list(stop) + list(self._chat_stop), parse_special=True,
                        top_logprobs=top_logprobs, grammar=grammar,
                        penalties={**penalties, "keep_tokens": prep.get("keep_tokens") or None})
        meta = {"id": f"chatcmpl-{uuid.uuid4()}", "created": int(time.time()),
                "model": model or self.model_path}
        want_lp = top_logprobs is not None
        if stream:
            return self._tool_chunks(s, prep["parser"], {**meta, "object": "chat.completion.chunk"}, want_lp)
        with s:
            text = "".join(s)
        self._ended(s)
        message = chat_parse(prep["parser"], text)
        finish = self._finish(s)
        if message.get("tool_calls") and finish == "stop":
            finish = "tool_calls"
        return {**meta, "object": "chat.completion",
                "choices": [{"index": 0, "message": message,
                             "logprobs": self._chat_logprobs(s) if want_lp else None, "finish_reason": finish}],
                "usage": self._usage(s)}

    def _tool_chunks(self, s: Stream, parser: Dict[str, Any],
                     meta: Dict[str, Any], want_lp: bool = False) -> Iterator[Dict[str, Any]]:
        # The output is re-read as a prefix after each piece (chat_parse
        # with "partial"), and what it adds is sent as OpenAI deltas: a
        # call's id, type and name first, then argument fragments. Markup
        # that may still complete is held back, so content never shows it;
        # the logprobs of its tokens wait for the next chunk (as the
        # server sends them).
        partial = {**parser, "partial": True}
        sent = {"content": "", "reasoning_content": ""}
        calls: List[Dict[str, str]] = []
        held: List[Any] = []  # (record, piece) not sent yet
        prev: List[int] = []

        def chunk(delta: Dict[str, Any], finish_reason: Optional[str] = None) -> Dict[str, Any]:
            lp = None
            if held and (delta or finish_reason):
                lp = self._chunk_chat_logprobs([r for r, _ in held], [p for _, p in held])
                held.clear()
            return {**meta, "choices": [{"index": 0, "delta": delta, "logprobs": lp,
                                         "finish_reason": finish_reason}]}

        def deltas(msg: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
            for key in ("reasoning_content", "content"):
                v = msg.get(key) or ""
                if v.startswith(sent[key]) and len(v) > len(sent[key]):
                    yield chunk({key: v[len(sent[key]):]})
                    sent[key] = v
            for i, tc in enumerate(msg.get("tool_calls") or []):
                name, args = tc["function"]["name"], tc["function"]["arguments"]
                if i < len(calls):
                    done = calls[i]["arguments"]
                    if name == calls[i]["name"] and args.startswith(done) and len(args) > len(done):
                        yield chunk({"tool_calls": [{"index": i, "function": {"arguments": args[len(done):]}}]})
                        calls[i]["arguments"] = args
                    continue
                cid = tc.get("id") or "call_" + uuid.uuid4().hex[:24]
                calls.append({"name": name, "arguments": args})
                yield chunk({"tool_calls": [{"index": i, "id": cid, "type": "function",
                                             "function": {"name": name, "arguments": args}}]})

        text = ""
        with s:
            yield chunk({"role": "assistant"})
            for piece in s:
                if want_lp and s.piece_logprobs:
                    recs = s.piece_logprobs
                    held.extend(zip(recs, self._record_pieces(recs, piece, prev)))
                    prev = [recs[-1][0]]
                text += piece
                yield from deltas(chat_parse(partial, text))
        self._ended(s)
        if want_lp and s.tail_logprobs:
            held.extend(zip(s.tail_logprobs, self._record_pieces(s.tail_logprobs, None, prev)))
        final = chat_parse(parser, text)
        if len(final.get("tool_calls") or []) < len(calls):
            final = chat_parse(partial, text)  # cut inside a call already sent
        yield from deltas(final)
        finish = self._finish(s)
        if calls and finish == "stop":
            finish = "tool_calls"
        yield {**chunk({}, finish), "usage": self._usage(s)}

    def _chat_chunks(self, s: Stream, meta: Dict[str, Any], want_lp: bool) -> Iterator[ChatCompletionChunk]:
        # Each chunk carries its own tokens' logprobs (OpenAI's shape);
        # those of tokens that brought no text come with the last chunk.
        held: List[Any] = []  # records of a leading space not sent
        prev: List[int] = []
        with s:
            yield {**meta, "choices": [{"index": 0, "delta": {"role": "assistant"},  # type: ignore[misc]
                                        "logprobs": None, "finish_reason": None}]}
            first = True
            for piece in s:
                recs, pieces = [], []
                if want_lp and s.piece_logprobs:
                    recs = s.piece_logprobs
                    pieces = self._record_pieces(recs, piece, prev)
                    prev = [recs[-1][0]]
                if first:
                    # The fixed format ends with "Assistant:"; the model's
                    # leading space is not part of the answer (as in the
                    # non-streamed reply).
                    piece = piece.lstrip(" ")
                    if not piece:
                        held += zip(recs, pieces)
                        continue
                    first = False
                if held:
                    recs, pieces = [r for r, _ in held] + recs, [p for _, p in held] + pieces
                    held = []
                lp = self._chunk_chat_logprobs(recs, pieces) if recs else None
                yield {**meta, "choices": [{"index": 0, "delta": {"content": piece},  # type: ignore[misc]
                                            "logprobs": lp, "finish_reason": None}]}
        self._ended(s)
        tail = [r for r, _ in held] + s.tail_logprobs if want_lp else []
        lp = None
        if tail:
            lp = self._chunk_chat_logprobs(tail, [p for _, p in held]
                                           + self._record_pieces(s.tail_logprobs, None, prev))
        yield {**meta, "choices": [{"index": 0, "delta": {},  # type: ignore[misc]
                                    "logprobs": lp, "finish_reason": self._finish(s)}],
               "usage": self._usage(s)}
