"""Neural-network CPU tile kernels, by family: attention, norm, loss, optim, embedding, rope,
swiglu.

Each kernel sees one tile of each operand. State that spans tiles (running row maxima and sums,
moments of rows split over column tiles, gradient sums) is passed in and accumulated in place,
so a tiled op calls the kernel once per tile and gets the full result. Row statistics are
float64 arrays; sums over a row are accumulated in float64 whatever the data precision.
"""

from numtile.ops_cpu.nn.attention import (
    attention_backward_block,
    attention_backward_delta,
    attention_forward_block,
    attention_forward_finalize,
)
from numtile.ops_cpu.nn.attention_bf16 import (
    attention_backward_block_bf16,
    attention_forward_block_bf16,
    bf16_attention_ready,
)
from numtile.ops_cpu.nn.decode import (
    decode_attention_block,
    decode_attention_finalize,
    kv_cache_write,
)
from numtile.ops_cpu.nn.embedding import (
    embedding_gather,
    embedding_scatter_add,
)
from numtile.ops_cpu.nn.loss import (
    cross_entropy_backward,
    cross_entropy_pick,
    logsumexp_accumulate,
)
from numtile.ops_cpu.nn.norm import (
    layer_norm_apply,
    layer_norm_backward_accumulate,
    layer_norm_backward_apply,
    layer_norm_param_grad,
    rms_norm_apply,
    rms_norm_backward_accumulate,
    rms_norm_backward_apply,
    rms_norm_param_grad,
    row_moments_accumulate,
)
from numtile.ops_cpu.nn.optim import (
    adamw_step,
)
from numtile.ops_cpu.nn.rope import (
    rope_apply,
)
from numtile.ops_cpu.nn.swiglu import (
    swiglu_apply,
    swiglu_backward,
)

__all__ = [
    "attention_forward_block",
    "attention_forward_finalize",
    "attention_backward_delta",
    "attention_backward_block",
    "attention_forward_block_bf16",
    "attention_backward_block_bf16",
    "bf16_attention_ready",
    "row_moments_accumulate",
    "layer_norm_apply",
    "layer_norm_backward_accumulate",
    "layer_norm_backward_apply",
    "layer_norm_param_grad",
    "rms_norm_apply",
    "rms_norm_backward_accumulate",
    "rms_norm_backward_apply",
    "rms_norm_param_grad",
    "logsumexp_accumulate",
    "cross_entropy_pick",
    "cross_entropy_backward",
    "adamw_step",
    "embedding_gather",
    "decode_attention_block",
    "decode_attention_finalize",
    "kv_cache_write",
    "embedding_scatter_add",
    "rope_apply",
    "swiglu_apply",
    "swiglu_backward",
]
