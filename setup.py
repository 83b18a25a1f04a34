"""Builds the optional compiled parts: the binlog row decoder
(sparkcdc.mysql.binlog._rowkernel) and the result-row splitter of snapshot chunk reads
(sparkcdc.mysql.protocol._textrows); everything else is in pyproject.toml. Without a C compiler
the package installs without them: binlog rows are decoded in pure Python
(sparkcdc.mysql.binlog.arrowrows says so once) and chunks over TLS are read by pymysql. Both
kernels include src/sparkcdc/mysql/_arrowbuf.h (the Arrow buffers they share)."""

from setuptools import Extension, setup

MYSQL = "src/sparkcdc/mysql"
ARROWBUF = f"{MYSQL}/_arrowbuf.h"

setup(
    ext_modules=[
        Extension(
            "sparkcdc.mysql.binlog._rowkernel",
            ["src/sparkcdc/mysql/binlog/_rowkernel.c"],
            depends=[ARROWBUF],
            include_dirs=[MYSQL],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "sparkcdc.mysql.protocol._textrows",
            ["src/sparkcdc/mysql/protocol/_textrows.c"],
            depends=[ARROWBUF],
            include_dirs=[MYSQL],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ]
)
