"""DDL statements of the binlog: the tables they name, the schema changes they make."""
