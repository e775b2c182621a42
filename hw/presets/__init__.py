"""Shipped accelerator presets (TOML); see `hw.config.load_preset`."""
