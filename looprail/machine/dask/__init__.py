"""The Dask executor: a wave's plans on a Dask cluster instead of local threads.

`executor.DaskExecutor` (the orchestrator's side: each plan still runs through the runner's
one task protocol), `cluster` (which cluster it reaches and its security), `worker` (the
worker side) and `job` (what both share, with neither `distributed` nor the runner).
Nothing is re-exported: `distributed` is imported only when a run asks for Dask.
"""
