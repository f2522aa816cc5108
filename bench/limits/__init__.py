"""The limits a bench run puts on the processes it starts: cgroups, the memory limit, the disk read
cap, the page cache of a checkpoint (cold loads), and `situation`: what a child group ran under."""
