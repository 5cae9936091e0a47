"""Every option is declared in the key or out of it: top-level config keys, backends' and judges' options.

*In the key*: it can change a number, so every cached entry it reaches is keyed by it (a metric's params and
its thresholds are in by construction: the measurement's and the score's key). *Out of the key*: it changes
where results go, how fast or how they look, which rows run, or how a remote call is retried — never a value.
An option in neither set is kept in the key (the safe side), and ``tests/test_cache_identity.py`` fails until
it is classified here, as inspect_ai's ``test_generate_config_fields_classified`` does.
"""

from __future__ import annotations

# top-level config keys (engine/stages/config.py's WorldrecallSchema)
CONFIG_IN_KEY = frozenset({
    "benchmarks",        # loaders' options, aligners' params, metrics' params and thresholds
    "models",            # the backend of each role and its options (the backend's identity)
    "judge_options",     # each judge's options (the judge's identity)
    "suite",             # the suite's params: what its cases hold (the cases' content digests)
    "aggregators", "aggregator_params",  # which tables, and their params (the aggregate's key)
    "artifacts",         # whether a score writes its per-case files (the score's key)
})
CONFIG_OUT_OF_KEY = frozenset({
    "output_root", "cache_dir",            # where results and the cache go
    "device", "devices", "batch_size", "workers",  # where and how parallel measures run
    "progress", "view", "verbose", "report", "tracking",  # how a run looks and where it is logged
    "only", "models_only", "metrics", "allow_empty", "shard", "plugins",  # which rows run (each row has its key)
    "max_failure_rate",                    # the exit code
    "cache",                               # cache.mode use | refresh | off: whether entries are read, never a value
    "video", "inputs",                     # size limits: a case past them fails (never a final row), not a value
})

# options of backends (``models.options.<backend>``) and judges (``judge_options.<judge>``)
OPTIONS_OUT_OF_KEY = frozenset({
    "device",            # the device a backend runs on (the run's top-level ``device`` is not in the key either)
    "cache_dir",         # where a judge keeps its answers
    "timeout_s", "max_attempts", "initial_backoff_s", "max_backoff_s", "backoff_multiplier", "max_total_s",
    "retry_statuses", "poll_interval_s", "delete_uploaded",  # how a remote judge is retried and cleaned up
    "inline_max_bytes",  # whether a video is sent inline or through the Files API: the same video
})
OPTIONS_IN_KEY = frozenset({
    # every backend's common options: precision, batching (a batch can change last bits on a GPU), weights
    "dtype", "amp_dtype", "batch_size", "minibatch_size", "mask_chunk", "memory_efficient_inference", "local_dir",
    "revision", "pnet_rand",
    # backends' own options
    "apply_mask", "bins", "crop", "fov_deg", "image_backend", "image_size", "input_range", "layers", "mask_edges",
    "mask_threshold", "match_threshold", "max_candidates", "max_length", "method", "min_matches", "nfeatures",
    "num_flow_updates", "orientation_bins", "output", "patch", "preset", "ransac_px", "ratio", "resize", "size",
    "threshold", "vision",
    # judges' options: the model and endpoint asked, how, and how answers are read
    "model_id", "model_path", "api_version", "base_url", "temperature", "repair", "attn_implementation", "fps",
    "loader_family", "min_pixels", "max_pixels",
})
