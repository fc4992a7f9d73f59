"""Past one machine: ``--shard`` jobs joined by a verified merge, sweeps of models × configs × seeds ×
shards run on Ray (or one after another), the same sweep as a Slurm job array, and its wall time
predicted on N workers.

``merge``    ``edct merge``: shard folders → the unsharded run's folder, or a refusal naming why
``sweep``    a sweep file expanded into jobs (each an ``edct run`` command line) and merge groups
``execute``  the jobs on Ray tasks (resources per job, retries, progress) or locally, then the merges
``slurm``    the sweep as an sbatch job array plus a dependent merge job
``plan``     a sweep's wall time on N workers, each job's predicted by ``edct_task.estimate``

The slice function itself is ``edct_task.run.sharding.item_slice`` (the runner uses it).
"""
