from sparkcdc.model.changelog import GONE_KINDS, METADATA_COLUMNS, RowKind, kind_rank


def test_an_update_sorts_its_before_image_first() -> None:
    rows = [(2, RowKind.UPDATE_AFTER), (2, RowKind.UPDATE_BEFORE), (1, RowKind.INSERT)]
    ordered = sorted(rows, key=lambda row: (row[0], kind_rank(row[1])))
    assert ordered == [(1, "+I"), (2, "-U"), (2, "+U")]


def test_the_kinds_spell_flinks_row_kinds() -> None:
    assert [kind.value for kind in RowKind] == ["+I", "-U", "+U", "-D"]
    assert set(GONE_KINDS) == {"-D", "-U"}


def test_metadata_columns_lead_in_this_order() -> None:
    assert METADATA_COLUMNS == ("_op", "_op_ts", "_seq", "_database", "_table")
