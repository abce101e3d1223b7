"""Finished batches read into answers: reports, comparisons, power plans, studies, the static site and the
exports (pure reading: no git, no docker)."""
