"""Storage probes: fio run as a subprocess with JSON output, and a fallback reader (issue #4)."""
