import pytest
import torch

from gptcore import checkpoint as ckpt
from gptcore import optim
from gptcore.cli import main
from gptcore.config import GPTConfig
from gptcore.data import Corpus
from gptcore.events import StepEvent
from gptcore.model import GPT
from gptcore.optim import Muon, adamw_groups, make_optimizer, orthogonalize, set_lr
from gptcore.train import TrainConfig, TrainConfigError, Trainer

TINY = GPTConfig(d_model=32, n_layer=2, n_head=2, d_ff=88, context=32, vocab_size=20)
CORPUS = Corpus("the cat sat on the mat. the dog ate the log. " * 200, "toy")
MUON = dict(optimizer="muon", lr=1e-3, muon_lr=0.02, weight_decay=0.0, decay_all=False, beta2=0.99)


def ill_conditioned(rows: int, cols: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A matrix whose singular values span 1 … 0.01, and the exact U·Vᵀ of it."""
    gen = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(rows, rows, generator=gen))
    v, _ = torch.linalg.qr(torch.randn(cols, rows, generator=gen))
    return u @ torch.diag(torch.logspace(0, -2, rows)) @ v.T, u @ v.T


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_orthogonalize_evens_out_the_singular_values_and_keeps_the_directions(dtype):
    g, exact = ill_conditioned(48, 120)
    x = orthogonalize(g[None], dtype=dtype)[0]
    assert x.dtype == torch.float32
    s = torch.linalg.svdvals(x)
    assert s.min() > 0.5 and s.max() < 1.3  # was 0.01 … 1
    assert torch.nn.functional.cosine_similarity(x.flatten(), exact.flatten(), dim=0) > 0.95


def test_muon_steps_are_decayed_orthogonalized_nesterov_momentum_and_the_rest_moves_like_adamw(monkeypatch):
    # float32, so that rounding noise in the gradients' near-null directions stays far below the tolerance
    monkeypatch.setattr(optim, "ORTHO_DTYPE", torch.float32)
    torch.manual_seed(0)
    model, twin = GPT(TINY), GPT(TINY)
    twin.load_state_dict(model.state_dict())
    tc = TrainConfig(**{**MUON, "weight_decay": 0.1})
    opt = make_optimizer(model, tc)
    rest = [p for n, p in twin.named_parameters() if not (n.startswith("blocks.") and p.dim() == 2)]
    twin_opt = torch.optim.AdamW(adamw_groups([(n, p) for n, p in twin.named_parameters() if p in set(rest)],
                                              tc), lr=5e-4, betas=(0.9, 0.99), weight_decay=0.1)
    set_lr(opt, 5e-4)  # the schedule at half the peak: Muon's groups follow at 0.02 / 1e-3 times it
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([5e-4, 5e-4, 0.01, 0.01])
    grads, befores = [], []
    for _ in range(2):  # the second step is where momentum shows
        idx = torch.randint(20, (4, 32))
        for m, o in ((model, opt), (twin, twin_opt)):
            o.zero_grad()
            m(idx, idx)[1].backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        befores.append({n: p.detach().clone() for n, p in model.named_parameters()})
        opt.step()
        twin_opt.step()
        with torch.no_grad():  # the twin's blocks follow the model's, so both see the same second gradient
            for (n, p), q in zip(model.named_parameters(), twin.parameters()):
                if n.startswith("blocks.") and p.dim() == 2:
                    q.copy_(p)
    for n, p in model.named_parameters():
        if not (n.startswith("blocks.") and p.dim() == 2):
            torch.testing.assert_close(p, dict(twin.named_parameters())[n], rtol=0, atol=1e-6, msg=n)
            continue
        nesterov = grads[1][n] + 0.95 * (0.95 * grads[0][n] + grads[1][n])
        decayed = befores[1][n] * (1 - 0.01 * 0.1)
        pieces = 3 if "qkv" in n else 1
        for step, update in zip((p - decayed).chunk(pieces), nesterov.chunk(pieces)):
            rows, cols = step.shape
            tall = rows > cols
            expected = orthogonalize((update.T if tall else update)[None], dtype=torch.float32)[0]
            expected = -0.01 * max(1, rows / cols) ** 0.5 * (expected.T if tall else expected)
            torch.testing.assert_close(step, expected, rtol=0, atol=1e-5, msg=n)
            top = torch.linalg.svdvals(step).max() / 0.01 / max(1, rows / cols) ** 0.5
            assert 0.7 < top < 1.3, n


def test_make_optimizer_puts_exactly_the_blocks_matrices_on_muon():
    model = GPT(TINY)
    names = {id(p): n for n, p in model.named_parameters()}
    opt = make_optimizer(model, TrainConfig(**MUON))
    assert isinstance(opt, Muon)
    on_muon = {names[id(p)]: g["pieces"] for g in opt.param_groups if g["muon"] for p in g["params"]}
    assert on_muon == {f"blocks.{i}.{m}.weight": 3 if m == "attn.qkv" else 1
                       for i in range(2) for m in ("attn.qkv", "attn.proj", "ffn.w1", "ffn.w3", "ffn.w2")}
    assert all(g["lr"] == pytest.approx(0.02) for g in opt.param_groups if g["muon"])
    adamw = make_optimizer(model, TrainConfig())
    assert isinstance(adamw, torch.optim.AdamW) and len(adamw.param_groups) == 1  # the tutorial: one group


def test_a_muon_run_resumes_with_its_momentum(tmp_path):
    run = tmp_path / "m"
    first = Trainer.fresh(TINY, TrainConfig(steps=6, batch_size=4, final_eval=False, **MUON), CORPUS, out_dir=run)
    first.run()
    saved = {(id(p), k): v.clone() for p, s in first.optimizer.state.items() for k, v in s.items()}
    resumed = Trainer.resume(run, TrainConfig(steps=9, batch_size=4, final_eval=False, **MUON), CORPUS)
    slots = {k for s in resumed.optimizer.state.values() for k in s}
    assert slots == {"momentum", "step", "exp_avg", "exp_avg_sq"}
    names = dict(first.model.named_parameters())
    for name, p in resumed.model.named_parameters():
        for k, v in resumed.optimizer.state[p].items():
            assert torch.equal(v, saved[(id(names[name]), k)]), (name, k)
    losses = []
    resumed.run(lambda event: losses.append(event.loss) if isinstance(event, StepEvent) else None)
    assert len(losses) == 3 and ckpt.load_checkpoint(run).meta["step"] == 9


@pytest.mark.parametrize("first, then", [("muon", "adamw"), ("adamw", "muon")])
def test_switching_optimizer_on_resume_starts_the_new_one_fresh(tmp_path, first, then):
    run = tmp_path / "switch"
    settings = dict(MUON, batch_size=4, final_eval=False)
    Trainer.fresh(TINY, TrainConfig(**{**settings, "steps": 3, "optimizer": first}), CORPUS, out_dir=run).run()
    resumed = Trainer.resume(run, TrainConfig(**{**settings, "steps": 5, "optimizer": then}), CORPUS)
    assert not resumed.optimizer.state
    assert resumed.run() == "finished" and ckpt.read_meta(run)["train_config"]["optimizer"] == then


@pytest.mark.parametrize("bad, message", [({"optimizer": "sgd"}, "optimizer must be adamw or muon"),
                                          ({"optimizer": "muon", "muon_lr": 0.0}, "muon_lr must be greater than 0"),
                                          ({"muon_lr": -1.0}, "muon_lr must be a number"),
                                          ({"beta2": 1.0}, "beta2 must be a number from 0 to 0.9999")])
def test_bad_optimizer_settings_are_refused(bad, message):
    with pytest.raises(TrainConfigError, match=message):
        TrainConfig(**bad)


def test_the_cli_trains_the_fast_recipe_with_muon(tmp_path, capsys):
    out = tmp_path / "fast"
    assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--out", str(out), "--recipe", "fast",
                 "--steps", "4", "--d-model", "32", "--n-head", "2", "--d-ff", "88", "--context", "32"]) == 0
    meta = ckpt.read_meta(out)
    assert meta["train_config"]["optimizer"] == "muon" and meta["train_config"]["batch_size"] == 16
    assert meta["step"] == 4 and "checkpoint saved" in capsys.readouterr().out


def test_the_cli_refuses_a_recipe_for_a_resumed_run(tmp_path, capsys):
    assert main(["train", "--data", "builtin", "--out", str(tmp_path / "r"), "--resume", "--recipe", "fast"]) == 2
    assert "--recipe starts a new run" in capsys.readouterr().err
