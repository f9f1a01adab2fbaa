"""The speedrun recipe, the ladder's rungs and what they switch on (QK-norm, zero-init output matrices,
ReLU², the warm-down schedule, the embedding's own learning rate), and the shipped ladder measurements."""
import json
from dataclasses import asdict, replace

import pandas as pd
import pytest
import torch

from bench import ladder as ladder_bench
from gptcore import checkpoint as ckpt
from gptcore.cli import main
from gptcore.config import GPTConfig, TrainConfig, TrainConfigError
from gptcore.demos import speedrun
from gptcore.ladder import LADDER, RUNGS, Curve, predecessor
from gptcore.model import GPT
from gptcore.optim import make_optimizer, set_lr
from gptcore.recipes import RECIPES
from gptcore.step import lr_at
from gptcore.texts import builtin_corpus
from gptcore.train import TrainControl, Trainer, build_model

TINY = dict(d_model=32, n_layer=2, n_head=2, d_ff=88, context=32)


def test_every_rung_keeps_the_tutorials_model_family_and_parameter_count():
    base = RECIPES["tutorial"].model.n_params
    for rung in LADDER:
        assert abs(rung.model.n_params - base) <= 0.1 * base, rung.key
        assert (rung.model.vocab_size, rung.model.context, rung.model.position) == (74, 128, "rope")


def test_the_ladder_runs_from_the_tutorial_recipe_to_the_speedrun_recipe_one_rung_on_another():
    assert (LADDER[0].model, LADDER[0].train) == (RECIPES["tutorial"].model, RECIPES["tutorial"].train)
    assert (RUNGS["muon"].model, RUNGS["muon"].train) == (RECIPES["fast"].model, RECIPES["fast"].train)
    assert (LADDER[-1].model, LADDER[-1].train) == (RECIPES["speedrun"].model, RECIPES["speedrun"].train)
    assert predecessor("tutorial") is None
    assert predecessor("qk_norm").key == "muon"  # a rung left out is not built on
    assert predecessor("shorter").key == predecessor("warmdown").key == "zero_init"
    assert [r.key for r in LADDER if not r.adopted] == ["higher_lr", "warmdown", "relu2", "batch8"]
    changed = speedrun.changes(RUNGS["zero_init"])
    assert changed.to_dict("records") == [{"setting": "zero_init", "before": "False", "after": "True"}]
    assert set(speedrun.changes(RUNGS["qk_norm"])["setting"]) == {"qk_norm", "lr", "muon_lr"}
    assert speedrun.changes(RUNGS["shorter"]).to_dict("records") == [{"setting": "steps", "before": "800",
                                                                     "after": "700"}]
    assert speedrun.changes(LADDER[0]).empty
    # a setting the schedule ignores reads as no effect, not as the value it happens to hold
    assert speedrun.changes(RUNGS["cosine"]).to_dict("records") == [
        {"setting": "schedule", "before": "constant", "after": "cosine"},
        {"setting": "warmup", "before": "—", "after": "50"},
        {"setting": "min_lr_ratio", "before": "—", "after": "0.05"}]


def test_the_speedrun_recipe_validates_and_trains_on_the_cli(tmp_path, capsys):
    out = tmp_path / "speedrun"
    assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--out", str(out), "--recipe", "speedrun",
                 "--steps", "6", "--warmup", "2", "--d-model", "32", "--n-head", "2", "--d-ff", "88",
                 "--context", "32"]) == 0
    model, _, step = ckpt.load_weights(out / "model.safetensors")
    assert model.cfg.qk_norm and model.cfg.zero_init and step == 6
    tc = ckpt.read_meta(out)["train_config"]
    assert (tc["schedule"], tc["embed_lr"], tc["muon_lr"], tc["batch_size"]) == ("cosine", 0.1, 0.04, 16)
    assert "final val loss over the whole val split" in capsys.readouterr().out


def test_the_warmdown_schedule_holds_the_peak_then_falls_in_a_straight_line_to_the_final_ratio():
    tc = TrainConfig(steps=100, lr=1.0, schedule="warmdown", warmup=10, warmdown=0.4, min_lr_ratio=0.1)
    assert lr_at(0, tc) == pytest.approx(0.1) and lr_at(9, tc) == pytest.approx(1.0)
    assert lr_at(10, tc) == lr_at(60, tc) == 1.0
    assert lr_at(80, tc) == pytest.approx(0.55) and lr_at(100, tc) == pytest.approx(0.1)
    late = TrainConfig(steps=20, lr=1.0, schedule="warmdown", warmup=15, warmdown=0.5, min_lr_ratio=0.0)
    assert [lr_at(s, late) for s in (14, 15, 20)] == pytest.approx([1.0, 1.0, 0.0])  # down from the peak, no jump
    with pytest.raises(TrainConfigError, match="warmdown"):
        TrainConfig(schedule="warmdown", warmdown=0.0)


def test_the_embedding_takes_its_own_learning_rate_through_the_schedule():
    model = GPT(GPTConfig(**TINY, vocab_size=20))
    for optimizer in ("adamw", "muon"):
        opt = make_optimizer(model, TrainConfig(optimizer=optimizer, lr=0.01, embed_lr=0.2, decay_all=False))
        set_lr(opt, 0.005)  # the schedule at half the peak
        lrs = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
        assert lrs[id(model.emb.weight)] == pytest.approx(0.1)
        assert lrs[id(model.head.weight)] == pytest.approx(0.005)
    plain = make_optimizer(model, TrainConfig(lr=0.01, decay_all=False))  # 0: the embedding at the lr
    assert len(plain.param_groups) == 2 and all(g["lr_scale"] == 1.0 for g in plain.param_groups)


def test_qk_norm_gives_every_head_query_and_key_the_rms_of_its_gain():
    model = GPT(GPTConfig(**TINY, vocab_size=20, qk_norm=True))
    with torch.no_grad():
        model.blocks[0].attn.qk_norm[1].weight.fill_(3.0)
    x = torch.randint(20, (2, 16), generator=torch.Generator().manual_seed(0))
    _, acts = model.run_with_cache(x, names_filter=["blocks.0.attn.hook_q", "blocks.0.attn.hook_k"])
    rms = lambda t: t.pow(2).mean(-1).sqrt()  # noqa: E731
    assert torch.allclose(rms(acts["blocks.0.attn.hook_q"]), torch.ones(2, 16, 2), atol=1e-3)
    assert torch.allclose(rms(acts["blocks.0.attn.hook_k"]), torch.full((2, 16, 2), 3.0), atol=1e-3)
    explicit, _ = model.run_with_cache(x)  # the hooked path computes what SDPA does
    assert torch.allclose(model(x)[0], explicit, atol=1e-5)


def test_zero_init_zeroes_the_output_matrices_and_draws_every_other_weight_as_before():
    plain, _ = build_model(GPTConfig(**TINY, vocab_size=20), seed=3)
    zeroed, _ = build_model(GPTConfig(**TINY, vocab_size=20, zero_init=True), seed=3)
    for (name, a), (_, b) in zip(plain.state_dict().items(), zeroed.state_dict().items()):
        if name.endswith(("attn.proj.weight", "ffn.w2.weight")):
            assert not b.any() and a.any(), name
        else:
            assert torch.equal(a, b), name
    x = torch.randint(20, (1, 8))
    resid = zeroed.run_with_cache(x, names_filter=["blocks.1.hook_resid_post", "hook_embed"])[1]
    assert torch.equal(resid["blocks.1.hook_resid_post"], resid["hook_embed"])  # every block adds nothing yet


def test_relu_squared_is_a_two_matrix_mlp():
    model = GPT(GPTConfig(**TINY, vocab_size=20, ffn="relu2"))
    ffn = model.blocks[0].ffn
    x = torch.randn(1, 3, 32)
    assert torch.allclose(ffn(x), ffn.w2(torch.relu(ffn.w1(x)) ** 2)) and not hasattr(ffn, "w3")


def test_a_rung_race_trains_the_predecessor_then_the_rung_and_reports_both():
    class Job:
        def __init__(self):
            self.data, self.control = {}, TrainControl()

        def update(self, progress=None, data=None):
            self.data.update(data or {})

        def append(self, key, *rows):
            self.data.setdefault(key, []).extend(rows)

    class TinyRace(speedrun.RungRace):  # the rungs' recipes on a small model
        def runs(self):
            return [(label, replace(model, **TINY), tc) for label, model, tc in super().runs()]

    race = TinyRace("zero_init", share=0.02, corpus_chars=30_000)
    job = Job()
    assert speedrun.run_rung_race(job, race) == "finished"
    frames = speedrun.race_frames(job.data)
    assert list(frames["loss"]["run"].unique()) == ["embed_lr", "zero_init"]
    assert job.data["runs"] == {"embed_lr": "finished", "zero_init": "finished"}
    assert job.data["steps_done"] == job.data["steps_total"] == 2 * 21
    assert (frames["val"].groupby("run")["step"].max() == 20).all()


def test_the_shipped_ladder_measurements_cover_every_rung_and_reach_the_finish_line():
    runs = speedrun.load_ladder()
    table = speedrun.ladder_table(runs).set_index("rung")
    assert list(table.index) == [r.key for r in LADDER]
    assert table.loc["tutorial", "× tutorial"] == 1.0
    assert table.loc["shorter", "final val loss"] < runs.target  # the speedrun recipe crosses the line
    assert table.loc["shorter", "× tutorial"] < table.loc["muon", "× tutorial"] < 1  # and sooner than fast


def test_unreadable_missing_or_stale_ladder_measurements_are_a_sentence(tmp_path):
    path = tmp_path / "ladder_curves.json"
    path.write_text("{not json")
    with pytest.raises(speedrun.LadderDataError, match="cannot be read: JSONDecodeError"):
        speedrun.load_ladder(path)
    good = json.loads(speedrun.LADDER_CURVES.read_text())
    path.write_text(json.dumps({**good, "curves": {"tutorial": good["curves"]["tutorial"]}}))
    with pytest.raises(speedrun.LadderDataError, match="lack the rungs cosine, muon"):
        speedrun.load_ladder(path)
    stale = json.loads(json.dumps(good))
    stale["settings"]["embed_lr"]["train"]["embed_lr"] = 0.05
    path.write_text(json.dumps(stale))
    with pytest.raises(speedrun.LadderDataError, match="other settings for the rungs embed_lr"):
        speedrun.load_ladder(path)


def test_the_ladder_table_times_each_rung_to_the_tutorial_rungs_final_loss(capsys):
    curves = {"tutorial": Curve("tutorial", [0, 10, 20], [0.0, 10.0, 20.0], [3.0, 1.1, 1.0]),
              "cosine": Curve("cosine", [0, 10, 20], [0.0, 10.0, 20.0], [3.0, 1.0, 0.95]),
              "muon": Curve("muon", [0, 10], [0.0, 5.0], [3.0, 1.2])}
    table = speedrun.ladder_table(speedrun.LadderRuns("cpu", 2, "", 1.0, curves)).set_index("rung")
    assert table.loc["cosine", "× tutorial"] == 0.5 and table.loc["cosine", "step to target"] == 10
    assert table.loc["cosine", "characters to target"] == 11 * 32 * 128
    assert pd.isna(table.loc["muon", "seconds to target"]) and table.loc["muon", "final val loss"] == 1.2
    assert table.loc["muon", "builds on"] == "cosine" and list(table.index) == ["tutorial", "cosine", "muon"]
    ladder_bench.print_table(table.reset_index(), 1.0)
    assert "| muon | cosine | yes | 800 | never | — | 1.2000 (5 s) |" in capsys.readouterr().out


def test_rung_settings_survive_a_checkpoint_round_trip(tmp_path):
    rung = RUNGS["warmdown"]
    trainer = Trainer.fresh(replace(rung.model, **TINY), replace(rung.train, steps=2, warmup=1, batch_size=4,
                                                                 final_eval=False, sample_chars=1),
                            builtin_corpus(20_000), tmp_path / "run")
    trainer.run()
    model, _, _ = ckpt.load_weights(tmp_path / "run" / "model.safetensors")
    assert model.cfg == replace(rung.model, **TINY, vocab_size=trainer.cfg.vocab_size)
    tc = ckpt.read_meta(tmp_path / "run")["train_config"]
    assert {k: tc[k] for k in ("schedule", "warmdown", "embed_lr")} == {
        k: asdict(rung.train)[k] for k in ("schedule", "warmdown", "embed_lr")}


def test_side_patching_recomputes_q_and_k_after_qk_norm():
    from gptcore import circuits, interp

    model = GPT(GPTConfig(**TINY, vocab_size=20, qk_norm=True)).eval()
    with torch.no_grad():
        for norm in model.blocks[1].attn.qk_norm:
            norm.weight.uniform_(0.5, 3.0)
    ids = torch.randint(20, (1, 12), generator=torch.Generator().manual_seed(0))
    plain, acts = model.run_with_cache(ids, names_filter=["blocks.1.hook_resid_pre"])
    own = acts["blocks.1.hook_resid_pre"][0]
    patches = [circuits.SidePatch(1, head, side, own) for head in range(2) for side in circuits.SIDES]
    assert torch.allclose(interp.run_hooked(model, ids, circuits.side_edits(model, [patches])), plain, atol=1e-6)
