"""A trace simulator for GPU scheduling policies: phalanx's own decisions against baselines on public traces.

It replays a workload (``simulator.traces``) on a simulated cluster in discrete steps
(``simulator.loop``), trains each job at the speed its placement gives (``simulator.speed``), and lets a
policy (``simulator.policies``) decide allocations. The first mode reproduces the Pollux (OSDI'21)
artifact's simulator, so that the Tiresias baseline's published JCTs can check the simulator before any
other figure of it is trusted.
"""
