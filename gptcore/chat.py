"""The ids a model is given for a text: a beginning-of-sequence token where its tokenizer puts one, and for a chat
model the learner's message written in the model's own chat template.

A model whose tokenizer adds a BOS (Llama 2, TinyLlama, Mistral) saw one at the start of every training text, so
`prompt_ids` puts it first, as `transformers`' tokenizer(text) does with add_special_tokens=True: `sample` and
`eval` start their text with it. It is never put twice: a chat template that writes {{ bos_token }} has already put
it, and a text that starts with the token itself keeps just that one (where `transformers` would give two).

An instruction-tuned model (SmolLM2-135M-Instruct) was trained on conversations laid out by a Jinja template that
its tokenizer carries (<|im_start|>user … <|im_end|>); given bare text it only continues it. The template is data
from a downloaded file, so it is rendered in Jinja's sandbox, in the environment `transformers` renders it in: loop
controls ({% break %}), `raise_exception`, `strftime_now` and a `tojson` that leaves < > & as they are. It can
format strings and loop, not reach Python.
"""
from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache

from .errors import InputError


class TemplateError(InputError):
    """A chat template that cannot be rendered."""


def prompt_ids(tokenizer, text: str, chat: bool = False) -> list[int]:
    """The ids a model continues or scores: text (with chat, text as a user's message in the model's chat template,
    up to where the assistant's answer begins), with the BOS first where the tokenizer puts one."""
    if chat:
        text = chat_prompt(getattr(tokenizer, "chat_template", None), text, special_text(tokenizer, "bos_id"),
                           special_text(tokenizer, "eos_id"))
    ids = tokenizer.encode(text)
    bos = bos_prefix(tokenizer)
    return ids if ids[:1] == bos else bos + ids


def bos_prefix(tokenizer) -> list[int]:
    """[the BOS id] for a tokenizer that starts every text with it, else [] (our character and BPE tokenizers)."""
    bos = getattr(tokenizer, "bos_id", None)
    return [bos] if getattr(tokenizer, "add_bos", False) and bos is not None else []


def special_text(tokenizer, name: str) -> str:
    """How a special token (bos_id, eos_id) is written in text, for a template; "" where there is none."""
    token = getattr(tokenizer, name, None)
    return "" if token is None else tokenizer.piece(token)


def chat_prompt(template: str | None, user_text: str, bos_token: str = "", eos_token: str = "") -> str:
    """The text a chat model continues: user_text as the one user message, then the start of the assistant's turn."""
    if not template:
        raise TemplateError("chat.no_template", "this model has no chat template: it only continues text")
    from jinja2 import TemplateError as JinjaError

    try:
        return compiled(template).render(messages=[{"role": "user", "content": user_text}],
                                         add_generation_prompt=True, bos_token=bos_token, eos_token=eos_token)
    except JinjaError as e:
        raise TemplateError("chat.broken", "the model's chat template cannot be rendered ({reason})",
                            reason=str(e)) from None


@lru_cache(maxsize=8)
def compiled(template: str):
    """The template compiled in a sandbox that offers what `transformers` offers chat templates."""
    from jinja2.ext import Extension, loopcontrols
    from jinja2.nodes import CallBlock
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """{% generation %}…{% endgeneration %}: marks the assistant's text for training masks; renders its body."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=[Generation, loopcontrols])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda form: datetime.now().strftime(form)
    return environment.from_string(template)


def tojson(value, ensure_ascii: bool = False, indent=None, separators=None, sort_keys: bool = False) -> str:
    """JSON as the template means it (Jinja's own tojson escapes < > & for HTML, which a prompt is not)."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(text: str):
    raise TemplateError("chat.refused", "the model's chat template refused the message: {reason}", reason=text)
