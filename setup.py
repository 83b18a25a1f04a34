"""Builds the optional compiled row decoder (sparkcdc.mysql._rowkernel); everything else is
in pyproject.toml. Without a C compiler the package installs without it, and binlog rows are
decoded in pure Python (sparkcdc.mysql.arrowrows says so once)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "sparkcdc.mysql._rowkernel",
            ["src/sparkcdc/mysql/_rowkernel.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
