"""The runner: tasks check, cells and batches (pins, resume, budget), grading and gates (contract §4, §9)."""
