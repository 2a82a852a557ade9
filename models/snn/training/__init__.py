"""Training the SNN: the network and its float math, datasets, recorded activity, diagnosis, NIR
import."""
