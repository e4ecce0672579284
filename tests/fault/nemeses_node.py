"""The process, disk and clock nemeses (nemesis_node.py, nemesis_disk.py,
nemesis_clock.py) by name, for the registry in tests/fault/nemeses.py:
NODE_NEMESES = {name: class}; every class builds with no arguments and has
start(cluster, rng) -> detail and stop(cluster). The disk ones need root
and a node whose data directory is on a nemesis_disk.LoopFs (netcluster's
data_dirs=); the clock one a node started with nemesis_clock.node_env()
(netcluster's node_env=) and the cluster's clock_files {id: path}.
"""

from nemesis_clock import CLOCK_NEMESES
from nemesis_disk import DISK_NEMESES
from nemesis_node import PROCESS_NEMESES

NODE_NEMESES = dict(PROCESS_NEMESES, **DISK_NEMESES, **CLOCK_NEMESES)
