"""The server's ranking of string keys (mysql/chunks/key_ranks.py): its SQL, no server."""

from __future__ import annotations

import pytest

from sparkcdc.errors import SnapshotError
from sparkcdc.mysql.chunks.key_ranks import rank_query


def test_rank_query_refuses_what_is_not_a_collation_name() -> None:
    with pytest.raises(SnapshotError, match="not a collation"):
        rank_query("utf8mb4_bin; DROP TABLE t", 1, 1)
