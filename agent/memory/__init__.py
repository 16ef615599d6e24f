"""What Hermes remembers about a person across conversations (docs/memory.md).

`block` renders the profile and relevant notes into the system message (pure), `facts` asks
the compaction summary for facts about the user and parses them out (pure), `person` tells an
instruction about the person from one about the task (pure), `view` is one owner's memory over
the store (`embeddings` adds vectors), `session_memory` is what a session does with it at its
start and at compaction, `memory_keeper` is the agent's part holding it, and `tool` is the
model's `memory` tool.
"""
