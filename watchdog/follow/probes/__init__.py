"""Probes beside the log (process, health, GPU memory); nothing is imported here, so that a follower that
probes nothing never loads their SSH or HTTP code.
"""
