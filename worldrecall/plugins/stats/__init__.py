"""Built-in aggregators plugin (means, macro averages, bootstrap CIs, paired differences)."""
