"""The standing-instructions ledger: the user's durable directives, kept verbatim and re-shown.

`detect` finds them in user messages (deterministic, conservative), `rules` decides repeats and
replacements and renders the block the system message carries, `session` is one session's
ledger on top of the store. `/pin`, `/pins` and `/unpin N` edit it by hand.
"""
