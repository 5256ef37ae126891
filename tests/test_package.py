"""The package itself: its version, its requirements' floors, that pictures need no Python
graphviz package, and that the explorer's script and style are installed with it."""
import configparser
import fnmatch
import os
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


def requirements():
    """{"core" or an extra's name: its requirements} as setup.cfg states them, each a
    packaging Requirement (packaging is pytest's own dependency)."""
    from packaging.requirements import Requirement
    config = setup_cfg()
    texts = {"core": config["options"]["install_requires"], **config["options.extras_require"]}
    return {name: [Requirement(line) for line in text.split("\n") if line]
            for name, text in texts.items()}


def test_every_requirement_states_a_floor_that_this_environment_meets():
    """A floor is the oldest release tested (setup.cfg says where), so every requirement has
    one, the jupyter front end aside, and whatever is installed where the suite runs meets
    it; the demos extra includes `fast` (the demos' timings are the compiled kernels')."""
    from packaging.version import Version
    stated = requirements()
    for requirement in (r for group in stated.values() for r in group):
        floors = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        assert len(floors) == len(requirement.specifier), requirement  # floors, no ceilings
        assert floors or requirement.name == "jupyter", requirement
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            continue
        assert all(Version(installed) >= Version(f) for f in floors), (requirement, installed)
    assert {str(r) for r in stated["fast"]} <= {str(r) for r in stated["demos"]}


def test_the_pictures_need_no_graphviz_python_package():
    """The pictures call the `dot` program, and nothing imports the `graphviz` package."""
    sources = [*ROOT.glob("autograd_lite/**/*.py"), *ROOT.glob("models/**/*.py")]
    assert sources and not any("import graphviz" in path.read_text() for path in sources)


# Each package of the engine, with the packages it may import (DESIGN.md's layout: viz, optim, io
# and the transforms above ops; ops above kernels and core; core above nothing; interrupts.py
# a leaf below all, which the kernels use while numba compiles).
MAY_IMPORT = {
    "interrupts": set(),
    "core": set(),
    "kernels": {"interrupts"},
    "ops": {"core", "kernels"},
    "optim": {"core", "kernels"},
    "io": {"core"},
    "transforms": {"core", "ops"},
    "gradcheck": {"core", "ops"},
    "viz": {"core", "ops"},
}


def engine_imports(path):
    """The top-level engine packages a module imports, by name ("core", "ops", ...)."""
    import ast
    package = path.relative_to(ROOT / "autograd_lite").parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(package[:len(package) - node.level + 1])
            target = base + (node.module.split(".") if node.module else [])
            names = [target[0]] if target else [alias.name for alias in node.names]
            found.update(names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autograd_lite."):
            found.add(node.module.split(".")[1])
    return found


def test_the_engine_imports_point_one_way():
    """No package reaches up or sideways: core imports no op, ops import no optimizer."""
    for path in (ROOT / "autograd_lite").rglob("*.py"):
        parts = path.relative_to(ROOT / "autograd_lite").parts
        if parts == ("__init__.py",):
            continue
        level = parts[0].removesuffix(".py")
        reached = engine_imports(path) - {level}
        assert reached <= MAY_IMPORT[level], f"{'/'.join(parts)} imports {reached - MAY_IMPORT[level]}"


def test_the_explorers_script_and_style_are_package_data():
    patterns = [p.strip() for p in
                setup_cfg()["options.package_data"]["autograd_lite.viz"].split(",")]
    assets = [p.name for p in (ROOT / "autograd_lite" / "viz").iterdir()
              if p.is_file() and p.suffix != ".py"]
    assert sorted(assets) == ["explorer.css", "explorer.js"]
    assert all(any(fnmatch.fnmatch(name, pattern) for pattern in patterns) for name in assets)


def test_the_core_install_needs_numpy_alone_and_imports_numba_lazily():
    """`import autograd_lite` loads no numba; the first kernel call does where numba is
    installed (the `fast` extra), unless AUTOGRAD_LITE_KERNELS=numpy asks for numpy's."""
    assert [r.name for r in requirements()["core"]] == ["numpy"]
    script = ("import sys, autograd_lite as ag\n"
              "print('numba' in sys.modules)\n"
              "print(ag.kernels.backend(), 'numba' in sys.modules)\n")
    for setting, expected in (("", ["False", "numba", "True"]),
                              ("numpy", ["False", "numpy", "False"])):
        out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                             text=True, check=True,
                             env={**os.environ, "AUTOGRAD_LITE_KERNELS": setting})
        assert out.stdout.split() == expected
