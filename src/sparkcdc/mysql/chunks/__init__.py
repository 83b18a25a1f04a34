"""A snapshot chunk read with SQL: its SELECT into Arrow (``select``: connectorx, the
compiled text splitter ``textrows``, pymysql), the splitter's and the read-back's queries
(``queries``), values in the binlog decoder's form (``sql_values``). The algorithm that
uses them is ``sparkcdc.snapshot``'s, through the source interface."""
