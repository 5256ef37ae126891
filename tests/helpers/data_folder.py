"""The folder of public data sets the real-data tests read (UCI sentiment sentences,
amazon_hatn, Tiny Shakespeare): $AUTOGRAD_LITE_DATA, else ../shared/data, beside the
repository. Tests that read it are marked `needs_data` and skip when it is absent."""
import os
from pathlib import Path

import pytest

DATA = Path(os.environ.get("AUTOGRAD_LITE_DATA",
                           Path(__file__).resolve().parents[3] / "shared" / "data"))

needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"no data folder at {DATA} "
                                                          f"(set AUTOGRAD_LITE_DATA)")
