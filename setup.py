"""Builds the optional compiled parts: the binlog row decoder (sparkcdc.mysql._rowkernel) and
the result-row splitter of snapshot chunk reads (sparkcdc.mysql._textrows); everything else is
in pyproject.toml. Without a C compiler the package installs without them: binlog rows are
decoded in pure Python (sparkcdc.mysql.arrowrows says so once) and chunks over TLS are read
by pymysql."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "sparkcdc.mysql._rowkernel",
            ["src/sparkcdc/mysql/_rowkernel.c"],
            depends=["src/sparkcdc/mysql/_arrowbuf.h"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "sparkcdc.mysql._textrows",
            ["src/sparkcdc/mysql/_textrows.c"],
            depends=["src/sparkcdc/mysql/_arrowbuf.h"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ]
)
