"""The driver JVM's compiling: C2 later for runs that go on, C1 alone for runs that end.

HotSpot compiles a method first with C1 (quick to compile, profiled code), then with C2
(slow to compile, fast code) once it has run often enough (the Tier4 thresholds). A new
Spark driver runs a great many methods a few thousand times each (Catalyst's planning,
Delta's log replay and MERGE, generated code), and with HotSpot's thresholds C2 recompiles
them all, taking a core of two from the tasks for much of a short run.

A continuous run (``sparkcdc run``) gets the Tier4 thresholds ten times higher
(``LATE_C2``): C2 compiles only what runs on and on (the rows' loops), later; C1's code
alone is too slow where the rows are for a run that goes on for hours. A run that ends
when it has done the work it found at its start (``--available-now``) gets C1 alone
(``C1_ONLY``): its JVM lives seconds to minutes, and C2's compiling costs it more than C2's
code gains. docs/benchmarks.md has the figures.

Applied to the driver JVMs ``sparkcdc run`` starts itself, as the class-data archive is
(``spark/classdata.py``). Left out when ``spark.driver.extraJavaOptions`` has compile
options of the user's own (any of ``_USER_JIT``), or when ``SPARKCDC_LATE_C2=off``. Only
when and how methods are compiled changes, never what they compute.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from sparkcdc.spark.classdata import turned_off, user_options_name, with_java_option

# JDK 17's HotSpot defaults (5000, 600, 15000, 40000) times ten
LATE_C2 = (
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=6000",
    "-XX:Tier4CompileThreshold=150000",
    "-XX:Tier4BackEdgeThreshold=400000",
)
# C1 alone, its code unprofiled (level 1)
C1_ONLY = ("-XX:TieredStopAtLevel=1",)
# a user's own compile options: they say when this JVM compiles, not us ("Tier" is also
# TieredStopAtLevel and TieredCompilation, "CompileThreshold" CompileThresholdScaling)
_USER_JIT = ("Tier", "CompileThreshold", "-Xint", "-Xcomp")


def compiling_settings(
    settings: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
    *,
    available_now: bool = False,
) -> dict[str, str]:
    """``settings`` for a driver JVM that compiles with C2 later (``LATE_C2``), or with C1
    alone when it runs ``available_now`` (``C1_ONLY``): unchanged when the user's options
    say how to compile, or when ``SPARKCDC_LATE_C2`` is off.

    >>> compiling_settings({"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}, {})
    {'spark.driver.extraJavaOptions': '-XX:TieredStopAtLevel=1'}
    >>> compiling_settings({}, {})["spark.driver.extraJavaOptions"].split()[0]
    '-XX:Tier4InvocationThreshold=50000'
    >>> compiling_settings({}, {}, available_now=True)["spark.driver.extraJavaOptions"]
    '-XX:TieredStopAtLevel=1'
    >>> compiling_settings({}, {"SPARKCDC_LATE_C2": "off"})
    {}
    """
    environ = os.environ if environ is None else environ
    if turned_off(environ, "SPARKCDC_LATE_C2") or user_options_name(settings, _USER_JIT):
        return dict(settings)
    return with_java_option(settings, " ".join(C1_ONLY if available_now else LATE_C2))
