"""One `bench run`: its settings, the task matrix, the children it starts and watches, and the rows
it turns their outcomes into."""
