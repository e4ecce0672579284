"""The nemeses by name, for run.py: name -> class (start(cluster, rng) ->
detail dict, stop(cluster)). Each nemesis module adds its own with one line
here (docs/fault-testing.md "Running scenarios")."""

import os

import nemesis_net

REGISTRY = {}
REGISTRY.update(nemesis_net.NEMESES)
# the process, disk and clock nemeses (kill, pause, disk-*, clock-skew)
if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "nemeses_node.py")):
    from nemeses_node import NODE_NEMESES
    REGISTRY.update(NODE_NEMESES)


def heal_all(cluster):
    """Undo every fault a nemesis may have left (network first)."""
    nemesis_net.heal_all(cluster)
    for i in cluster.nodes:
        try:
            cluster.resume(i)
        except OSError:
            pass
