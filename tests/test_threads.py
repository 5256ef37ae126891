"""The thread policy (autograd_lite/threads.py), each case in a fresh process: importing sets
nothing, the count is threadpoolctl's reading of the BLAS where it is installed and the
environment's otherwise (OPENBLAS_NUM_THREADS, then OMP_NUM_THREADS, then the cores), capped
at the cores; set_threads and thread_count round trip, with threadpoolctl present (the BLAS
follows) and hidden."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
HIDE_THREADPOOLCTL = "import sys; sys.modules['threadpoolctl'] = None  # import fails\n"
VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def run_python(script, **environment):
    """The JSON that `script` prints last, run in a fresh process with the thread variables
    as given (the others removed)."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, env={**env, **environment})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


BLAS_THREADS = ("def blas():  # threadpoolctl's reading of the BLAS, None where it is hidden\n"
                "    if sys.modules.get('threadpoolctl', 1) is None:\n"
                "        return None\n"
                "    import threadpoolctl\n"
                "    return [p['num_threads'] for p in threadpoolctl.threadpool_info()\n"
                "            if p['user_api'] == 'blas']\n")


def cores_count_and_blas(hide_threadpoolctl, **environment):
    """[the cores, ag.thread_count(), threadpoolctl's reading] in a fresh process."""
    script = ((HIDE_THREADPOOLCTL if hide_threadpoolctl else "")
              + "import json, sys, numpy, autograd_lite as ag\n" + BLAS_THREADS
              + "print(json.dumps([ag.threads.cores(), ag.thread_count(), blas()]))\n")
    return run_python(script, **environment)


def needs_threadpoolctl():
    try:
        import threadpoolctl  # noqa: F401
    except ImportError:
        pytest.skip("threadpoolctl is not installed (the `fast` extra)")


def test_importing_sets_nothing_and_a_step_at_two_threads_starts_no_thread():
    """The environment and the process's threads are as they were after `import
    autograd_lite, models` and after an LM training step at 2 threads (OpenBLAS's own threads
    aside, which it starts when numpy loads it); the BLAS keeps the count it started with."""
    script = ("import json, os, sys, threading\n"
              "import numpy as np\n"
              "before = dict(os.environ), threading.active_count()\n"
              "import autograd_lite as ag\n"
              "from models import lm\n"
              "imported = dict(os.environ), threading.active_count()\n"
              "p = lm.init(np.random.default_rng(0), 65, 64, 4, 256, 2, 64)\n"
              "ids = np.random.default_rng(1).integers(0, 65, (16, 65))\n"
              "loss = lambda p: ag.cross_entropy(lm.apply(p, ids[:, :-1]), ids[:, 1:])\n"
              "adam = ag.optim.adam(1e-3)\n"
              "p, _ = adam.update(p, ag.gradient(loss, p)[0], adam.init(p))\n"
              "stepped = dict(os.environ), threading.active_count()\n"
              + BLAS_THREADS +
              "print(json.dumps([imported == before, stepped == before, ag.thread_count(),\n"
              "                  ag.threads.cores(), blas()]))\n")
    imported, stepped, count, cores, blas = run_python(script, OPENBLAS_NUM_THREADS="2")
    assert imported and stepped
    assert count == min(2, cores)
    assert blas is None or set(blas) == {min(2, cores)}  # None: no threadpoolctl installed


@pytest.mark.parametrize("environment, wanted", [
    ({"OPENBLAS_NUM_THREADS": "1"}, 1),
    ({"OMP_NUM_THREADS": "1"}, 1),
    ({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "4"}, 1),
    ({"OMP_NUM_THREADS": "1,3"}, 1),
    ({}, "cores"),
    ({"OPENBLAS_NUM_THREADS": "9999"}, "cores"),
])
def test_without_threadpoolctl_the_variables_say_capped_at_the_cores(environment, wanted):
    cores, count, _ = cores_count_and_blas(True, **environment)
    assert count == (cores if wanted == "cores" else min(wanted, cores))


@pytest.mark.parametrize("environment", [{"OPENBLAS_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "1"},
                                         {}, {"OPENBLAS_NUM_THREADS": "9999"}])
def test_with_threadpoolctl_its_reading_of_the_blas_capped_at_the_cores(environment):
    needs_threadpoolctl()
    cores, count, blas = cores_count_and_blas(False, **environment)
    assert count == min(max(blas), cores)
    if environment.get("OPENBLAS_NUM_THREADS") == "1":
        assert count == 1


def test_threadpoolctls_reading_comes_before_the_environment():
    """A BLAS limited to one thread before the library looks: the count is 1, whatever the
    variables say."""
    needs_threadpoolctl()
    script = ("import json, numpy, threadpoolctl\n"
              "threadpoolctl.threadpool_limits(1, user_api='blas')\n"
              "import autograd_lite as ag\n"
              "print(json.dumps(ag.thread_count()))\n")
    assert run_python(script, OMP_NUM_THREADS="2") == 1


def test_a_variable_that_is_no_count_is_a_clear_error():
    script = (HIDE_THREADPOOLCTL + "import json, autograd_lite as ag\n"
              "try:\n"
              "    ag.thread_count()\n"
              "except ValueError as error:\n"
              "    print(json.dumps(str(error)))\n")
    assert run_python(script, OMP_NUM_THREADS="two") == (
        "OMP_NUM_THREADS='two': expected a whole number of threads >= 1")


@pytest.mark.parametrize("hidden", [True, False], ids=["threadpoolctl hidden", "present"])
def test_set_threads_and_thread_count_round_trip(hidden):
    """set_threads(n) is what thread_count() reads, above the cores too; with threadpoolctl
    the BLAS takes the count (threadpoolctl's own reading), without it the BLAS keeps its
    own. A count that is not a whole number >= 1 is refused by name."""
    if not hidden:
        needs_threadpoolctl()
    script = ((HIDE_THREADPOOLCTL if hidden else "")
              + "import json, sys, numpy, autograd_lite as ag\n" + BLAS_THREADS
              + "counts = []\n"
              "for n in (3, 1, 8):\n"
              "    ag.set_threads(n)\n"
              "    counts.append([ag.thread_count(), blas()])\n"
              "errors = []\n"
              "for n in (0, 2.5, True, '2'):\n"
              "    try:\n"
              "        ag.set_threads(n)\n"
              "    except ValueError as error:\n"
              "        errors.append(str(error))\n"
              "print(json.dumps([counts, errors, ag.thread_count()]))\n")
    counts, errors, after = run_python(script, OPENBLAS_NUM_THREADS="2")
    assert [count for count, _ in counts] == [3, 1, 8]
    if hidden:
        assert [blas for _, blas in counts] == [None] * 3
    else:
        assert [set(blas) for _, blas in counts] == [{3}, {1}, {8}]
    assert errors == [f"set_threads: n={n!r}, expected a whole number >= 1"
                      for n in (0, 2.5, True, "2")]
    assert after == 8
