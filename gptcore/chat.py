"""A chat model's prompt: the learner's message written in the model's own chat template.

An instruction-tuned model (SmolLM2-135M-Instruct) was trained on conversations laid out by a Jinja template that
its tokenizer carries (<|im_start|>user … <|im_end|>); given bare text it only continues it. The template is data
from a downloaded file, so it is rendered in Jinja's sandbox, as Hugging Face renders it: it can format strings and
loop, not reach Python.
"""
from __future__ import annotations

from .errors import InputError


class TemplateError(InputError):
    """A chat template that cannot be rendered."""


def chat_prompt(template: str | None, user_text: str, bos_token: str = "", eos_token: str = "") -> str:
    """The text a chat model continues: user_text as the one user message, then the start of the assistant's turn."""
    if not template:
        raise TemplateError("chat.no_template", "this model has no chat template: it only continues text")
    from jinja2 import TemplateError as JinjaError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(text: str):
        raise TemplateError("chat.refused", "the model's chat template refused the message: {reason}", reason=text)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = raise_exception
    try:
        return environment.from_string(template).render(
            messages=[{"role": "user", "content": user_text}], add_generation_prompt=True, bos_token=bos_token,
            eos_token=eos_token)
    except JinjaError as e:
        raise TemplateError("chat.broken", "the model's chat template cannot be rendered ({reason})",
                            reason=str(e)) from None
