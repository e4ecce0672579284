"""sluicefault: checked workloads, their histories and the checker for
Sluice's fault-injection suite (docs/fault-testing.md).

    history   one JSONL file per client process; Writer writes, read() merges
    workload  queue | group | txn workloads through confluent_kafka, and the
              final full read of every partition after the faults healed
    checker   reads histories and counts each anomaly

Stdlib and confluent_kafka only, for /usr/bin/python3; run with
PYTHONPATH=<repo>/tools.
"""
