"""Chinese text keeps a space between a Chinese character and a number or a Latin word, also where a message is
put together from parts: every library message and setting text of the Chinese catalog, its placeholders filled
with numbers and Latin words, and the messages the code really assembles (a setting's allowed range inside its
error, a run's step inside its status line) rendered the way the app renders them."""
import re
import string

from explorer.i18n import catalog
from gptcore.config import GPTConfig, TrainConfig, settings
from gptcore.describe import format_step
from gptcore.errors import Message, message, shown

HAN = r"[\u3400-\u9fff]"
LATIN = r"[A-Za-z0-9]"
MISSING_SPACE = re.compile(rf"{HAN}{LATIN}|{LATIN}{HAN}")
# Placeholders that a nested message fills, in Chinese: checked through the real messages below instead.
NESTED = {"range", "lower", "upper", "where", "saved", "said", "kind"}
NESTED_IN = {"device.no_cuda": {"reason"}}


def zh(item) -> str:
    """A Message in Chinese, nested Messages too (what explorer.i18n.say does for a tab in 中文)."""
    if not isinstance(item, Message):
        return shown(item)
    return catalog("zh")[f"messages.{item.key}"].format(**{k: zh(v) for k, v in item.params.items()})


def sample(name: str, spec: str, key: str):
    if name in NESTED or name in NESTED_IN.get(key, ()):
        return "中文"
    if spec:
        return 1234 if spec[-1] in "dxXbo" else 1234.5
    return "Ab1"


def filled_templates():
    for key, text in catalog("zh").items():
        if not key.startswith(("messages.", "settings.", "training.recipes.")):
            continue
        short = key.removeprefix("messages.")
        values = {name: sample(name, spec, short) for _, name, spec, _ in string.Formatter().parse(text) if name}
        yield key, text.format(**values)


def bad_values(s):
    if s.kind is bool:
        return ["yes"]
    if s.choices:
        return ["zzz"]
    return [v for v in (None if s.low is None else s.low - 1, None if s.high is None else s.high + 1, "x")
            if v is not None]


def assembled_messages():
    for cls in (GPTConfig, TrainConfig):
        for s in settings(cls).values():
            for value in bad_values(s):
                if (problem := s.problem(value)) is not None:
                    yield f"settings.{s.name} = {value!r}", zh(problem)
    for step in (-1, 0, 1500):
        where = format_step(step, 1500)
        for key in ("training.paused", "training.finished", "training.stopped"):
            values = {name: 0.5 if spec else "1 分 02 秒" for _, name, spec, _ in
                      string.Formatter().parse(catalog("zh")[f"messages.{key}"]) if name}
            yield f"{key} at step {step}", zh(message(key, "", **{**values, "where": where}))
    for where in (message("train.this_gpu", ""), message("train.this_machine", "")):
        yield f"train.too_much_memory, {where.key}", zh(message("train.too_much_memory", "", need=12.5, batch=32,
                                                                 context=128, d_model=128, n_layer=4, where=where,
                                                                 have=8.0))
    for reason in ("device.no_cuda_build", "device.no_cuda_gpu"):
        yield f"device.no_cuda, {reason}", zh(message("device.no_cuda", "", reason=message(reason, "")))


def test_chinese_text_spaces_numbers_and_latin_words():
    problems = [f"{where}: …{text[max(0, m.start() - 8):m.end() + 8]}…"
                for where, text in [*filled_templates(), *assembled_messages()]
                for m in MISSING_SPACE.finditer(text)]
    assert not problems, f"{len(problems)} places lack a space:\n" + "\n".join(problems)
