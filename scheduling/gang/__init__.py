"""Gangs: all-or-nothing groups of pods (a PodGroup and its members).

``filter`` answers a member from its gang's reservation or plans the whole gang (``planner``); ``record``
is the bind plan written before the first Binding and recovery from it; ``status`` the gang's phase and
the stale-gang rule; ``wait`` how long gangs wait; ``report`` one row per gang for the CLI.
"""
