"""Running jobs beyond the simulator: component allow lists, POC and provisioned deployments, SLURM."""
