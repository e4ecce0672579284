"""The nemeses by name, for run.py: name -> class (start(cluster, rng) ->
detail dict, stop(cluster)). Each nemesis module adds its own with one line
here (docs/fault-testing.md "Running scenarios")."""

import nemesis_net

REGISTRY = {}
REGISTRY.update(nemesis_net.NEMESES)


def heal_all(cluster):
    """Undo every fault a nemesis may have left (network first)."""
    nemesis_net.heal_all(cluster)
    for i in cluster.nodes:
        try:
            cluster.resume(i)
        except OSError:
            pass
