"""The session format: bytes and records of dsh session logs, and nothing above them.

Headers and events (`events`), the line reader and writer of plain and zstd logs
(`jsonl`, `zstd`), what a log file's name says (`log_names`), packed
chunk rows (`chunk_rows`), the embedded stream records of formats 2 to 5
(`stream_records`), the typed decoder of call lines (`typed`), text safety
(`text`) and what lossless JSON is (`json_values`). Everything above reads
logs through this package.
"""
