"""``sparkcdc package``: the sparkcdc package as a zip for the executors of a Spark cluster.

Executors on other hosts import sparkcdc (the source's partitions, the sinks' writers run
there). The usual way to give them a Python package is ``spark.submit.pyFiles`` (spark-submit's
``--py-files``, ``sparkcdc run --py-files``): a zip whose top level holds the package. This
command writes that zip of the sparkcdc this interpreter imports, and beside it the small
script that is spark-submit's primary resource (spark-submit runs a file, not ``-m``).
sparkcdc's dependencies (pyarrow, pymysql, ...) are not in the zip: the executors' Python
must have them installed, as it must have pyspark.

    >>> built = package_sparkcdc(Path("dist"))    # doctest: +SKIP
    >>> built.archive.name, built.entry.name      # doctest: +SKIP
    ('sparkcdc-0.1.0.zip', 'sparkcdc_submit.py')
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import sparkcdc
from sparkcdc.errors import ConfigError
from sparkcdc.spark.connectors import EXCLUDES

ENTRY_NAME = "sparkcdc_submit.py"
_ENTRY = '''"""spark-submit's primary resource for sparkcdc (written by `sparkcdc package`):

    spark-submit --master URL --py-files sparkcdc-<version>.zip --jars JARS \\
        sparkcdc_submit.py run pipeline.yaml [--available-now]
"""

import importlib.util
import os
import sys

# spark-submit puts the --py-files zip first on the driver's sys.path as well; the driver
# runs the sparkcdc installed on this machine when there is one (the connector jars'
# folder and the compiled decoder are beside it), the executors the zip
shipped = [p for p in sys.path if os.path.basename(p).startswith("sparkcdc-")]
sys.path[:] = [p for p in sys.path if p not in shipped]
if importlib.util.find_spec("sparkcdc") is None:
    sys.path[:0] = shipped
else:
    sys.path += shipped

from sparkcdc.cli.main import main  # noqa: E402

sys.exit(main())
'''
# what the package needs at run time besides its modules (pyproject's package-data)
_DATA_SUFFIXES = (".py", ".typed", ".properties", ".xml")
# a fixed time for every entry: the same sources give the same bytes
_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Package:
    archive: Path  # the zip for spark.submit.pyFiles / --py-files
    entry: Path  # spark-submit's primary resource


def package_files(root: Path) -> list[Path]:
    """The files of the package at ``root`` that go into the zip, sorted (no bytecode)."""
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file()
        and path.name.endswith(_DATA_SUFFIXES)
        and "__pycache__" not in path.relative_to(root).parts
    )


def package_sparkcdc(output: Path) -> Package:
    """Write ``output/sparkcdc-<version>.zip`` and ``output/sparkcdc_submit.py``."""
    root = Path(sparkcdc.__file__).parent
    if not root.is_dir():
        raise ConfigError(
            f"sparkcdc is imported from {root}, not from a directory of files: run "
            "`sparkcdc package` where sparkcdc is installed from its sources or a wheel"
        )
    output.mkdir(parents=True, exist_ok=True)
    archive = output / f"sparkcdc-{sparkcdc.__version__}.zip"
    temp = archive.with_name(f".{archive.name}.{os.getpid()}")
    with zipfile.ZipFile(temp, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for path in package_files(root):
            name = Path("sparkcdc", path.relative_to(root)).as_posix()
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            out.writestr(info, path.read_bytes())
    temp.replace(archive)
    entry = output / ENTRY_NAME
    entry.write_text(_ENTRY)
    return Package(archive, entry)


def submit_line(built: Package, jars: Sequence[str], packages: Sequence[str] = ()) -> str:
    """The spark-submit command line that runs a pipeline with what ``built`` holds: the
    connectors as ``jars`` (a folder's), else as Maven coordinates ``packages`` that Spark
    resolves (without what no connector needs: ``connectors.EXCLUDES``).

    >>> print(submit_line(Package(Path("d/s.zip"), Path("d/e.py")), ["/j/a.jar", "/j/b.jar"]))
    spark-submit --master spark://HOST:7077 --py-files d/s.zip --jars /j/a.jar,/j/b.jar \\
      d/e.py run pipeline.yaml --available-now
    >>> built = Package(Path("d/s.zip"), Path("d/e.py"))
    >>> print(submit_line(built, [], ["g:a:1"]))  # doctest: +ELLIPSIS
    spark-submit --master spark://HOST:7077 --py-files d/s.zip --packages g:a:1 \\
      --conf spark.jars.excludes=software.amazon.awssdk:bundle,... \\
      d/e.py run pipeline.yaml --available-now
    """
    connectors = f"--jars {','.join(jars)}"
    if packages:
        connectors = (
            f"--packages {','.join(packages)} \\\n  --conf spark.jars.excludes={','.join(EXCLUDES)}"
        )
    return (
        f"spark-submit --master spark://HOST:7077 --py-files {built.archive} "
        f"{connectors} \\\n  {built.entry} run pipeline.yaml --available-now"
    )
