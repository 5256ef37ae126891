"""The package itself: its version, its requirements' floors, that pictures need no Python
graphviz package, that the explorer's script and style are installed with it, and the
direction of every import. The installed version's test needs `pip install -e .` and the
lazy numba import's test numba (CI installs both): where either is missing they skip, saying
so (tests/conftest.py's `installed_version` and `numba`)."""
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


def test_the_version_is_setup_cfgs(installed_version):
    assert ag.__version__ == setup_cfg()["metadata"]["version"]
    assert ag.__version__ == installed_version


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
    it; the demos extra includes `fast` (the demos' timings are the compiled kernels').
    Ceilings only where a newer release is known to differ: torch's extra stops below the
    first release CI has not run."""
    from packaging.version import Version
    stated = requirements()
    for requirement in (r for group in stated.values() for r in group):
        floors = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        ceilings = [spec for spec in requirement.specifier if spec.operator == "<"]
        assert not ceilings or requirement.name == "torch", requirement
        assert len(floors) + len(ceilings) == len(requirement.specifier), requirement
        assert floors or requirement.name == "jupyter", requirement
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            continue
        assert requirement.specifier.contains(Version(installed), prereleases=True), \
            (requirement, installed)
    assert {str(r) for r in stated["fast"]} <= {str(r) for r in stated["demos"]}


def test_the_pictures_need_no_graphviz_python_package():
    """The pictures call the `dot` program, and nothing imports the `graphviz` package."""
    sources = [*ROOT.glob("autograd_lite/**/*.py"), *ROOT.glob("models/**/*.py")]
    assert sources and not any("import graphviz" in path.read_text() for path in sources)


# Each package of the engine, with the packages it may import (DESIGN.md's layout: viz, optim, io
# and the transforms above ops, batching (vmap and the ops' batching rules) among the
# transforms; ops above kernels and core; kernels above core (its device registry: whose
# kernels an array takes); core above nothing; interrupts.py, threads.py and memory.py leaves
# below all: the kernels use the first two while numba compiles and to size their pool, and
# the third is the allocator setting a program asks for).
MAY_IMPORT = {
    "interrupts": set(),
    "threads": set(),
    "memory": set(),
    "core": set(),
    "kernels": {"core", "interrupts", "threads"},
    "ops": {"core", "kernels"},
    "optim": {"core", "kernels"},
    "io": {"core"},
    "batching": {"core", "ops"},
    "transforms": {"core", "ops", "batching"},
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


def test_the_core_install_needs_numpy_alone_and_imports_numba_lazily(numba):
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


# ---- the import graph of the library, the models and the demos ---------------------------------

PACKAGES = ("autograd_lite", "models", "demos")
MODEL_FILES = ("attention", "layers", "blocks", "transformer", "lm", "classifier", "decoding")
# Support code of models/ that reaches into the engine's utilities (no model may): atomic
# writes of a run's files, and Ctrl-C deferred while they are written or a bar is drawn.
SUPPORT_PACKAGES = ("models.training", "models.inputs")
SUPPORT_IMPORTS = {"autograd_lite.io.atomic", "autograd_lite.interrupts"}


def module_name(path):
    """models/fast/attention.py -> 'models.fast.attention'; a package's __init__ -> its name."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules():
    """{module name: path} for every module of the three packages."""
    return {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def imports_of(path, known):
    """The modules (of `known`) that a file imports anywhere in it, functions included; an
    imported name that is a submodule counts as that submodule."""
    import ast
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level \
                else []
            module = ".".join(base + ([node.module] if node.module else []))
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                       for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in known)
    return found - {name}


def import_graph():
    known = modules()
    return {name: imports_of(path, known) for name, path in known.items()}


def test_no_module_of_the_library_the_models_or_the_demos_imports_itself_back():
    """No cycle in the import graph (an import inside a function counts: it is a cycle that
    Python merely tolerates), found by a depth-first search that reports the first one."""
    graph, state, path = import_graph(), {}, []

    def visit(name):
        state[name] = "open"
        path.append(name)
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                cycle = path[path.index(target):] + [target]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target)
        path.pop()
        state[name] = "done"
    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_demos_use_models_and_models_use_the_public_engine():
    """demos -> models (-> models.fast) -> autograd_lite, the package itself: the engine
    imports no model or demo, a model no demo, and models/ no engine module but the package
    (its public `ag` API), with the support code's listed exceptions."""
    for name, targets in import_graph().items():
        top = name.split(".")[0]
        reached = {t.split(".")[0] for t in targets}
        if top == "autograd_lite":
            assert reached <= {"autograd_lite"}, f"{name} imports {sorted(targets)}"
        elif top == "models":
            assert reached <= {"models", "autograd_lite"}, f"{name} imports {sorted(targets)}"
            internal = {t for t in targets if t.startswith("autograd_lite.")}
            allowed = SUPPORT_IMPORTS if name.startswith(SUPPORT_PACKAGES) else set()
            assert internal <= allowed, f"{name} imports {internal}"


def test_only_the_models_fast_rules_call_the_kernels():
    """A model file holds the paper's functions, their init and their input checks: no
    ag.kernels (only models/fast may call them), and no word of fused bodies or references."""
    import ast
    for path in (ROOT / "models").rglob("*.py"):
        if "fast" in path.relative_to(ROOT / "models").parts:
            continue
        tree = ast.parse(path.read_text())
        kernels = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                   and node.attr == "kernels"]
        assert not kernels, f"{path.name}: ag.kernels at lines {kernels}"
        if path.stem in MODEL_FILES:
            text = path.read_text()
            for word in ("fused", "reference", "kernel"):
                assert word not in text, f"models/{path.name} says {word!r}"
