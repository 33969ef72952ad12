"""Named chat formats for ``Llama(chat_format=...)``, as llama-cpp-python
names them, each a Jinja chat template that the engine renders (it replaces
the model file's tokenizer.chat_template, as ``kvwarden serve
--chat-template-file`` does).

The templates are the Hugging Face ones the names stand for; generation
ends at the model's end-of-turn token, plus the extra stop strings listed
for the formats whose turns end in plain text.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

_CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}"
    "{% set system_message = '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}"
    "{% set loop_messages = messages[1:] %}"
    "{% else %}{% set system_message = '' %}{% set loop_messages = messages %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if loop.index0 == 0 %}{% set content = system_message + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content + ' ' + eos_token }}{% endif %}"
    "{% endfor %}"
)

_LLAMA3 = (
    "{% for message in messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

_MISTRAL = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}"
    "{% elif message['role'] == 'system' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% endif %}"
    "{% endfor %}"
)

_GEMMA = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}{% set role = 'model' %}"
    "{% else %}{% set role = 'user' %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)

_PHI3 = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

_ZEPHYR = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

_VICUNA = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'user' %}{{ 'USER: ' + message['content'] + '\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'ASSISTANT: ' + message['content'] + eos_token + '\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)

_ALPACA = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'user' %}{{ '### Instruction:\\n' + message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ '### Response:\\n' + message['content'] + '\\n\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '### Response:\\n' }}{% endif %}"
)

#: chat_format name -> (Jinja template, extra stop strings).
FORMATS: Dict[str, Tuple[str, List[str]]] = {
    "chatml": (_CHATML, ["<|im_end|>"]),
    "qwen": (_CHATML, ["<|im_end|>"]),
    "llama-2": (_LLAMA2, []),
    "llama-3": (_LLAMA3, ["<|eot_id|>"]),
    "mistral-instruct": (_MISTRAL, []),
    "gemma": (_GEMMA, ["<end_of_turn>"]),
    "phi-3": (_PHI3, ["<|end|>"]),
    "zephyr": (_ZEPHYR, []),
    "vicuna": (_VICUNA, ["USER:"]),
    "alpaca": (_ALPACA, ["### Instruction:"]),
}

#: llama-cpp-python's formats that need more than a template (function
#: calling, images, their own handlers): NotImplementedError.
UNSUPPORTED = frozenset({
    "functionary", "functionary-v1", "functionary-v2", "chatml-function-calling",
    "llava-1-5", "llava-1-6", "moondream2", "nanollava", "llama-3-vision-alpha", "minicpm-v-2.6",
    "qwen2.5-vl", "gemma3",
})
