#!/usr/bin/env python3
"""Writes tests/data/chat_templates/expected.json: what Python's jinja2,
configured as transformers' apply_chat_template configures it, renders from
each template of tests/data/chat_templates/ for each conversation below.
tests/unit/chat_template_test.cpp compares lathe's rendering byte for byte.

Not run by the tests (CI has no jinja2 guarantee); run it again after
changing a template or a case:  python3 tests/tools/chat_template_expected.py
(written with jinja2 3.1.6).

The environment follows transformers' _compile_jinja_template
(src/transformers/utils/chat_template_utils.py): ImmutableSandboxedEnvironment
with trim_blocks, lstrip_blocks and loopcontrols; tojson is json.dumps with
ensure_ascii=False; raise_exception and strftime_now are globals. The
variables are those apply_chat_template passes: messages, tools, documents,
add_generation_prompt, and the special tokens, plus the extra kwargs.
"""
import json
import os
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "chat_templates")

# template file → (bos_token, eos_token) as the checkpoint's tokenizer_config.json names them
TEMPLATES = {
    "llama-3.3-instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "qwen2.5-instruct.jinja": ("", "<|im_end|>"),
    "qwen3.jinja": ("", "<|im_end|>"),
    "gemma-2-it.jinja": ("<bos>", "<eos>"),
    "smollm2-instruct.jinja": ("<|im_start|>", "<|im_end|>"),
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

SYSTEM = {"role": "system", "content": "You are a careful assistant."}
USER = {"role": "user", "content": "What is the capital of France?"}
ASSISTANT = {"role": "assistant", "content": "Paris."}
USER2 = {"role": "user", "content": "  And of Italy?\n"}
TOOL_CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}}
    ],
}
TOOL_RESULT = {"role": "tool", "content": "{\"temperature\": 21.5}"}

# name → (messages, add_generation_prompt, extra kwargs)
CASES = {
    "system_user": ([SYSTEM, USER], True, {}),
    "user_only": ([USER], True, {}),
    "multi_turn": ([SYSTEM, USER, ASSISTANT, USER2], True, {}),
    "multi_turn_no_prompt": ([USER, ASSISTANT], False, {}),
    "unicode_and_quotes": ([{"role": "user", "content": "Grüße — 你好 😀 'single' \"double\" back\\slash\ttab"}], True, {}),
    "tools": ([SYSTEM, USER], True, {"tools": [WEATHER_TOOL]}),
    "tool_round_trip": ([USER, TOOL_CALL, TOOL_RESULT], True, {"tools": [WEATHER_TOOL]}),
    "tools_in_system_message": ([USER], True, {"tools": [WEATHER_TOOL], "tools_in_user_message": False,
                                              "date_string": "01 Jan 2025"}),
    "builtin_tools": ([USER, {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "brave_search", "arguments": {"query": "capital of France"}}}]}], False,
        {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]}),
    "two_tool_calls": ([USER, {"role": "assistant", "content": "", "tool_calls": [
        TOOL_CALL["tool_calls"][0], TOOL_CALL["tool_calls"][0]]}], False, {"tools": [WEATHER_TOOL]}),
    "reasoning_content": ([USER, {"role": "assistant", "content": "Paris.", "reasoning_content": "France's capital is Paris."},
                           USER2], True, {}),
    "think_in_content": ([USER, {"role": "assistant", "content": "<think>\nEasy one.\n</think>\n\nParis."}], False, {}),
    "enable_thinking_false": ([USER], True, {"enable_thinking": False}),
    "roles_not_alternating": ([USER, USER2], True, {}),
    "empty_conversation": ([], True, {}),
}


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def main():
    env = environment()
    expected = {}
    for name, (bos, eos) in TEMPLATES.items():
        with open(os.path.join(HERE, name), encoding="utf-8", newline="") as f:
            template = env.from_string(f.read())
        results = []
        for case, (messages, add_generation_prompt, extra) in CASES.items():
            extra = dict(extra)
            variables = dict(messages=messages, tools=extra.pop("tools", None), documents=None,
                             add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos, **extra)
            entry = {"case": case, "messages": messages, "add_generation_prompt": add_generation_prompt,
                     "bos_token": bos, "eos_token": eos, "extra": {k: v for k, v in variables.items()
                                                                   if k not in ("messages", "add_generation_prompt",
                                                                                "bos_token", "eos_token", "documents")}}
            if entry["extra"]["tools"] is None:
                del entry["extra"]["tools"]
            try:
                entry["output"] = template.render(**variables)
            except jinja2.exceptions.UndefinedError as e:
                entry["error"] = {"kind": "runtime", "message": str(e)}
            except jinja2.exceptions.TemplateError as e:
                entry["error"] = {"kind": "raise_exception", "message": str(e)}
            except Exception as e:  # TypeError and the like: a runtime error of the template
                entry["error"] = {"kind": "runtime", "message": f"{type(e).__name__}: {e}"}
            results.append(entry)
        expected[name] = results
    with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "templates": expected}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
