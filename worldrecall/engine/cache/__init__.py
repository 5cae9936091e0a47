"""The one cache: every cached thing is keyed by :mod:`.keys` and kept in the :mod:`.store`."""

from worldrecall.engine.cache.keys import (
    code_digest,
    component_identity,
    inputs_digest,
    key_and_ingredients,
    key_of,
    library_versions,
    named_files,
)
from worldrecall.engine.cache.store import Store, VideoFacts, store_for

__all__ = ["Store", "VideoFacts", "code_digest", "component_identity", "inputs_digest", "key_and_ingredients", "key_of", "library_versions",
           "named_files", "store_for"]
