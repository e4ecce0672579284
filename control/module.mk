# control/: config, metadata log, coordinators, broker main, sluicectl.
