"""Design-space sweeps and whole-trace simulation on Dask (`dask.distributed`).

- `spec`: sweep files (TOML) parsed and validated into points before anything runs;
- `store`: each point's result under a content hash of its inputs, written atomically;
- `tasks`: what a task runs (`run_point`: one point; `run_ops`: the ops of one (step, block));
- `engine`: this process, an embedded `LocalCluster`, or a cluster by ``--scheduler`` address;
- `runner`: a sweep end to end (skip finished points, store results, write the table);
- `table`: the results table (Parquet and CSV, byte-identical whatever the worker count);
- `video`: one large trace split by (step, block) and summed exactly as the serial run.
"""
