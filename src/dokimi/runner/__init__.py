"""The runner: tasks check, cells and batches (pins, resume, budget), grading and gates."""
