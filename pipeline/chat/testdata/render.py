#!/usr/bin/env python3
"""Render chat templates the way Hugging Face transformers does
(transformers.utils.chat_template_utils): jinja2's
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension and a {% generation %} block, the globals
raise_exception (raises jinja2's TemplateError) and strftime_now, and
transformers' tojson filter (json.dumps with ensure_ascii=False).

Reads a JSON list of jobs from standard input, each
  {"template": source, "messages": [...], "add_generation_prompt": bool,
   "bos_token": str, "eos_token": str, "now": "YYYY-MM-DDTHH:MM:SS",
   "vars": {extra template variables}, "tools": [...] or null,
   "py_messages": the messages as transformers takes them, when set}
and writes a JSON list of results in the same order, each {"text": str} or
{"error": str}. "now" fixes the time strftime_now reads, so that a
rendering can be compared with another renderer's. As in transformers,
tools and documents are passed as None when there are none.

Needs Python 3 and jinja2 (Debian: python3-jinja2)."""
import datetime
import json
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    """{% generation %}...{% endgeneration %}: transformers marks the
    assistant's text with it; rendering it just renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def render(env, compiled, job):
    now = datetime.datetime.fromisoformat(job["now"])
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)  # compiled templates see env.globals
    source = job["template"]
    if source not in compiled:
        compiled[source] = env.from_string(source)
    tpl = compiled[source]
    args = dict(job.get("vars") or {})
    args.update(messages=job.get("py_messages") or job["messages"], tools=job.get("tools"), documents=None,
                add_generation_prompt=job["add_generation_prompt"],
                bos_token=job["bos_token"], eos_token=job["eos_token"])
    return tpl.render(**args)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, "jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    out = []
    compiled = {}
    for job in json.load(sys.stdin):
        try:
            out.append({"text": render(env, compiled, job)})
        except Exception as e:  # any failure of the template is an error to match
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
    json.dump(out, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
