"""The engine: the discrete-event clock of a program on a machine, and its closed form."""
