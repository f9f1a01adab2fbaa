"""The Train page's New-run form: widgets generated from the config field tables, and the form's state.

Each field's widget, range, step, label and help come from its `gptcore.config.Setting` (shown in the tab's
language with i18n.label / help_text / choice). The widgets set no min/max of their own: a browser number input
refuses a value outside them without telling Python, which then trains with the previous value while the field
shows the new one. Here every typed value reaches Python, the field's own validation judges it, and Start stays
off, with the reason, until every field is valid.

The form lives in the URL: a reload, a bookmark or a shared link gives back the same form in that tab and only
that tab. Each widget's default is the chosen preset's value, so the URL holds just the preset and what was changed
from it. (A file on the server would be shared by every visitor of a classroom server; session state alone dies
with a reload.) Numbers, texts and toggles are bound to the URL by Streamlit (`bind="query-params"`).

Widget keys and values are identifiers, never words, so a language switch changes what the form says and nothing
it holds. The choice widgets (preset, corpus source, the settings with named options) need care for that: the
browser holds, and Streamlit's URL binding writes, the *shown name* of a choice. So their URL entries are written
here, as identifiers (`keep_choices_in_url`); after a language switch each choice is set again
(`relabel_choices`), which sends the browser its name in the new language, and a name in the old language that
was already on its way is read back as its identifier (`repair_choices`).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import streamlit as st

from gptcore import folders, runs
from gptcore.config import GPTConfig, Setting, TrainConfig, settings
from gptcore.data import CorpusError, check_trainable
from gptcore.device import accelerators
from gptcore.errors import Message, UserError, message
from gptcore.recipes import RECIPES
from gptcore.sources import KINDS, BuiltinStories, CorpusSource, allowed_path, data_folder, tinystories_cached
from gptcore.texts import DOWNLOAD_CACHE
from gptcore.tokenizer import CharTokenizer

from .i18n import LANGUAGES, catalog, choice, help_text, label, language, say, t
from .ui import grid, job_registry

ss = st.session_state
PREFIX = {GPTConfig: "tr_m_", TrainConfig: "tr_t_"}
CORPUS_DEFAULTS = {"tr_source": "builtin", "tr_builtin_chars": 1_000_000, "tr_builtin_seed": 0,
                   "tr_builtin_drills": 0.0, "tr_builtin_retellings": 0.0, "tr_path": "", "tr_max_chars": 1_000_000}
DEFAULT_RECIPE = "tutorial" if "tutorial" in RECIPES else next(iter(RECIPES))
TUTORIAL = GPTConfig()  # at vocab 74, the distinct characters of the tutorial's copy of TinyStories
KEEP = {"bind": "query-params", "persist_state": "session"}  # survives reloads (URL) and page switches
KEEP_CHOICE = {"persist_state": "session"}  # the URL keeps its identifier: keep_choices_in_url
FIELD_WIDTH = 8.5  # rem: a field's narrowest, for a select box's value and a number input's ± buttons
MANY_CHARACTERS = 1_000  # from here on the two character tables are the story of the parameter count


# ---------------------------------------------------------------- state

def recipe_configs(name: str | None = None) -> dict[type, object]:
    """The preset's model and training configs, with the app's sample/checkpoint/snapshot intervals."""
    recipe = RECIPES[name or ss.tr_recipe]
    return {GPTConfig: recipe.model, TrainConfig: runs.watch_defaults(recipe.train)}


def widget_settings(cls) -> list[Setting]:
    return [s for s in settings(cls).values() if s.widget]


def apply_recipe() -> None:
    """Set every field to the chosen preset's value (the preset widget's on_change), once per choice of preset:
    a preset read again under another language's name is no new choice."""
    repair_choices()
    if ss.tr_recipe == ss.get("tr_applied_recipe"):
        return
    for cls, config in recipe_configs().items():
        for s in widget_settings(cls):
            ss[PREFIX[cls] + s.name] = getattr(config, s.name)
    ss.tr_name = runs.suggest_name(ss.tr_recipe, taken=job_registry().live())
    ss.tr_applied_recipe = ss.tr_recipe


def choice_widgets() -> dict[str, tuple]:
    """{key: its identifiers} of the form's choice widgets."""
    found = {"tr_recipe": tuple(RECIPES), "tr_source": KINDS}
    for cls in PREFIX:
        found.update({PREFIX[cls] + s.name: tuple(s.choices) for s in widget_settings(cls) if s.choices})
    return found


def choice_names(key: str) -> dict[str, str]:
    """{each name the choice widget `key` shows in any language, and each identifier: its identifier}."""
    if key == "tr_recipe":
        entry = "training.recipes.{}.name"
    elif key == "tr_source":
        entry = "training.corpus.sources.{}"
    else:
        entry = "settings." + key.removeprefix(PREFIX[GPTConfig]).removeprefix(PREFIX[TrainConfig]) + ".choices.{}"
    names = {value: value for value in choice_widgets()[key]}
    for lang in LANGUAGES:
        names.update({catalog(lang)[entry.format(value)]: value for value in choice_widgets()[key]
                      if entry.format(value) in catalog(lang)})
    return names


def repair_choices() -> None:
    """Put back the identifier of each choice the browser sent by its name in another language.

    The browser holds a choice as the name it shows and sends that name back; a rerun under new names (a language
    switch) finds no such option. Called where the values are read first: the top of the page and the form's
    callbacks."""
    for key in choice_widgets():
        if key in ss and ss[key] not in choice_widgets()[key]:
            ss[key] = choice_names(key).get(ss[key], choice_default(key))


def choice_default(key: str):
    """What a choice is when the URL does not say: the preset's value of a setting."""
    if key == "tr_recipe":
        return DEFAULT_RECIPE
    if key == "tr_source":
        return CORPUS_DEFAULTS["tr_source"]
    cls = next(c for c, prefix in PREFIX.items() if key.startswith(prefix))
    return getattr(recipe_configs()[cls], key.removeprefix(PREFIX[cls]))


def init_form() -> None:
    """A new session starts from the preset in the URL; the URL's other choices and (through Streamlit's
    binding) its numbers and texts then override the preset's."""
    if "tr_recipe" not in ss:
        ss.tr_recipe = st.query_params.get("tr_recipe") if st.query_params.get("tr_recipe") in RECIPES \
            else DEFAULT_RECIPE
        apply_recipe()
        for key, allowed in choice_widgets().items():
            if (value := st.query_params.get(key)) in allowed:
                ss[key] = value
    for key, value in CORPUS_DEFAULTS.items():
        ss.setdefault(key, value)
    repair_choices()
    relabel_choices()


def relabel_choices() -> None:
    """After a language switch, set each choice again so the browser is sent its name in the new language (and
    sends that back from now on; see repair_choices for a name already on its way)."""
    if ss.get("tr_form_language") == language():
        return
    for key in choice_widgets():
        if key in ss:
            ss[key] = ss[key]
    ss.tr_form_language = language()


def keep_choices_in_url() -> None:
    """Write each choice into the URL by its identifier, and only where it differs from the preset's."""
    for key in choice_widgets():
        if key in ss and ss[key] != choice_default(key):
            st.query_params[key] = ss[key]
        elif key in st.query_params:
            del st.query_params[key]


def shown(s: Setting, cls) -> bool:
    """Is the field relevant under the form's other choices (warmup only with a schedule that ramps up, …)?"""
    return s.only_with is None or ss.get(PREFIX[cls] + s.only_with[0]) in s.only_with[1]


def values(cls) -> dict:
    """The config's fields as the form shows them; hidden and non-widget fields keep the preset's values."""
    preset = recipe_configs()[cls]
    return {**preset.to_dict(), **{s.name: ss.get(PREFIX[cls] + s.name, getattr(preset, s.name))
                                   for s in widget_settings(cls) if shown(s, cls)}}


def vocab_size(tokenizer) -> int:
    """The vocabulary a new run will have: the corpus's characters, or at most the BPE size asked for."""
    return ss.tr_t_bpe_vocab if ss.get("tr_t_tokenizer") == "bpe" else tokenizer.vocab_size


def model_config(vocab_size: int) -> GPTConfig:
    return GPTConfig.from_dict({**values(GPTConfig), "vocab_size": vocab_size})


def train_config() -> TrainConfig:
    return TrainConfig.from_dict(values(TrainConfig))


# ---------------------------------------------------------------- widgets

def field_widget(container, s: Setting, key: str, default) -> None:
    """The widget of one field: a toggle, a selectbox of its choices, or a number input with its step (whose help
    says the range: a toggle or a list of choices shows what it allows by itself). Option names are looked up
    once, in the tab's language, so format_func never depends on when it is called."""
    number = s.kind is not bool and not s.choices
    common = dict(key=key, help=t("training.form.allowed", help=help_text(s), range=say(s.range_text())) if number
                  else help_text(s), **(KEEP if s.kind is bool or number else KEEP_CHOICE))
    if s.name == "device":  # a choice only where this machine has an accelerator
        common["disabled"] = not accelerators()
    if s.kind is bool:
        container.toggle(label(s), value=default, wrap=True, **common)  # (a column would cut a long label)
    elif s.choices:
        names = {value: choice(s, value) for value in s.choices}
        container.selectbox(label(s), list(s.choices), index=list(s.choices).index(default), format_func=names.get,
                            **common)
    else:
        container.number_input(label(s), value=default, step=s.step, format="%g" if s.kind is float else None,
                               **common)


def field_inputs(cls, key: str) -> dict[str, Message]:
    """Every widget field of cls in the settings table's order, in a grid of as many columns as the page has room
    for (ui.grid), each field's problem (if any) under it. Returns {field name: message} of the invalid ones."""
    preset, found, fields = recipe_configs()[cls], {}, grid(FIELD_WIDTH, key)
    for s in widget_settings(cls):
        if not shown(s, cls):  # (warmup with a constant schedule)
            continue
        field, widget_key = fields.container(), PREFIX[cls] + s.name
        field_widget(field, s, widget_key, getattr(preset, s.name))
        if (message := s.problem(ss.get(widget_key))) is not None:
            field.error(say(message))
            found[s.name] = message
    return found


# ---------------------------------------------------------------- corpus

def current_source() -> CorpusSource:
    kind, max_chars = ss.tr_source, ss.tr_max_chars or None
    upload = ss.get("tr_upload")
    return CorpusSource(kind, chars=ss.tr_builtin_chars, seed=ss.tr_builtin_seed,
                        drills=ss.tr_builtin_drills if kind == "builtin" else 0.0,
                        retellings=ss.tr_builtin_retellings if kind == "builtin" else 0.0, path=ss.tr_path.strip(),
                        name=upload.name if upload else "", max_chars=None if kind == "builtin" else max_chars)


def file_stamp(source: CorpusSource):
    """Changes when the file changes, so the corpus cache never serves stale text."""
    path = Path(source.path)
    return (path.stat().st_mtime, path.stat().st_size) if source.kind == "file" and path.is_file() else None


# A resource, not data: st.cache_data would hand every rerun its own unpickled copy of a text that may be 60 MB
# (and hash the upload's bytes each time). The corpus and its tokenizer are never changed after they are made.
# (corpus_for says what it waits for, in the tab's language.)
@st.cache_resource(max_entries=2, show_spinner=False)
def cached_corpus(source: CorpusSource, upload_id: str | None, stamp, _upload=None):
    corpus = source.load(_upload.getvalue() if _upload is not None else None, confine=True)
    return corpus, CharTokenizer.from_text(corpus.text)


def corpus_for(source: CorpusSource, upload_key: str = "tr_upload"):
    """(corpus, tokenizer) of a source; CorpusError when it cannot be read, or a server path is outside the
    folders the app reads from (sources.allowed_path)."""
    if source.max_chars is not None and source.max_chars < 1:
        raise CorpusError("forms.max_chars_negative", "the number of characters to use must be 0 (all of them) or "
                          "more, got {n:,}", n=source.max_chars)
    if source.kind == "tinystories" and not tinystories_cached():
        raise CorpusError("forms.download_first", "download the TinyStories validation split first (button above)")
    if source.kind == "file" and source.path.strip():
        source = replace(source, path=str(allowed_path(source.path.strip())))
    upload = ss.get(upload_key) if source.kind == "upload" else None
    with st.spinner(t("training.corpus.preparing")):  # (shown only if it takes over half a second)
        return cached_corpus(source, upload.file_id if upload else None, file_stamp(source), upload)


def corpus_context() -> str:
    """Identifies the corpus choice, so an error about one corpus is not shown under another."""
    upload = ss.get("tr_upload")
    return repr((current_source(), upload.file_id if upload else None))


def corpus_problem(corpus, tokenizer: CharTokenizer) -> Message | None:
    """What makes a readable corpus untrainable with the form's context, said before anyone presses Start."""
    if tokenizer.vocab_size < 2:
        return message("train.single_char", "the corpus uses a single character ({char}): there is nothing to "
                       "predict", char=repr(tokenizer.chars[0]))
    context = ss.get("tr_m_context")
    if settings(GPTConfig)["context"].problem(context) is None:
        try:
            check_trainable(len(corpus.text), context)
        except CorpusError as e:
            return e.message
    return None


def server_folders_note() -> Message:
    return message("forms.server_folders", "Only files inside the project folder ({project}) or the data folder "
                   "({data}; set GPTCORE_DATA to choose another) are read from the server, never hidden ones (such "
                   "as .git). Upload any other file.",
                   project=folders.PROJECT_ROOT, data=data_folder())


def corpus_inputs():
    """Corpus widgets; the corpus's tokenizer, or None (with the reason shown) when it cannot be trained on."""
    names = {kind: t(f"training.corpus.sources.{kind}") for kind in KINDS}
    st.radio(t("training.corpus.source"), KINDS, format_func=names.get, key="tr_source", **KEEP_CHOICE)
    kind = ss.tr_source
    if kind == "builtin":
        a, b = st.columns([3, 2])
        sizes = settings(BuiltinStories)  # (the command line's --builtin-* flags have the same limits)
        a.number_input(t("training.corpus.characters"), sizes["builtin_chars"].low, sizes["builtin_chars"].high,
                       value=CORPUS_DEFAULTS["tr_builtin_chars"], step=100_000, key="tr_builtin_chars", **KEEP)
        b.number_input(t("training.corpus.seed"), value=0, step=1, key="tr_builtin_seed", **KEEP)
        drills, retold = st.columns(2)
        drills.slider(t("training.corpus.drills"), sizes["builtin_drills"].low, sizes["builtin_drills"].high,
                      value=CORPUS_DEFAULTS["tr_builtin_drills"], step=0.05, format="%.2f",
                      help=t("training.corpus.drills_help"), key="tr_builtin_drills", **KEEP)
        retold.slider(t("training.corpus.retellings"), sizes["builtin_retellings"].low,
                      sizes["builtin_retellings"].high, value=CORPUS_DEFAULTS["tr_builtin_retellings"], step=0.05,
                      format="%.2f", help=t("training.corpus.retellings_help"), key="tr_builtin_retellings", **KEEP)
    elif kind == "upload":
        st.file_uploader(t("training.corpus.upload"), type=["txt", "md", "text"], key="tr_upload")
    elif kind == "file":
        st.text_input(t("training.corpus.path"), value="", key="tr_path", placeholder="/path/to/stories.txt", **KEEP)
        st.caption(say(server_folders_note()))
    else:
        download_tinystories()
    if kind != "builtin":
        st.number_input(t("training.corpus.max_chars"), value=CORPUS_DEFAULTS["tr_max_chars"], step=100_000,
                        key="tr_max_chars", help=t("training.corpus.max_chars_help"), **KEEP)
    if kind == "upload" and ss.get("tr_upload") is None:
        st.info(t("training.corpus.choose_file"))  # nothing went wrong yet
        return None
    try:
        corpus, tokenizer = corpus_for(current_source())
    except UserError as e:  # (a CorpusError, or a setting of the built-in stories out of range)
        st.error(say(e))
        return None
    st.caption(t("training.corpus.summary", chars=len(corpus.text), distinct=tokenizer.vocab_size))
    if problem := corpus_problem(corpus, tokenizer):
        st.error(say(problem))
        return None
    return tokenizer


def download_tinystories() -> None:
    if tinystories_cached():
        st.caption(t("training.corpus.downloaded"))
        return
    st.caption(t("training.corpus.fetched_once", cache=DOWNLOAD_CACHE))
    if st.button(t("training.corpus.download"), key="tr_download"):
        bar = st.progress(0.0, text=t("training.corpus.connecting"))

        def progress(done: int, total: int | None):
            bar.progress(min(1.0, done / total) if total else 0.0, text=t("training.corpus.megabytes", mb=done / 1e6))

        try:
            CorpusSource("tinystories").load(progress=progress)
            bar.progress(1.0, text=t("training.corpus.done"))
        except CorpusError as e:
            bar.empty()
            st.error(say(e))


# ---------------------------------------------------------------- what the numbers mean

def params_note(cfg: GPTConfig, bpe: bool = False) -> list[str]:
    """Sentences on where the parameters are: the embedding and the head hold V·d each, so the count grows by
    2·d_model per character (a Chinese text's thousands of characters make these tables most of the model)."""
    total, d, vocab = cfg.n_params, cfg.d_model, cfg.vocab_size
    tables = 2 * d * vocab
    numbers = dict(d=d, two_d=2 * d, tables=tables, total=total, share=tables / total, vocab=vocab)
    notes = [t("training.params.tables_bpe" if bpe else "training.params.tables", **numbers)]
    if bpe:
        return notes
    if vocab >= MANY_CHARACTERS:
        notes.append(t("training.params.many_chars", vocab=vocab, d=d, one_table=d * vocab, layers=total - tables,
                       two_d=2 * d, share=tables / total))
    if replace(cfg, vocab_size=TUTORIAL.vocab_size) == TUTORIAL:
        extra = vocab - TUTORIAL.vocab_size
        key = "same" if extra == 0 else "more" if extra > 0 else "fewer"
        notes.append(t(f"training.params.tutorial_{key}", tutorial=TUTORIAL.n_params,
                       tutorial_vocab=TUTORIAL.vocab_size, n=abs(extra), params=abs(extra) * 2 * d))
        if ss.get("tr_source") != "builtin":  # a copy of TinyStories, maybe: the usual source of a different count
            notes.append(t("training.params.other_copies"))
    return notes
