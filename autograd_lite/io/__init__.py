"""Saving and loading pytrees of arrays: the `.npz` container read without unpickling (`npz`),
the tree's structure written beside its arrays (`serialization`), and the check of a loaded
tree against the one the caller expects (`matching`)."""
