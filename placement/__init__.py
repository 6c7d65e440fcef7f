"""The placement manager: pins elastic MPI workers to planned nodes (issue: placement)."""
