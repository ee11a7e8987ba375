"""The hardware probes (matmul, memory_bandwidth, host_device_copy, allreduce, stability) and the
dataloader, one folder each; the probe API (api.py, meter.py) and what every probe, workload
and storage probe shares (the loaders, the synthetic dataset, the device helpers, the ranks)."""
