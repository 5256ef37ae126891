"""train.fit: it learns, it equals a hand-written loop, it resumes bit for bit after Ctrl-C
or a finished epoch, a crash or a NaN never costs the last good checkpoint, and the progress
line shows the loss and the speed."""
import json
import os
import subprocess
import sys
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from models import classifier, data, run_files, train

N_LABELS, VOCAB, LENGTH = 3, 16, 8


def topic_reviews(rng, n):
    """A generated task: each label owns 3 'topic' tokens, and a review of length 8 holds 3 of
    its label's topic tokens among noise tokens (9..15). -> ids (n, 8), labels (n,)"""
    labels = rng.integers(0, N_LABELS, n)
    ids = rng.integers(3 * N_LABELS, VOCAB, (n, LENGTH))
    for i in range(n):
        ids[i, rng.choice(LENGTH, 3, replace=False)] = 3 * labels[i] + rng.integers(0, 3, 3)
    return ids, labels


def tiny_classifier(seed=1):
    return classifier.init(np.random.default_rng(seed), VOCAB, N_LABELS, d_model=16, n_heads=2,
                           d_ff=32, max_len=LENGTH, dropout=0.1)


def accuracy(logits, labels):
    return np.mean(np.argmax(logits, axis=-1) == labels)


def classifier_loss(p, batch, rng):
    """Cross-entropy, with the accuracy as a metric; dropout when rng is given."""
    ids, labels = batch
    logits = classifier.apply(p, ids, training=rng is not None, rng=rng)
    return ag.cross_entropy(logits, labels), {"accuracy": accuracy(ag.stop_gradient(logits),
                                                                   labels)}


def shuffled_batches(reviews, size=32):
    """batches(epoch): data.batches in an order drawn from the epoch, the last batch shorter."""
    return lambda epoch: data.batches(*reviews, size, rng=np.random.default_rng([7, epoch]))


def assert_identical(a, b):
    """Same structure and leaves equal bit for bit (arrays: same dtype and bytes)."""
    assert ag.tree_paths(a) == ag.tree_paths(b)
    for x, y in zip(ag.tree_leaves(a), ag.tree_leaves(b)):
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        else:
            assert x == y


def saved_run(out_dir, params, optimizer):
    """(position, history) from a run's last.npz."""
    return run_files.load_checkpoint(out_dir, run_files.Position(
        params, optimizer.init(params), 0, 0, 0, {}))


# ---------------------------------------------------------------- learning


def test_fit_reaches_95_percent_validation_accuracy_on_a_generated_task():
    """With data.batches as the training batches of each epoch and the validation batches."""
    rng = np.random.default_rng(0)
    reviews, (val_ids, val_labels) = topic_reviews(rng, 512), topic_reviews(rng, 256)

    def evaluate(p):
        return {"accuracy": accuracy(classifier.apply(p, val_ids), val_labels)}
    params, history = train.fit(classifier_loss, tiny_classifier(), ag.optim.adam(1e-2),
                                shuffled_batches(reviews), 8,
                                val_batches=data.batches(val_ids, val_labels, 64),
                                evaluate=evaluate, progress=False)
    last = history["epochs"][-1]
    assert last["accuracy"] > 0.95
    assert last["accuracy"] == accuracy(classifier.apply(params, val_ids), val_labels)
    # the loss_fn's metric on the validation batches, weighted by their sizes, is the same number
    assert last["val_accuracy"] == pytest.approx(last["accuracy"], abs=1e-12)
    assert history["epochs"][0]["train_loss"] > 3 * last["train_loss"]


def test_fit_equals_a_hand_written_loop_with_schedule_and_clipping():
    """The reference: value_and_gradient, clip_by_global_norm, update, with the rng of
    (seed, epoch, batch index); epoch means weighted by batch size (32, 32, 32, 4)."""
    reviews = topic_reviews(np.random.default_rng(0), 100)
    batches = shuffled_batches(reviews)
    optimizer = ag.optim.adam(lr=ag.optim.warmup_schedule(16, warmup=4, factor=2.0))
    params, history = train.fit(classifier_loss, tiny_classifier(), optimizer, batches, 2,
                                seed=5, clip_norm=0.5, progress=False)

    p, state, step_losses, records = tiny_classifier(), optimizer.init(tiny_classifier()), [], []
    for epoch in range(2):
        losses, accuracies, sizes = [], [], []
        for index, batch in enumerate(batches(epoch)):
            rng = np.random.default_rng([5, epoch, index])
            (loss, metrics), (g,) = ag.value_and_gradient(
                lambda p: classifier_loss(p, batch, rng), p, has_aux=True)
            p, state = optimizer.update(p, ag.optim.clip_by_global_norm(g, 0.5), state)
            losses.append(float(loss)), accuracies.append(metrics["accuracy"])
            sizes.append(len(batch[1]))
        step_losses += losses
        records.append({"epoch": epoch, "steps": 4 * (epoch + 1),
                        "train_loss": np.dot(losses, sizes) / 100,
                        "train_accuracy": np.dot(accuracies, sizes) / 100})
    assert_identical(params, p)
    assert history["step_loss"] == step_losses
    assert [r.keys() for r in history["epochs"]] == [r.keys() for r in records]
    for got, want in zip(history["epochs"], records):
        assert got == pytest.approx(want, rel=1e-12)


# ---------------------------------------------------------------- resume


class Interrupting:
    """batches(epoch) that raises KeyboardInterrupt once, where Ctrl-C would land: when the
    iterator is asked for batch `index` of `epoch`, or inside loss_fn on that batch."""

    def __init__(self, batches, epoch, index):
        self.batches, self.at, self.fired = batches, (epoch, index), False

    def __call__(self, epoch):
        for index, batch in enumerate(self.batches(epoch)):
            if (epoch, index) == self.at and not self.fired:
                self.fired = True
                raise KeyboardInterrupt
            yield batch


def interrupting(f, at, training_only=False):
    """f, raising KeyboardInterrupt on its call number `at` (from 0); with training_only,
    counting only the calls with an rng (loss_fn in training, not in validation)."""
    calls = {"n": 0}

    def wrapper(*args):
        if not training_only or args[2] is not None:
            calls["n"] += 1
            if calls["n"] - 1 == at:
                raise KeyboardInterrupt
        return f(*args)
    return wrapper


@pytest.mark.parametrize("where", ["batches", "loss_fn", "count"])
def test_resume_after_ctrl_c_mid_epoch_is_bit_identical(tmp_path, where):
    """Ctrl-C in any of the user's functions that a step calls: the iterator of batches,
    loss_fn (inside value_and_gradient), count (after the update, before the step is done)."""
    reviews = topic_reviews(np.random.default_rng(0), 100)
    batches, optimizer = shuffled_batches(reviews), ag.optim.adam(1e-2)
    validation = [topic_reviews(np.random.default_rng(3), 64)]
    common = dict(val_batches=validation, clip_norm=1.0, seed=3, progress=False)
    params, history = train.fit(classifier_loss, tiny_classifier(), optimizer, batches, 3,
                                out_dir=tmp_path / "whole", **common)

    at = 4 + 2  # epoch 1, batch 2: 4 batches an epoch
    loss_fn, first_batches, count = {
        "batches": (classifier_loss, Interrupting(batches, epoch=1, index=2), None),
        "loss_fn": (interrupting(classifier_loss, at, training_only=True), batches, None),
        "count": (classifier_loss, batches, interrupting(train.samples_in, at + 1)),  # + validation
    }[where]
    with pytest.raises(train.TrainingInterrupted) as stop:
        train.fit(loss_fn, tiny_classifier(), optimizer, first_batches, 3,
                  out_dir=tmp_path / "cut", count=count, **common)
    assert (stop.value.epoch, stop.value.step) == (1, 2)
    assert str(tmp_path / "cut" / "last.npz") in str(stop.value)
    assert "resume=True" in str(stop.value)
    saved_history = saved_run(tmp_path / "cut", params, optimizer)[1]
    assert saved_history["step_loss"] == history["step_loss"][:6]

    resumed, resumed_history = train.fit(classifier_loss, tiny_classifier(), optimizer, batches,
                                         3, out_dir=tmp_path / "cut", resume=True, **common)
    assert_identical(resumed, params)
    assert resumed_history == history
    assert_identical(saved_run(tmp_path / "cut", params, optimizer),
                     saved_run(tmp_path / "whole", params, optimizer))
    for name in ("best.npz", "history.json"):
        assert (tmp_path / "cut" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()


def test_resume_after_a_completed_epoch_is_bit_identical(tmp_path):
    batches, optimizer = shuffled_batches(topic_reviews(np.random.default_rng(0), 100)), \
        ag.optim.sgd(0.1, momentum=0.9)
    params, history = train.fit(classifier_loss, tiny_classifier(), optimizer, batches, 3,
                                out_dir=tmp_path / "whole", progress=False)
    train.fit(classifier_loss, tiny_classifier(), optimizer, batches, 1, out_dir=tmp_path / "cut",
              progress=False)
    resumed, resumed_history = train.fit(classifier_loss, tiny_classifier(), optimizer, batches,
                                         3, out_dir=tmp_path / "cut", resume=True, progress=False)
    assert_identical(resumed, params)
    assert resumed_history == history
    assert_identical(saved_run(tmp_path / "cut", params, optimizer),
                     saved_run(tmp_path / "whole", params, optimizer))


def test_ctrl_c_without_out_dir_is_a_plain_keyboard_interrupt():
    batches = Interrupting(shuffled_batches(topic_reviews(np.random.default_rng(0), 64)), 0, 1)
    with pytest.raises(KeyboardInterrupt) as stop:
        train.fit(classifier_loss, tiny_classifier(), ag.optim.sgd(0.1), batches, 1,
                  progress=False)
    assert type(stop.value) is KeyboardInterrupt


# ---------------------------------------------------------------- crashes and NaN


class Regression(NamedTuple):
    w: np.ndarray  # (3, 1)
    b: np.ndarray  # (1,)


def regression_loss(p, batch, rng):
    """Mean squared error of x w + b, with dropout on x; `poison` adds √(Σ 0·w), whose value is
    0 and whose gradient is NaN (0 · ∞)."""
    x, y, poison = batch
    out = ag.dropout(x, 0.2, rng) @ p.w + p.b
    loss = ag.mean((out - y) ** 2)
    return loss + ag.sqrt(ag.sum(p.w * 0.0)) if poison else loss


def regression_batches(nan_at=None, poison_at=None):
    """batches(epoch): 4 batches of 8; at (epoch, index) `nan_at` x holds a NaN, at `poison_at`
    the loss gets a NaN gradient."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], dtype=np.float32)

    def batches(epoch):
        for index in range(4):
            xb = x[8 * index: 8 * index + 8].copy()
            if (epoch, index) == nan_at:
                xb[3, 1] = np.nan
            yield xb, y[8 * index: 8 * index + 8], (epoch, index) == poison_at
    return batches


def regression_params():
    return Regression(np.zeros((3, 1), np.float32), np.zeros(1, np.float32))


@pytest.mark.parametrize("fault, what", [("nan_at", "the loss is nan"),
                                         ("poison_at", "the gradient is not finite")])
def test_a_nan_stops_naming_epoch_step_and_batch_and_keeps_the_last_good_checkpoint(
        tmp_path, fault, what):
    optimizer = ag.optim.adam(0.05)
    train.fit(regression_loss, regression_params(), optimizer, regression_batches(), 1,
              out_dir=tmp_path / "good", progress=False)
    with pytest.raises(train.NonFiniteError, match=rf"^fit: {what} at epoch 1, step 6 \(batch 2 "
                                                   r"of the epoch\); .*; stopped before the "
                                                   r"update: no file was written after the last "
                                                   r"good step \(a lower learning rate may "
                                                   r"help\)$"), \
            np.errstate(divide="ignore", invalid="ignore"):
        train.fit(regression_loss, regression_params(), optimizer,
                  regression_batches(**{fault: (1, 2)}), 3, out_dir=tmp_path / "bad",
                  progress=False)
    assert issubclass(train.NonFiniteError, FloatingPointError)
    assert_identical(saved_run(tmp_path / "bad", regression_params(), optimizer),
                     saved_run(tmp_path / "good", regression_params(), optimizer))
    assert json.loads((tmp_path / "bad" / "history.json").read_text())["epochs"] == \
        json.loads((tmp_path / "good" / "history.json").read_text())["epochs"]


def crash_writing(monkeypatch, name, after_calls):
    """Make the write of file `name` fail half-way (after some bytes) on its call number
    `after_calls` (from 0): np.savez into last.npz's temporary file, or json.dump of a
    history (a dict with step losses)."""
    calls = {"n": 0}
    target = (np, "savez") if name == "last.npz" else (json, "dump")
    real = getattr(*target)

    def failing(*args, **kwargs):
        if (os.path.basename(args[0].name).startswith(name) if name == "last.npz"
                else "step_loss" in args[0]):
            calls["n"] += 1
            if calls["n"] - 1 == after_calls:
                fh = args[0] if name == "last.npz" else args[1]
                fh.write(b"half" if name == "last.npz" else "{\"half")
                raise OSError("no space left on device (injected)")
        return real(*args, **kwargs)
    monkeypatch.setattr(*target, failing)


@pytest.mark.parametrize("name", ["last.npz", "history.json"])
def test_a_crash_while_writing_leaves_the_previous_file_whole(tmp_path, monkeypatch, name):
    optimizer = ag.optim.adam(0.05)
    train.fit(regression_loss, regression_params(), optimizer, regression_batches(), 1,
              out_dir=tmp_path / "one", progress=False)
    crash_writing(monkeypatch, name, after_calls=1)  # the write after the second epoch
    with pytest.raises(OSError, match="injected"):
        train.fit(regression_loss, regression_params(), optimizer, regression_batches(), 3,
                  out_dir=tmp_path / "crash", progress=False)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path / "crash")) == sorted(os.listdir(tmp_path / "one"))
    if name == "last.npz":  # still the first epoch's
        assert_identical(saved_run(tmp_path / "crash", regression_params(), optimizer),
                         saved_run(tmp_path / "one", regression_params(), optimizer))
    # history.json was not replaced (a crash in last.npz comes before it)
    assert (tmp_path / "crash" / "history.json").read_text() == \
        (tmp_path / "one" / "history.json").read_text()
    # and the run resumes from what is on disk to the end of an uninterrupted one
    params, history = train.fit(regression_loss, regression_params(), optimizer,
                                regression_batches(), 3, out_dir=tmp_path / "whole", progress=False)
    resumed, resumed_history = train.fit(regression_loss, regression_params(), optimizer,
                                         regression_batches(), 3, out_dir=tmp_path / "crash",
                                         resume=True, progress=False)
    assert_identical(resumed, params)
    assert resumed_history == history


# ---------------------------------------------------------------- files, refusals, progress


def test_out_dir_holds_the_best_params_the_history_and_the_hyperparameters(tmp_path):
    """best.npz: the params of the epoch with the lowest validation loss (here the validation
    labels of the last epoch are scrambled, so the best is not the last)."""
    reviews = topic_reviews(np.random.default_rng(0), 128)
    val_ids, val_labels = topic_reviews(np.random.default_rng(1), 64)

    def validation(epoch):
        return [(val_ids, (val_labels + (epoch == 3)) % N_LABELS)]
    seen = []
    params, history = train.fit(classifier_loss, tiny_classifier(), ag.optim.adam(1e-2),
                                shuffled_batches(reviews), 4, out_dir=tmp_path, val_batches=validation,
                                evaluate=lambda p: seen.append(p) or {}, clip_norm=2.0,
                                hyperparameters={"d_model": 16, "lr": 1e-2}, progress=False)
    val_losses = [r["val_loss"] for r in history["epochs"]]
    best = int(np.argmin(val_losses))
    assert best != 3 and val_losses[3] > val_losses[best]
    assert_identical(ag.load(tmp_path / "best.npz", like=params), seen[best])
    assert json.loads((tmp_path / "history.json").read_text()) == history
    assert len(history["step_loss"]) == 16 and history["epochs"][-1]["steps"] == 16
    assert json.loads((tmp_path / "hyperparameters.json").read_text()) == {
        "fit": {"seed": 0, "clip_norm": 2.0}, "hyperparameters": {"d_model": 16, "lr": 1e-2}}
    for epoch, (p, loss) in enumerate(zip(seen, val_losses)):  # recomputed, without dropout
        assert loss == float(classifier_loss(p, validation(epoch)[0], None)[0])


def run_regression(**kwargs):
    kwargs.setdefault("progress", False)
    return train.fit(kwargs.pop("loss_fn", regression_loss), regression_params(),
                     ag.optim.sgd(0.1), kwargs.pop("batches", regression_batches()),
                     kwargs.pop("epochs", 1), **kwargs)


def test_refusals_name_the_problem(tmp_path):
    run_regression(out_dir=tmp_path / "run", hyperparameters={"lr": 0.1})
    with pytest.raises(FileExistsError, match=r"last.npz exists: pass resume=True"):
        run_regression(out_dir=tmp_path / "run")
    with pytest.raises(FileNotFoundError, match=r"resume=True but there is no checkpoint"):
        run_regression(out_dir=tmp_path / "empty", resume=True)
    with pytest.raises(train.RunMismatch) as refused:  # a ValueError naming what differs
        run_regression(out_dir=tmp_path / "run", resume=True, hyperparameters={"lr": 0.2,
                                                                               "d": 3})
    assert str(refused.value) == (
        f"fit: resume=True with settings that differ from the run's "
        f"({tmp_path / 'run' / 'hyperparameters.json'}): hyperparameters.lr 0.2 now, 0.1 in the "
        f"run; hyperparameters.d 3 now, not set in the run; the resumed run would not continue the "
        f"same one")
    with pytest.raises(ValueError, match=r"resume=True needs the out_dir"):
        run_regression(resume=True)
    with pytest.raises(TypeError, match=r"hyperparameters go to hyperparameters.json"):
        run_regression(out_dir=tmp_path / "other", hyperparameters={"lr": lambda step: 0.1})
    with pytest.raises(ValueError, match=r"^fit: epochs must be a non-negative int, got 1.5$"):
        run_regression(epochs=1.5)
    with pytest.raises(TypeError, match=r"val_batches must be a function of the epoch or "
                                        r"batches to iterate every epoch \(a list\), got "
                                        r"list_iterator"):
        run_regression(val_batches=iter([]))
    with pytest.raises(TypeError, match=r"loss_fn must return the loss or \(loss, dict of "
                                        r"metrics\), got \(Box, list\)"):
        run_regression(loss_fn=lambda p, b, rng: (regression_loss(p, b, rng), [1.0]))
    with pytest.raises(ValueError, match=r"the metric 'errors' must be a scalar, got shape \(8,\)"):
        run_regression(loss_fn=lambda p, b, rng: (regression_loss(p, b, rng),
                                                  {"errors": b[1][:, 0]}))
    with pytest.raises(ValueError, match=r"loss_fn's metrics may not be called 'loss'"):
        run_regression(loss_fn=lambda p, b, rng: (regression_loss(p, b, rng), {"loss": 1.0}))
    with pytest.raises(ValueError, match=r"batches\(0\) gave no batches"):
        run_regression(batches=lambda epoch: [])
    with pytest.raises(ValueError, match=r"evaluate returned 'train_loss', which the history"):
        run_regression(evaluate=lambda p: {"train_loss": 0.0})


def test_a_resume_refuses_other_data_or_another_model(tmp_path):
    with pytest.raises(train.TrainingInterrupted):
        run_regression(out_dir=tmp_path, batches=Interrupting(regression_batches(), 0, 2))
    with pytest.raises(ValueError, match=r"^fit: batches\(0\) gave 1 batches, but the "
                                         r"checkpoint has used 2 of them$"):
        run_regression(out_dir=tmp_path, resume=True,
                       batches=lambda epoch: list(regression_batches()(epoch))[:1])
    with pytest.raises(train.RunMismatch, match=r"^fit: resume=True, but .*last\.npz does not "
                                              r"hold parameters of the model given \(another "
                                              r"model, or a run whose hyperparameters.json was "
                                              r"changed\?\): load: .*last\.npz: 'params.w' is "
                                              r"\(3, 1\) float32 in the file, but \(2, 1\) "
                                              r"float32 in `like`$"):
        smaller = Regression(np.zeros((2, 1), np.float32), np.zeros(1, np.float32))
        train.fit(regression_loss, smaller, ag.optim.sgd(0.1), regression_batches(), 1,
                  out_dir=tmp_path, resume=True)


def test_progress_line_with_tqdm_and_without(capsys, monkeypatch):
    listed = lambda epoch: list(regression_batches()(epoch))  # noqa: E731 (a len for the bar)
    run_regression(epochs=2, progress=True, batches=listed, count=lambda b: b[0].size,
                   unit="values")
    with_tqdm = capsys.readouterr().err
    assert "epoch 0" in with_tqdm and "epoch 1" in with_tqdm and "4/4" in with_tqdm
    assert "values/s" in with_tqdm and "train_loss" in with_tqdm
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    run_regression(epochs=2, progress=True)
    plain = capsys.readouterr().err
    assert plain.count("\n") == 2
    for epoch, line in enumerate(plain.split("\n")[:-1]):
        final = line.rsplit("\r", 1)[1]  # the last redraw of the line
        assert final.startswith(f"epoch {epoch}: 4 batches, loss ") and "samples/s" in final
        assert "train_loss" in final
    run_regression(epochs=1, progress=False)
    assert capsys.readouterr().err == ""


def test_fit_leaves_the_allocator_to_the_program(monkeypatch):
    """ag.memory.keep_freed_memory() changes the whole process for good: fit never calls it."""
    calls = []
    monkeypatch.setattr(ag.memory, "keep_freed_memory", lambda: calls.append(1))
    run_regression(epochs=2)
    assert calls == []


def test_every_file_of_a_run_has_the_umasks_permissions(tmp_path):
    """history.json and hyperparameters.json were 0600 (tempfile.mkstemp) beside 0644 files."""
    previous = os.umask(0o027)
    try:
        run_regression(out_dir=tmp_path, epochs=2, val_batches=list(regression_batches()(0)))
    finally:
        os.umask(previous)
    names = sorted(os.listdir(tmp_path))
    assert names == ["best.npz", "history.json", "hyperparameters.json", "last.npz"]
    assert {name: oct((tmp_path / name).stat().st_mode & 0o777) for name in names} == \
        {name: oct(0o666 & ~0o027) for name in names}


class AllocatorSet(Exception):
    """Raised by a stand-in for keep_freed_memory: the program asked, before it trained."""


@pytest.mark.parametrize("demo", ["classify", "translate", "generate"])
def test_the_training_demos_keep_freed_memory_themselves(demo, monkeypatch, tmp_path):
    import importlib
    module = importlib.import_module(f"demos.{demo}")

    def asked():
        raise AllocatorSet
    monkeypatch.setattr(ag.memory, "keep_freed_memory", asked)
    monkeypatch.setattr(train, "fit", lambda *a, **k: pytest.fail(f"{demo} trained first"))
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat. " * 50, encoding="utf-8")
    flags = ["--quick", "--out", str(tmp_path / "run")] + (["--data", str(text)]
                                                           if demo == "generate" else [])
    with pytest.raises(AllocatorSet):
        module.main(flags)


def test_a_stale_partial_file_of_a_killed_write_is_removed_at_the_next_start(tmp_path):
    """A process killed while writing leaves <name>.partial-<its pid>; the next fit in that
    out_dir deletes it, and leaves those of a process still running (this one's own)."""
    out = tmp_path / "run"
    train.fit(regression_loss, regression_params(), ag.optim.adam(0.05), regression_batches(), 1,
              out_dir=out, progress=False)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    stale = out / f"last.npz.partial-{int(finished.stdout)}"  # a process that has ended
    live = out / f"history.json.partial-{os.getppid()}"  # pytest's parent: running
    for path in (stale, live):
        path.write_bytes(b"half a file")
    train.fit(regression_loss, regression_params(), ag.optim.adam(0.05), regression_batches(), 2,
              out_dir=out, resume=True, progress=False)
    assert not stale.exists() and live.exists()
