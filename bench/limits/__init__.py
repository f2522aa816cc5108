"""The limits a bench run puts on the processes it starts: cgroups, the memory limit, the disk read
cap, and the page cache of a checkpoint (cold loads)."""
