"""The package itself: its version, that pictures need no Python graphviz package, and that
the explorer's script and style are installed with it."""
import configparser
import fnmatch
import pathlib
import subprocess
import sys
from importlib import metadata

import autograd_lite as ag

ROOT = pathlib.Path(__file__).resolve().parents[1]


def setup_cfg():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def test_the_version_is_setup_cfgs():
    assert ag.__version__ == setup_cfg()["metadata"]["version"]
    assert ag.__version__ == metadata.version("autograd-lite")


def test_without_installed_metadata_the_version_says_unknown():
    script = ("import importlib.metadata as m\n"
              "def missing(name):\n"
              "    raise m.PackageNotFoundError(name)\n"
              "m.version = missing\n"
              "import autograd_lite\n"
              "print(autograd_lite.__version__)\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "0+unknown"


def test_no_extra_asks_for_the_graphviz_python_package():
    """The pictures call the `dot` program; nothing imports the `graphviz` package."""
    extras = setup_cfg()["options.extras_require"]
    assert dict(extras) == {"demos": "\ntqdm\nmatplotlib",
                            "test": "\npytest\nhypothesis\nselenium\ntqdm\nmatplotlib"}
    sources = [*ROOT.glob("autograd_lite/**/*.py"), *ROOT.glob("models/**/*.py")]
    assert sources and not any("import graphviz" in path.read_text() for path in sources)


def test_the_explorers_script_and_style_are_package_data():
    patterns = [p.strip() for p in
                setup_cfg()["options.package_data"]["autograd_lite.viz"].split(",")]
    assets = [p.name for p in (ROOT / "autograd_lite" / "viz").iterdir()
              if p.is_file() and p.suffix != ".py"]
    assert sorted(assets) == ["explorer.css", "explorer.js"]
    assert all(any(fnmatch.fnmatch(name, pattern) for pattern in patterns) for name in assets)
