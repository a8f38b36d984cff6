"""Rows: exchanges -> rows in Arrow batches.

* table.py: the columns of each row shape, and the RowBuilder that fills them batch by batch;
* shapes.py: the row shapes (exchanges, messages, partitions, records, connections, status) and how
  an exchange becomes rows of each.

Arrow arrays themselves are built by arrays.py (shared with predicate filters).
Imports: decode/, kafka/, wire/ (frame facts), protocol/ and the ground modules; nothing of the
read loop or later.
"""
