"""What a consumer of change rows builds once per table shape for a source's compiled
decoder (:class:`~sparkcdc.model.events.RowKernel`): the change-row builders' kernels, the
interleaving filter's key readers (DESIGN.md §4.2)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from sparkcdc.model.events import EncodedRows, ImageColumns, RowChanges

T = TypeVar("T")


class ShapeKernels(Generic[T]):
    """What a kernel user builds once per table shape (a change's ``columns``) and
    ``variant`` of its own, for the changes a kernel may read: complete row images still
    in their encoded form.

    >>> from sparkcdc.model.events import RowsKind
    >>> from sparkcdc.model.position import BinlogPosition
    >>> columns = ImageColumns(("id",), lambda i, column: True)
    >>> at = BinlogPosition("mysql-bin.000001", 4)
    >>> decoded = RowChanges("app", "t", RowsKind.INSERT, [(None, (1,))], 0, at, columns)
    >>> ShapeKernels().get(decoded, "variant", lambda images: "built") is None  # decoded
    True
    """

    def __init__(self) -> None:
        self._built: dict[tuple[int, Hashable], tuple[ImageColumns, T | None]] = {}

    def get(
        self, change: RowChanges, variant: Hashable, build: Callable[[EncodedRows], T | None]
    ) -> T | None:
        """The one built for ``change``'s shape (by ``build`` from its images the first
        time), or None: the change is not for a kernel (decoded already, or images without
        every column), or ``build`` gave None."""
        images = change.images
        if isinstance(images, list) or not images.complete:
            return None
        key = (id(change.columns), variant)
        cached = self._built.get(key)
        if cached is None or cached[0] is not change.columns:
            cached = self._built[key] = (change.columns, build(images))
        return cached[1]
