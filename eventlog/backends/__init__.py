"""Storage backends: one module each, behind the contract in `eventlog.backends.base`."""
