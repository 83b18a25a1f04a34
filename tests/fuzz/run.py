"""Run one fuzz target under atheris (libFuzzer for Python): ``python -m tests.fuzz.run
TARGET [libFuzzer options] [corpus directories]``; scripts/fuzz.sh builds the sanitized
kernels and runs every target this way.

With ``SPARKCDC_FUZZ_KERNELS`` naming a directory, the compiled kernels (``_rowkernel``,
``_textrows``) are loaded from there instead of from the package: the builds with
AddressSanitizer, UBSan and coverage counters for libFuzzer that scripts/fuzz.sh makes.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import atheris

KERNELS = ("sparkcdc.mysql.binlog._rowkernel", "sparkcdc.mysql.protocol._textrows")


def load_kernels(directory: Path) -> None:
    """Put the kernels built in ``directory`` where sparkcdc imports them from."""
    for name in KERNELS:
        (path,) = directory.glob(f"{name.rsplit('.', 1)[1]}.*.so")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[spec.name] = module


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m tests.fuzz.run binlog|textrows [libFuzzer options] [corpus]")
    target_name = sys.argv.pop(1)
    kernels = os.environ.get("SPARKCDC_FUZZ_KERNELS")
    if kernels:
        load_kernels(Path(kernels))
    with atheris.instrument_imports(include=["sparkcdc", "tests.fuzz"]):
        from tests.fuzz import targets
    if kernels:
        from sparkcdc.mysql.binlog import arrowrows
        from sparkcdc.mysql.chunks import textrows

        assert str(arrowrows._rowkernel.__file__).startswith(kernels)
        assert str(textrows._textrows.__file__).startswith(kernels)
    target = targets.TARGETS[target_name]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
