"""SQL-side administration of the source server: version and settings, positions and files, the
catalog of captured tables, the validator, claimed server ids."""
