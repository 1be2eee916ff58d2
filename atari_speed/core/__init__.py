"""Below everything: errors, typed config, timing, shared-memory layouts."""
