"""Spark settings that hold lists (``spark.jars``, ``spark.jars.packages``, the extra class
paths, ``spark.sql.extensions``, ...): their entries, and the user's merged with sparkcdc's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Settings that hold lists: what the user gave (already configured, e.g. by spark-submit,
# then the session's conf), then sparkcdc's entries, each once. Jars count as the same
# when their file names are (a user's copy of a connector jar is not added twice).
LIST_SEPARATORS = {
    "spark.jars": ",",
    "spark.jars.packages": ",",
    "spark.jars.excludes": ",",
    "spark.submit.pyFiles": ",",
    "spark.sql.extensions": ",",
    "spark.driver.extraClassPath": os.pathsep,
    "spark.executor.extraClassPath": os.pathsep,
}


def list_entries(key: str, value: str | None) -> list[str]:
    """The entries of a list setting ``key`` (one of ``LIST_SEPARATORS``), as written.

    >>> list_entries("spark.jars", " /a.jar, file:/b.jar,")
    ['/a.jar', 'file:/b.jar']
    """
    if not value:
        return []
    return [e.strip() for e in value.split(LIST_SEPARATORS[key]) if e.strip()]


def same_entry(key: str, entry: str) -> str:
    """What makes two entries of ``key`` the same: a jar's file name, else the text."""
    if key == "spark.jars":
        return entry.rstrip("/").rsplit("/", 1)[-1]
    return entry


def merge_list_setting(key: str, *values: str | None) -> str | None:
    """The entries of ``values`` (the user's first), each once, as one ``key`` value.

    >>> merge_list_setting("spark.jars", "/opt/s3/hadoop-aws.jar", "/lib/delta.jar")
    '/opt/s3/hadoop-aws.jar,/lib/delta.jar'
    >>> merge_list_setting("spark.jars", "file:/u/delta.jar", "/lib/delta.jar,/lib/k.jar")
    'file:/u/delta.jar,/lib/k.jar'
    """
    seen: set[str] = set()
    merged: list[str] = []
    for value in values:
        for entry in list_entries(key, value):
            if same_entry(key, entry) not in seen:
                seen.add(same_entry(key, entry))
                merged.append(entry)
    return LIST_SEPARATORS[key].join(merged) if merged else None


def new_entries(key: str, settings: Mapping[str, str], configured: Mapping[str, str]) -> list[str]:
    """The entries of list setting ``key`` in ``settings`` that ``configured`` lacks."""
    have = set(list_entries(key, configured.get(key)))
    return [e for e in list_entries(key, settings.get(key)) if e not in have]
