#!/usr/bin/env python3
"""Render every templates/*.jinja over every conversation in cases.json the
way Hugging Face transformers renders chat templates (jinja2's
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension, raise_exception, a tojson filter that is
json.dumps(ensure_ascii=False, sort_keys=False) rather than jinja2's
HTML-safe one, bos_token "<s>", eos_token "</s>")
and print the results as JSON: {template: {case: text or {"error": msg}}}.

Regenerate: python3 gen.py > expected.json (Debian: python3-jinja2)."""
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

here = os.path.dirname(os.path.abspath(__file__))


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = tojson
    with open(os.path.join(here, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    out = {}
    tdir = os.path.join(here, "templates")
    for name in sorted(os.listdir(tdir)):
        if not name.endswith(".jinja"):
            continue
        with open(os.path.join(tdir, name), encoding="utf-8") as f:
            source = f.read()
        tpl = env.from_string(source)
        rendered = {}
        for case in cases:
            try:
                rendered[case["name"]] = tpl.render(messages=case["messages"], bos_token="<s>", eos_token="</s>",
                                                    add_generation_prompt=case["generation_prompt"])
            except TemplateError as e:
                rendered[case["name"]] = {"error": str(e)}
        out[name[: -len(".jinja")]] = rendered
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
