"""The rules of reading the binlog: a range of it -> the changes of captured tables, what a
statement does to them, whether an offset is still reachable."""
