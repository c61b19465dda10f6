"""Identity: which session a request belongs to, decided the same way in record and replay.

Recording writes what these functions decide for each new session (its parent, spawn or
fork, its seed), and replay binds live sessions by the same functions over the same
data ([docs/scenarios.md#binding](../scenarios.md#binding)):

- `answers`: an answer as the next request quotes it (its text and tool calls), and
  whether a re-sent assistant message is that answer, ids rewritten or not;
- `announce`: which tool call of a parent started a child (its announcement);
- `lineage`: a new child's lineage: its parent and, for a fork, the seed it inherits.
"""
