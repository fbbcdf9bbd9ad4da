"""Layers and models: ``Module``, ``Parameter``, containers and layers."""
from .module import Module, Parameter  # noqa: F401
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401
from .basic import GELU, Flatten, Identity, ReLU, Sigmoid, Tanh  # noqa: F401
from .linear import Bilinear, Linear  # noqa: F401
from .norm import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d,  # noqa: F401
                   InstanceNorm3d, LayerNorm, LocalResponseNorm, RMSNorm, SyncBatchNorm)
from .softmax import LogSoftmax, Softmax  # noqa: F401
from .loss import CrossEntropyLoss, NLLLoss  # noqa: F401
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d  # noqa: F401
from .pool import (AvgPool1d, AvgPool2d, LPPool1d, LPPool2d, MaxPool1d, MaxPool2d, MaxUnpool1d,  # noqa: F401
                   MaxUnpool2d)
from .dropout import Dropout  # noqa: F401
from .loss_mse import MSELoss  # noqa: F401
from .lazy import (Buffer, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d,  # noqa: F401
                   LazyConvTranspose1d, LazyConvTranspose2d, LazyInstanceNorm1d, LazyInstanceNorm2d,
                   LazyInstanceNorm3d, LazyLinear, UninitializedBuffer, UninitializedParameter)
from .lazy import LazyConv3d, LazyConvTranspose3d  # noqa: F401,E402
from . import fusion, init, utils  # noqa: F401,E402
from .activation import *  # noqa: F401,F403,E402 - LeakyReLU, SiLU, ELU, Softplus, Hardtanh and the losses beyond these
from .layers import *  # noqa: F401,F403,E402 - Upsample, adaptive pooling, Embedding, Dropout2d, Unflatten
from .volume import *  # noqa: F401,F403,E402 - Conv3d, ConvTranspose3d, the 3-D pooling and padding layers
from .loss_margin import *  # noqa: F401,F403,E402 - MarginRankingLoss, TripletMarginLoss, ...
from .loss_ctc import CTCLoss  # noqa: F401,E402
from . import parallel  # noqa: F401,E402 - nn.parallel.DataParallel / DistributedDataParallel
from .parallel import DataParallel  # noqa: F401,E402
from .adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401,E402
from .linear_cross_entropy import LinearCrossEntropyLoss, LinearCrossEntropyOptions  # noqa: F401,E402
from .container import Container  # noqa: F401,E402 - deprecated, as PyTorch's
from .loss import NLLLoss2d  # noqa: F401,E402 - deprecated alias of NLLLoss
from .norm import CrossMapLRN2d  # noqa: F401,E402
from .pool import FractionalMaxPool2d, FractionalMaxPool3d  # noqa: F401,E402
from .rnn import GRU, LSTM, RNN, RNNBase  # noqa: F401,E402
from .rnn_cells import GRUCell, LSTMCell, RNNCell, RNNCellBase  # noqa: F401,E402
from .transformer import (MultiheadAttention, Transformer, TransformerDecoder,  # noqa: F401,E402
                          TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
from . import attention  # noqa: F401,E402 - torch.nn.attention: SDPBackend, sdpa_kernel
