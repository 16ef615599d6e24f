"""The soft archive as the agent sees it: anchors from summaries to rows, `recall`, row rendering.

Compaction never deletes: replaced rows stay in the store, archived. Summaries cite them with
anchors (`agent.archive.anchors`), `recall` reads them back (`agent.archive.recall`), and the
`lcm` engine's tools scan them (`agent.archive.grep`).
"""
