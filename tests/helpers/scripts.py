"""The project's scripts (files run as programs, not packages) loaded as modules for tests."""
import importlib.util
import pathlib

TESTS = pathlib.Path(__file__).resolve().parents[1]


def load_script(relative_path, name):
    """The module of tests/<relative_path> (e.g. "gpu/check.py"), imported under `name`."""
    spec = importlib.util.spec_from_file_location(name, TESTS / relative_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
