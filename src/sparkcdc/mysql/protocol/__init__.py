"""The client side of the MySQL/MariaDB protocols: packets, authentication, TLS, SQL connections,
the replication (binlog dump) client, text-protocol result rows."""
