"""The README's set-up on a fresh machine, the first time: its commands, read from the
README's "Set up" block, run in a copy of the repository with a new virtual environment (no
system packages: pip installs numpy, numba and the rest from the registry) and an empty
numba cache. The demo's notices go to stderr, so a trained model's answers on stdout are the
answers alone, even while every kernel compiles; the compile notice comes once and not
again from the cache; and the demo tests that read stdout pass on their first run.

It downloads and installs packages (a few minutes), so it runs where
AUTOGRAD_LITE_FRESH_INSTALL=1 (.ci/run sets it) and skips elsewhere."""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
NOTICE = "compiling numba's kernels on their first call"
# What the test runs in place of the README's commands after each install: a quick run of
# the same demo, and the tests that read the demos' stdout, not the whole suite.
DEMO = ["--quick", "--epochs", "2", "--epoch-size", "30", "--held-out", "20", "--out",
        "runs/first"]
TESTS = ["tests/test_demo_translate.py::test_quick_run_learns_saves_and_ends_with_its_measured_"
         "result", "tests/test_demo_bad_input.py::test_a_prediction_from_words_the_model_never_"
         "saw_says_so", "-q", "-p", "no:cacheprovider"]

pytestmark = pytest.mark.skipif(os.environ.get("AUTOGRAD_LITE_FRESH_INSTALL") != "1",
                                reason="installs from the package registry: set "
                                       "AUTOGRAD_LITE_FRESH_INSTALL=1 (as .ci/run does)")


def set_up_commands():
    """The README's "Set up" commands: [(pip arguments, the command after it)], from lines
    such as `pip install -e ".[demos]" && python -m demos.translate`."""
    block = re.search(r"## Set up\n.*?```bash\n(.*?)```", README.read_text(), re.S).group(1)
    commands = []
    for line in block.strip().splitlines():
        install, _, then = line.partition(" && ")
        assert install.startswith("pip install "), line
        commands.append((shlex.split(install)[2:], then.strip()))
    return commands


def copy_of_the_repository(folder):
    """The repository's files (tracked, and new ones not ignored) in `folder`, as a clone
    has them: no build, cache or run left over."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in listed.splitlines():
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


def test_the_readme_set_up_passes_the_first_time_with_an_empty_numba_cache(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git lists the repository's files")
    clone = copy_of_the_repository(tmp_path / "clone")
    environment = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", environment], check=True)  # no system packages
    python = str(environment / "bin" / "python")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTHON", "VIRTUAL_ENV", "NUMBA"))}
    env.update(PATH=f"{environment / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"), VIRTUAL_ENV=str(environment))

    def run(*command, cache=None):
        done = subprocess.run(command, cwd=clone, capture_output=True, text=True, timeout=900,
                              env=dict(env, NUMBA_CACHE_DIR=str(cache)) if cache else env)
        assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    (demo_install, demo), (test_install, tests) = set_up_commands()
    assert (demo, tests) == ("python -m demos.translate", "pytest")
    run(python, "-m", "pip", "install", "-q", *demo_install)
    first = run(python, "-m", "demos.translate", *DEMO)
    assert first.stderr.count(NOTICE) == 1, first.stderr
    assert re.search(r"numba compiled \d+ of the kernels", first.stderr), first.stderr
    assert first.stdout.splitlines()[-1].startswith("held-out exact match: ")
    assert NOTICE not in first.stdout
    # stdout holds the answers alone, with every kernel compiling (an empty cache of its own)
    answers = run(python, "-m", "demos.translate", "--model", "runs/first", "--number", "5",
                  "12", cache=tmp_path / "another-cache")
    assert NOTICE in answers.stderr
    assert [line.split("\t")[0] for line in answers.stdout.splitlines()] == ["5", "12"]
    again = run(python, "-m", "demos.translate", *DEMO[:-1], "runs/second")
    assert NOTICE not in again.stderr and "numba compiled" not in again.stderr
    run(python, "-m", "pip", "install", "-q", *test_install)
    run(python, "-m", "pytest", *TESTS)
