"""``minifused.distributions``: PyTorch's ``torch.distributions`` for the laws training code uses (policies,
VAEs, likelihoods): sampling from minifused's generator (reproducible under ``manual_seed``), reparameterized
draws (``rsample``), and log_prob / entropy / cdf / KL divergences differentiable in the parameters.

The modules: ``distribution`` (the base class and argument validation), ``constraints``, ``utils``,
``continuous`` (Normal, Uniform, Exponential, Laplace, Cauchy, Beta, Gamma, Chi2, StudentT, Dirichlet),
``continuous_bernoulli``, ``discrete`` (Bernoulli, Categorical, OneHotCategorical, Poisson, Binomial, Geometric,
Multinomial, NegativeBinomial), ``multivariate_normal``, ``transforms`` and ``transformed`` (Independent,
TransformedDistribution, LogNormal, Gumbel), ``transformed_laws`` (HalfNormal, HalfCauchy, Pareto, Weibull,
Kumaraswamy, InverseGamma), ``relaxed`` (RelaxedBernoulli, RelaxedOneHotCategorical and their logit / log
forms), ``mixture_same_family``, ``constraint_registry`` (biject_to, transform_to), ``kl``, and ``_gamma``: the
reparameterized gamma draws behind the Beta, Gamma and Dirichlet ``rsample``. The multivariate normal runs on
``minifused.linalg`` (Cholesky, triangular solves), the Poisson / binomial / beta / gamma / Dirichlet laws on
``minifused.lgamma`` / ``digamma``.
"""
from . import constraints, kl, transforms, utils  # noqa: F401
from .constraint_registry import biject_to, transform_to
from .continuous import Beta, Cauchy, Chi2, Dirichlet, Exponential, Gamma, Laplace, Normal, StudentT, Uniform
from .continuous_bernoulli import ContinuousBernoulli
from .discrete import (Bernoulli, Binomial, Categorical, Geometric, Multinomial, NegativeBinomial, OneHotCategorical,
                       Poisson)
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .mixture_same_family import MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .relaxed import RelaxedBernoulli, RelaxedOneHotCategorical
from .transformed import Gumbel, Independent, LogNormal, TransformedDistribution
from .transformed_laws import HalfCauchy, HalfNormal, InverseGamma, Kumaraswamy, Pareto, Weibull
from .transforms import (AbsTransform, AffineTransform, CatTransform, ComposeTransform,
                         CumulativeDistributionTransform, ExpTransform, IndependentTransform, LowerCholeskyTransform,
                         PositiveDefiniteTransform, PowerTransform, ReshapeTransform, SigmoidTransform,
                         SoftmaxTransform, SoftplusTransform, StackTransform, StickBreakingTransform, TanhTransform,
                         Transform, identity_transform)

__all__ = ["Distribution", "Normal", "Uniform", "Exponential", "Laplace", "Cauchy", "Beta", "Gamma", "Chi2",
           "StudentT", "Dirichlet", "ContinuousBernoulli", "Bernoulli", "Categorical", "OneHotCategorical", "Poisson",
           "Binomial", "Geometric", "Multinomial", "NegativeBinomial", "MultivariateNormal", "MixtureSameFamily",
           "RelaxedBernoulli", "RelaxedOneHotCategorical", "Independent", "TransformedDistribution", "LogNormal",
           "Gumbel", "HalfNormal", "HalfCauchy", "Pareto", "Weibull", "Kumaraswamy", "InverseGamma", "Transform",
           "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform", "CumulativeDistributionTransform",
           "ExpTransform", "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
           "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform",
           "StackTransform", "StickBreakingTransform", "TanhTransform", "identity_transform", "biject_to",
           "transform_to", "kl_divergence", "register_kl", "constraints", "transforms", "kl", "utils"]
