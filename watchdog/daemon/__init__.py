"""`watchdog run`: the supervisor of many followers, its HTTP endpoint (metrics, /status, the status page),
systemd integration and sharding across replicas."""
