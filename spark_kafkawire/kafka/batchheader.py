"""The record batch headers: Kafka's DefaultRecordBatch (magic 2) and LegacyRecord (magic 0/1),
field by field, the one statement of their layouts; their Structs and where each field lies are made
from them (records.py reads batches by these)."""

from __future__ import annotations

from struct import Struct, calcsize
from typing import Final

#: the magic 2 batch header (Kafka's DefaultRecordBatch), field by field: the one statement of its
#: layout; its Struct and the offsets read in place below are made from it
_V2_HEADER: Final = (("BaseOffset", "q"), ("Length", "i"), ("PartitionLeaderEpoch", "i"), ("Magic", "b"),
                     ("Crc", "I"), ("Attributes", "h"), ("LastOffsetDelta", "i"), ("BaseTimestamp", "q"),
                     ("MaxTimestamp", "q"), ("ProducerId", "q"), ("ProducerEpoch", "h"), ("BaseSequence", "i"),
                     ("RecordCount", "i"))
#: a magic 0/1 message's header (LegacyRecord), the same way (its timestamp is there in magic 1 only)
_V01_HEADER: Final = (("Offset", "q"), ("Length", "i"), ("Crc", "I"), ("Magic", "b"), ("Attributes", "b"),
                      ("Timestamp", "q"))


def _at(header: tuple[tuple[str, str], ...], name: str) -> int:
    """Where a header's field starts."""
    names = [n for n, _ in header]
    return calcsize("!" + "".join(t for _, t in header[: names.index(name)]))


_V2: Final = Struct("!" + "".join(t for _, t in _V2_HEADER))  # 61 bytes
_V01: Final = Struct("!" + "".join(t for _, t in _V01_HEADER[:5]))  # offset .. attributes
#: where fields lie (both magics: the length at 8, the magic at 16; the size counts from 12)
AT_LENGTH: Final = _at(_V2_HEADER, "Length")
AT_MAGIC: Final = _at(_V2_HEADER, "Magic")
LOG_OVERHEAD: Final = _at(_V2_HEADER, "PartitionLeaderEpoch")
V2_EPOCH: Final = LOG_OVERHEAD
V2_CRC: Final = _at(_V2_HEADER, "Crc")
V2_ATTRIBUTES: Final = _at(_V2_HEADER, "Attributes")  # the CRC-32C covers the batch from here
V2_LAST_OFFSET_DELTA: Final = _at(_V2_HEADER, "LastOffsetDelta")
V2_BASE_TIMESTAMP: Final = _at(_V2_HEADER, "BaseTimestamp")
V2_MAX_TIMESTAMP: Final = _at(_V2_HEADER, "MaxTimestamp")
V2_PRODUCER_ID: Final = _at(_V2_HEADER, "ProducerId")
V2_PRODUCER_EPOCH: Final = _at(_V2_HEADER, "ProducerEpoch")
V2_BASE_SEQUENCE: Final = _at(_V2_HEADER, "BaseSequence")
V2_RECORD_COUNT: Final = _at(_V2_HEADER, "RecordCount")
V2_SIZE: Final = _V2.size
V01_TIMESTAMP: Final = _at(_V01_HEADER, "Timestamp")
