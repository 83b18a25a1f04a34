"""The driver JVM's compiling: C2 later for runs that go on, C1 alone for runs that end.

HotSpot compiles a method twice: first with C1 (quick to compile, profiled code), then
with C2 (slow to compile, fast code) once it has run often enough (the Tier4 thresholds).
A new Spark driver runs a great many methods a few thousand times each (Catalyst's
planning, Delta's log replay and MERGE, the generated code of each query), and with
HotSpot's thresholds C2 recompiles them all; on a machine of two cores that compiling
takes a core from the tasks for much of a short run.

A continuous run (``sparkcdc run``) gets the Tier4 thresholds ten times higher
(``LATE_C2``): C2 compiles only what runs on and on (the rows' loops), later. Measured here
(``sparkcdc run --available-now``, 1,000,000-row Delta table): a catch-up of 300,000 changes
took 20.8 s on average of four runs against 23.0 s of three without; a snapshot 15.7 s of
three against 17.9 s; into Kafka, 75,000 changes/s held as before (90,000 grew its lag less:
+0.10 s/s against +0.18 s/s). C1 alone could not hold 75,000 changes/s into Kafka: its code
is slower where the rows are, which a run that goes on for hours needs.

A run that ends when it has done the work it found at its start (``--available-now``) gets
C1 alone (``C1_ONLY``: no C2, and C1's code without the profiling C2 would need): its JVM
lives seconds to minutes, and C2's compiling cost it more than C2's code gained. Measured
here, the two alternated in one session: a scheduled run that merges 29 changes into a small
Delta table 33.8 s against 40.5 s (three each; of it ~10 s is the JVM's and session's start,
the rest one MERGE of ~18 Spark jobs, during which C2 had compiled for ~15 s of CPU of the
two cores); a 1,000,000-row snapshot 35.1 s against 36.7 s (two each); the catch-up above
19.9 s against 20.8 s. Thresholds a hundred times higher instead of C1 alone did not help the
small run (41.9 s): the profiled C1 code and its compiling remain.

Applied to the driver JVMs ``sparkcdc run`` starts itself, as the class-data archive is
(``spark/classdata.py``). Left out when ``spark.driver.extraJavaOptions`` has compile
options of the user's own (any of ``_USER_JIT``: e.g. ``-XX:TieredStopAtLevel=4``, HotSpot's
own compiling, for a ``--available-now`` run that lasts hours), or when
``SPARKCDC_LATE_C2=off``. Only when and how methods are compiled changes, never what they
compute.
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
