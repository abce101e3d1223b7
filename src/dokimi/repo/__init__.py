"""The repository under evaluation: its manifest and tasks, its review rules, the built-in graders a manifest
can name, a task's workspace prepared from it, and the files ``repo init`` and ``repo task new`` write into
it."""
