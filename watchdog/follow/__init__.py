"""Following one launch: byte sources (local, SSH), probes (process, health, GPU), the clock, checkpoints,
and the follower where they meet the pure core. `replay` is the same pipeline fed a whole file."""
