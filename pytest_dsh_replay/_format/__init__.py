"""The session format: bytes and records of dsh session logs, and nothing above them.

Headers and events (:mod:`.events`), the line reader and writer of plain and zstd logs
(:mod:`.jsonl`, :mod:`.zstd`), what a log file's name says (:mod:`.log_names`), packed
chunk rows (:mod:`.chunk_rows`), the embedded stream records of formats 2 to 4
(:mod:`.stream_records`), the typed decoder of call lines (:mod:`.typed`), text safety
(:mod:`.text`) and what lossless JSON is (:mod:`.json_values`). Everything above reads
logs through this package.
"""
