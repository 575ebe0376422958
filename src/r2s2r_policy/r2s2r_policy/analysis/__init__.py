"""How real-like a policy's inputs and behavior are: the measures of the mixture finding.

:mod:`.domain` holds the measures between two sets of latent vectors (real and simulated
frames): alignment (sliced Wasserstein distance, MMD), discernibility (held-out accuracy of a
class-balanced linear probe and of a 2-layer MLP probe) and the per-query real share among
the k nearest training neighbours, each with bootstrap intervals where one is asked for.
"""
