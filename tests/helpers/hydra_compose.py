"""Hydra's composed config as a plain dict, for the tests of what ``hydra_entry`` does to composition."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf


def compose_plain(conf_dir: str, overrides: list[str], name: str = "config") -> dict:
    """The composed config (Hydra's own node included for ours; left out for a test's small file)."""
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3", job_name="t"):
        cfg = OmegaConf.to_container(compose(config_name=name, overrides=overrides, return_hydra_config=True),
                                     resolve=False)
    if name != "config":
        cfg.pop("hydra", None)
    return cfg
