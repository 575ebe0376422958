"""Policy models, co-training, evaluation, latent analysis, sim-to-real translation, policy inference node."""
