"""The binlog codec: bytes of binlog events -> decoded events and row images (Python and the
compiled kernel), column values, JSON, character sets."""
