"""Engine profiles: the bundled TOML data (one file per engine, plus common rules) and their loader."""
