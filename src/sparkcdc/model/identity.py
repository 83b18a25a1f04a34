"""Which server an offset belongs to: ``ServerIdentity``, a frozen value in every offset.

MySQL names itself by ``@@server_uuid`` (made once per data directory); MariaDB has no
UUID, so it is ``@@server_id`` with the GTID domain ``@@gtid_domain_id`` it writes in.
Two identities are the same server when these agree; the server id of a MySQL server
is informative only (a UUID survives a changed server_id, and two servers may share one).

    >>> a = ServerIdentity("mariadb", 1, domain_id=0)
    >>> ServerIdentity.from_offset(a.to_offset()) == a, str(a)
    (True, 'MariaDB server_id 1 (gtid_domain_id 0)')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sparkcdc.errors import PositionError


@dataclass(frozen=True)
class ServerIdentity:
    """The identity of a MySQL (``uuid``) or MariaDB (``server_id`` + ``domain_id``) server."""

    flavor: Literal["mariadb", "mysql"]
    server_id: int
    uuid: str | None = None  # MySQL @@server_uuid
    domain_id: int | None = None  # MariaDB @@gtid_domain_id

    def same_server(self, other: ServerIdentity) -> bool:
        """True when ``other`` names this server (see the module docstring)."""
        if self.flavor != other.flavor:
            return False
        if self.flavor == "mysql" and self.uuid and other.uuid:
            return self.uuid == other.uuid
        return (self.server_id, self.domain_id) == (other.server_id, other.domain_id)

    def __str__(self) -> str:
        if self.flavor == "mysql":
            return f"MySQL server_uuid {self.uuid} (server_id {self.server_id})"
        return f"MariaDB server_id {self.server_id} (gtid_domain_id {self.domain_id})"

    def to_offset(self) -> dict[str, Any]:
        """A JSON-ready dict of primitives; absent parts are left out."""
        out: dict[str, Any] = {"flavor": self.flavor, "server_id": self.server_id}
        if self.uuid is not None:
            out["uuid"] = self.uuid
        if self.domain_id is not None:
            out["domain_id"] = self.domain_id
        return out

    @classmethod
    def from_offset(cls, data: dict[str, Any]) -> ServerIdentity:
        try:
            flavor = data["flavor"]
            if flavor not in ("mariadb", "mysql"):
                raise ValueError(f"flavor {flavor!r} is neither 'mariadb' nor 'mysql'")
            uuid, domain = data.get("uuid"), data.get("domain_id")
            return cls(
                flavor,
                int(data["server_id"]),
                None if uuid is None else str(uuid),
                None if domain is None else int(domain),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PositionError(
                f"offset part {data!r} is not a server identity (expected 'flavor', "
                f"'server_id' and 'uuid' or 'domain_id'): {exc}; the checkpoint was written by "
                "another program or edited"
            ) from None
