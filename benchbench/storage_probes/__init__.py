"""The storage probe: fio's read jobs (or an O_DIRECT fallback where fio is missing) on a scratch
file, and the dataset's own files read cold. It uses the probe API in probes/."""
