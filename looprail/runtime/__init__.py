"""Runtimes: where the loop's work (skills, agents, commands, checks, role work) is executed."""
