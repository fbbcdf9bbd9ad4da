"""``minifused.distributions``: PyTorch's ``torch.distributions`` for the laws training code uses (policies,
VAEs, likelihoods): sampling from minifused's generator (reproducible under ``manual_seed``), reparameterized
draws (``rsample``), and log_prob / entropy / cdf / KL divergences differentiable in the parameters.

The modules: ``distribution`` (the base class and argument validation), ``constraints``, ``utils``,
``continuous`` (Normal, Uniform, Exponential, Laplace, Cauchy, Beta, Gamma, Dirichlet), ``discrete`` (Bernoulli,
Categorical, OneHotCategorical, Poisson, Binomial, Geometric), ``multivariate_normal``, ``transforms`` and
``transformed`` (Independent, TransformedDistribution, LogNormal, Gumbel), ``kl``, and ``_gamma``: the
reparameterized gamma draws behind the Beta, Gamma and Dirichlet ``rsample``. The multivariate normal runs on
``minifused.linalg`` (Cholesky, triangular solves), the Poisson / binomial / beta / gamma / Dirichlet laws on
``minifused.lgamma`` / ``digamma``.
"""
from . import constraints, kl, transforms, utils  # noqa: F401
from .continuous import Beta, Cauchy, Dirichlet, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, Geometric, OneHotCategorical, Poisson
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .transformed import Gumbel, Independent, LogNormal, TransformedDistribution
from .transforms import (AffineTransform, ComposeTransform, ExpTransform, SigmoidTransform, SoftplusTransform,
                         TanhTransform, Transform, identity_transform)

__all__ = ["Distribution", "Normal", "Uniform", "Exponential", "Laplace", "Cauchy", "Beta", "Gamma", "Dirichlet",
           "Bernoulli", "Categorical", "OneHotCategorical", "Poisson", "Binomial", "Geometric", "MultivariateNormal",
           "Independent", "TransformedDistribution", "LogNormal", "Gumbel", "Transform", "ComposeTransform",
           "ExpTransform", "AffineTransform", "SigmoidTransform", "SoftplusTransform", "TanhTransform",
           "identity_transform", "kl_divergence", "register_kl", "constraints", "transforms", "kl", "utils"]
