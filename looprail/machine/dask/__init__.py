"""The Dask executor: a wave's plans on a Dask cluster (`executor`, `cluster`), the worker side
(`worker`) and what both share (`job`). Nothing is re-exported: `distributed` is imported only
when a run asks for Dask."""
