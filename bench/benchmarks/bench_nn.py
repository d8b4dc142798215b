"""asv benchmarks: a GPT-2 training step and tiled attention."""

import numpy as np

import numtile as nt
from numtile.nn import optim
from numtile.nn.attention import causal_self_attention
from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling


class TrainStep:
    """One full step (forward, backward, AdamW) of the default byte-level model."""

    params = ([1, 4], [1, 4])
    param_names = ["batch_tile", "head_tile"]
    timeout = 300

    def setup(self, batch_tile, head_tile):
        config = GPT2Config(vocab_size=256, n_positions=256, n_embd=256, n_layer=4, n_head=4)
        self.model = GPT2(config, Tiling(batch=batch_tile, head=head_tile), seq_len=256)
        self.opt = optim.AdamW(self.model.parameters(), lr=1e-3)
        rng = np.random.default_rng(0)
        self.x, self.y = rng.integers(0, 256, (16, 256)), rng.integers(0, 256, (16, 256))
        self.time_step(batch_tile, head_tile)

    def time_step(self, batch_tile, head_tile):
        loss = self.model(self.x, self.y)[1]  # logits dropped: freed tile by tile
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        loss.item()


class Attention:
    params = ([64, 256], ["forward", "forward_backward"])
    param_names = ["seq_tile", "pass_"]

    def setup(self, seq_tile, pass_):
        data = np.random.default_rng(0).standard_normal((4, 256, 768)).astype(np.float32)
        self.qkv = nt.from_numpy(data, tile_shape=(1, seq_tile, 256))
        self.time_attention(seq_tile, pass_)

    def time_attention(self, seq_tile, pass_):
        qkv = self.qkv.detach().requires_grad_() if pass_ != "forward" else self.qkv
        out = causal_self_attention(qkv, n_head=4, head_tile=4)
        if pass_ == "forward":
            out.wait()
        else:
            nt.sum(out).backward()
            qkv.grad.wait()
