"""Stopping a demo's training run where a test wants it: `stopping_fit` wraps models.train.fit
so that, in the run that writes files (out_dir given), reaching batch `index` of epoch
`epoch` calls `action` first: raise KeyboardInterrupt (Ctrl-C), or block until the test
kills the process. `run_until_killed` runs a demo in a child process stopped that way and
SIGKILLs it once the child says it is blocked (after its epoch checkpoints are on disk)."""
import pathlib
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


class StoppedBatches:
    """An epoch's batches that call `action` before handing out batch `index`."""

    def __init__(self, source, index, action):
        self.source, self.index, self.action = source, index, action

    def __len__(self):
        return len(self.source)

    def __iter__(self):
        for i, batch in enumerate(self.source):
            if i == self.index:
                self.action()
            yield batch


def stopping_fit(real_fit, epoch, index, action):
    """real_fit, whose runs with an out_dir call action() before batch `index` of `epoch`."""
    def fit(loss_fn, params, optimizer, batches, epochs, out_dir=None, *args, **kwargs):
        def stopped(e):
            source = batches(e)
            return StoppedBatches(source, index, action) if e == epoch else source
        return real_fit(loss_fn, params, optimizer, stopped if out_dir is not None else batches,
                        epochs, out_dir, *args, **kwargs)
    return fit


def ctrl_c():
    raise KeyboardInterrupt


CHILD = """
import pathlib, sys, time
sys.path[:0] = [{root!r}, {tests!r}]
import importlib
from models import train
from helpers.stopping import stopping_fit

def block():
    pathlib.Path({marker!r}).write_text("blocked")
    time.sleep(600)

train.fit = stopping_fit(train.fit, {epoch}, {index}, block)
importlib.import_module("demos.{demo}").main({argv!r})
"""


def run_until_killed(demo, argv, epoch, index, marker, timeout=300):
    """Run demos.<demo>.main(argv) in a child process that blocks before batch `index` of
    `epoch`; SIGKILL it there. -> the child's return code (-SIGKILL)."""
    code = CHILD.format(root=str(ROOT), tests=str(ROOT / "tests"), marker=str(marker),
                        epoch=epoch, index=index, demo=demo, argv=[str(a) for a in argv])
    # the parent's environment, BLAS threads included: a resumed run matches an uninterrupted
    # one bit for bit at the same thread count (OpenBLAS splits a product by its threads)
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while not pathlib.Path(marker).exists():
        if child.poll() is not None:
            raise AssertionError(f"the child ended before blocking: {child.stderr.read()}")
        if time.monotonic() > deadline:
            child.kill()
            raise AssertionError("the child did not reach the batch it blocks at")
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stderr.close()
    return child.returncode
