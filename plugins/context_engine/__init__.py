"""Context engine plugins: each sub-package named after the engine it provides."""
