"""The replication stream's CopyData messages (sparkcdc.postgres.copyboth)."""

from __future__ import annotations

import struct

import pytest

from sparkcdc.errors import ProtocolError
from sparkcdc.postgres.copyboth import decode_copy_message


@pytest.mark.parametrize("kind", [b"k", b"w"])
def test_a_send_time_outside_the_calendar_is_a_protocol_error(kind: bytes) -> None:
    """A damaged send time is the stream's ProtocolError, not Python's OverflowError."""
    far = 2**62  # microseconds since 2000: far beyond the year 9999
    if kind == b"k":
        payload = struct.pack(">cQqB", kind, 16, far, 0)
    else:
        payload = struct.pack(">cQQq", kind, 16, 32, far) + b"B"
    with pytest.raises(ProtocolError, match="outside the years 1-9999"):
        decode_copy_message(payload)
