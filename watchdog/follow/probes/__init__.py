"""Probes beside the log: is the process alive (`process`), what does the health endpoint answer (`health`),
how much GPU memory is in use (`nvidia` parses, `gpusampler` samples each host once for all its launches).

Nothing is imported here: a follower that probes nothing never loads the SSH or HTTP code of the probes."""
