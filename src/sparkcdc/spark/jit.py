"""The driver JVM's compile thresholds: C2 later, for runs that last seconds to minutes.

HotSpot compiles a method twice: first with C1 (quick to compile, profiled code), then
with C2 (slow to compile, fast code) once it has run often enough (the Tier4 thresholds).
A new Spark driver runs a great many methods a few thousand times each (Catalyst's
planning, Delta's log replay and MERGE, the generated code of each query), and with
HotSpot's thresholds C2 recompiles them all; on a machine of two cores that compiling
takes a core from the tasks for much of a short run. With the thresholds ten times higher,
C2 compiles only what runs on and on (the rows' loops), later:

- measured here (``sparkcdc run --available-now``, 1,000,000-row Delta table): a catch-up of
  300,000 changes took 20.8 s on average of four runs against 23.0 s of three without; a
  snapshot 15.7 s of three against 17.9 s;
- a continuous run keeps its pace: into Kafka, 75,000 changes/s held as before (90,000
  grew its lag less: +0.10 s/s against +0.18 s/s).

C1 alone (``-XX:TieredStopAtLevel=1``) shortened the catch-up more (19.9 s) but could not
hold 75,000 changes/s into Kafka: its code is slower where the rows are.

Applied to the driver JVMs ``sparkcdc run`` starts itself, as the class-data archive is
(``spark/classdata.py``). Left out when ``spark.driver.extraJavaOptions`` has compile
options of the user's own (any of ``_USER_JIT``), or when ``SPARKCDC_LATE_C2=off``. Only when
methods are compiled changes, never what they compute.
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
# a user's own compile options: they say when this JVM compiles, not us ("Tier" is also
# TieredStopAtLevel and TieredCompilation, "CompileThreshold" CompileThresholdScaling)
_USER_JIT = ("Tier", "CompileThreshold", "-Xint", "-Xcomp")


def compiling_settings(
    settings: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``settings`` for a driver JVM that compiles with C2 later (``LATE_C2``): unchanged
    when the user's options say when to compile, or when ``SPARKCDC_LATE_C2`` is off.

    >>> compiling_settings({"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}, {})
    {'spark.driver.extraJavaOptions': '-XX:TieredStopAtLevel=1'}
    >>> compiling_settings({}, {})["spark.driver.extraJavaOptions"].split()[0]
    '-XX:Tier4InvocationThreshold=50000'
    >>> compiling_settings({}, {"SPARKCDC_LATE_C2": "off"})
    {}
    """
    environ = os.environ if environ is None else environ
    if turned_off(environ, "SPARKCDC_LATE_C2") or user_options_name(settings, _USER_JIT):
        return dict(settings)
    return with_java_option(settings, " ".join(LATE_C2))
