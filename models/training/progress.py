"""The progress line of a training epoch, on stderr: the batches done, the running loss and
the samples (or tokens) per second. tqdm draws it when installed (it is in the `demos`
extra, not a dependency); otherwise a plain line is rewritten in place at most twice a second.

    bar = progress_bar("epoch 3", "samples")
    bar.start(total=40, done=0, samples=0)          # total None: an iterable without len
    bar.show(done=1, loss=0.69, samples=32)         # after each step: epoch totals so far
    bar.close("train_loss 0.52, val_loss 0.61")     # the epoch's summary stays on screen
    notice("compiling ...")                         # a line on stderr, above a bar drawn

A Ctrl-C inside tqdm's drawing would leave the bar half updated (and its __del__ then
prints a traceback): the bar's calls run with Ctrl-C deferred to their end.
"""
import sys
import time

from autograd_lite.interrupts import deferred_interrupts


def notice(line):
    """`line` on stderr, above the progress bar when one is drawn (tqdm.write), else alone."""
    try:
        import tqdm
    except ImportError:
        print(line, file=sys.stderr, flush=True)
    else:
        tqdm.tqdm.write(line, file=sys.stderr)


def progress_bar(description, unit, enabled=True):
    """A tqdm bar, a plain line without tqdm, or nothing when not enabled."""
    if not enabled:
        return SilentBar()
    try:
        import tqdm
    except ImportError:
        return PlainBar(description, unit)
    return TqdmBar(tqdm.tqdm, description, unit)


class SilentBar:
    def start(self, total, done, samples):
        pass

    def show(self, done, loss, samples):
        pass

    def close(self, summary=""):
        pass


class Speed:
    """Samples per second since `start` (a resumed epoch counts only its new samples)."""

    def start(self, samples):
        self.first_samples, self.started = samples, time.perf_counter()

    def per_second(self, samples):
        return (samples - self.first_samples) / max(time.perf_counter() - self.started, 1e-9)


class TqdmBar(Speed):
    def __init__(self, tqdm, description, unit):
        self.tqdm, self.description, self.unit = tqdm, description, unit
        self.bar, self.speed = None, ""

    def start(self, total, done, samples):
        super().start(samples)
        with deferred_interrupts():
            self.bar = self.tqdm(total=total, initial=done, desc=self.description,
                                 unit="batch", file=sys.stderr, dynamic_ncols=True)

    def show(self, done, loss, samples):
        self.speed = f"{self.per_second(samples):.0f} {self.unit}/s"
        with deferred_interrupts():
            self.bar.set_postfix_str(f"loss {loss:.4f}, {self.speed}", refresh=False)
            self.bar.update(done - self.bar.n)  # tqdm redraws at most every 0.1 s

    def close(self, summary=""):
        bar, self.bar = self.bar, None  # closed once, even when a Ctrl-C follows
        if bar is not None:
            with deferred_interrupts():
                if summary:
                    bar.set_postfix_str(f"{summary}, {self.speed}", refresh=False)
                bar.close()


class PlainBar(Speed):
    INTERVAL = 0.5  # seconds between redraws

    def __init__(self, description, unit):
        self.description, self.unit = description, unit
        self.line, self.shown, self.width = None, 0.0, 0

    def start(self, total, done, samples):
        super().start(samples)
        self.total = f"/{total}" if total is not None else ""

    def show(self, done, loss, samples):
        self.line = (f"{self.description}: {done}{self.total} batches, loss {loss:.4f}, "
                     f"{self.per_second(samples):.0f} {self.unit}/s")
        if time.perf_counter() - self.shown >= self.INTERVAL:
            self.shown = time.perf_counter()
            self.draw(self.line, "")

    def close(self, summary=""):
        if self.line is not None or summary:
            self.draw(", ".join(s for s in (self.line, summary) if s), "\n")

    def draw(self, line, end):
        """Over the previous line, padded to cover all of it."""
        self.width = max(self.width, len(line))
        sys.stderr.write("\r" + line.ljust(self.width) + end)
        sys.stderr.flush()
