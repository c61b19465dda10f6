"""The HTTP wires: how model calls look on the wire of each provider.

Each wire module speaks one provider's API in both directions: replayed chunks to that
provider's stream events and whole responses, and a live provider's stream back to
chunks. `base` holds what they share.
"""
