"""PyTorch references for BERT (tests/models/bert_test.cpp): a module tree written here in Hugging Face
transformers' layout (BertModel, BertForPreTraining, BertForMaskedLM, BertForSequenceClassification,
BertForTokenClassification: the same module names, so state_dict() gives transformers' checkpoint
keys), with SEEDED RANDOM weights (every weight N(0, 0.02)-ish, biases and LayerNorm affine perturbed so
a wrong mapping shows).

- model: builds args["architecture"] from args["config"] (transformers' config.json names), runs the
  inputs "input_ids", "token_type_ids", "attention_mask" (B, T) in eval mode and returns the outputs,
  the checkpoint file's bytes ("file") in the layout args["layout"] asks for, and "config" (config.json
  bytes). With args["grad"]: one training step's gradients too (train mode; the config's dropouts
  must be 0): cross-entropy of the logits (classifiers) or the MLM logits (every token) against
  "labels", each parameter's gradient under "grad.<transformers key>".
  layout: {"prefix": keep "bert.", "legacy": LayerNorm gamma / beta names, "decoder_weight": keep
  cls.predictions.decoder.weight, "decoder_bias": keep cls.predictions.decoder.bias, "position_ids":
  keep the embeddings.position_ids buffer, "bin": torch.save the state dict and convert it with
  tools/pth_to_safetensors.py (tied tensors become aliases), as pytorch_model.bin is converted}.
- pipelines: what Hugging Face's pipelines and sentence-transformers compute from model's outputs
  (tests/cli/bert_pipelines_test.cpp): builds and runs the model as `model` does (same args, extras
  on), then for every position where input_ids == args["mask_id"] (row-major over (b, t)) the top
  args["topk"] tokens of softmax(prediction_logits) ("fill.scores" (M, K) f32, "fill.ids" (M, K) i64,
  as the fill-mask pipeline's torch.topk), and the sentence embeddings "pool.mean" (last_hidden_state
  averaged over the tokens attention_mask keeps, sentence-transformers' mean pooling), "pool.cls"
  (last_hidden_state[:, 0]) and "pool.pooler" (pooler_output, models with a pooler).
- pretrain: one BERT pre-training step (tests/train/pretrain_test.cpp): BertForPreTraining built and
  randomized as `model` does from args["config"] (dropouts 0), train mode, on the inputs plus
  "mlm_labels" (B, T) (-100 where nothing is predicted) and "nsp_labels" (B): transformers'
  BertForPreTraining total_loss = cross_entropy(prediction_logits, mlm_labels, ignore_index=-100) +
  cross_entropy(seq_relationship_logits, nsp_labels); returns "file", "config", "loss", "mlm_loss",
  "nsp_loss" (1) and every parameter's gradient "grad.<transformers key>".
- count: the parameter counts of args["config"]'s BertModel and BertForPreTraining built on the meta
  device (no memory), tied weights counted once as nn.Module.parameters() does.
"""
import json
import math
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools"))
import pth_to_safetensors  # noqa: E402


def _bytes(data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).clone()


class Cfg:
    def __init__(self, d):
        self.vocab_size = d["vocab_size"]
        self.hidden_size = d["hidden_size"]
        self.num_hidden_layers = d["num_hidden_layers"]
        self.num_attention_heads = d["num_attention_heads"]
        self.intermediate_size = d["intermediate_size"]
        self.max_position_embeddings = d["max_position_embeddings"]
        self.type_vocab_size = d["type_vocab_size"]
        self.layer_norm_eps = d.get("layer_norm_eps", 1e-12)
        self.hidden_dropout_prob = d.get("hidden_dropout_prob", 0.1)
        self.attention_probs_dropout_prob = d.get("attention_probs_dropout_prob", 0.1)
        self.num_labels = d.get("num_labels", 2)
        self.device = d.get("device", "cpu")


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        dev = c.device
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=0, device=dev)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size, device=dev)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size, device=dev)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps, device=dev)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)
        self.register_buffer("position_ids", torch.arange(c.max_position_embeddings, device=dev).expand((1, -1)))

    def forward(self, input_ids, token_type_ids):
        t = input_ids.size(1)
        emb = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        emb = emb + self.position_embeddings(self.position_ids[:, :t])
        return self.dropout(self.LayerNorm(emb))


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.nh = c.num_attention_heads
        self.hs = c.hidden_size // c.num_attention_heads
        self.query = nn.Linear(c.hidden_size, c.hidden_size, device=c.device)
        self.key = nn.Linear(c.hidden_size, c.hidden_size, device=c.device)
        self.value = nn.Linear(c.hidden_size, c.hidden_size, device=c.device)
        self.dropout = nn.Dropout(c.attention_probs_dropout_prob)

    def heads(self, x):
        return x.view(x.size(0), x.size(1), self.nh, self.hs).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hs) + ext_mask
        probs = F.softmax(scores, dim=-1)
        ctx = torch.matmul(self.dropout(probs), v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(x.size(0), x.size(1), -1), probs


class BertDenseNorm(nn.Module):   # BertSelfOutput / BertOutput
    def __init__(self, c, n_in):
        super().__init__()
        self.dense = nn.Linear(n_in, c.hidden_size, device=c.device)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps, device=c.device)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, h, residual):
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertDenseNorm(c, c.hidden_size)

    def forward(self, x, ext_mask):
        ctx, probs = self.self(x, ext_mask)
        return self.output(ctx, x), probs


class BertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size, device=c.device)

    def forward(self, x):
        return F.gelu(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertDenseNorm(c, c.intermediate_size)

    def forward(self, x, ext_mask):
        a, probs = self.attention(x, ext_mask)
        return self.output(self.intermediate(a), a), probs


class BertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(c) for _ in range(c.num_hidden_layers)])


class BertPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size, device=c.device)

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class BertModel(nn.Module):
    def __init__(self, c, add_pooling_layer=True):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)
        self.pooler = BertPooler(c) if add_pooling_layer else None

    def forward(self, input_ids, token_type_ids, attention_mask):
        # transformers' get_extended_attention_mask: (1 - mask) * the dtype's lowest value, (B, 1, 1, T).
        ext = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        x = self.embeddings(input_ids, token_type_ids)
        hidden, attentions = [x], []
        for layer in self.encoder.layer:
            x, probs = layer(x, ext)
            hidden.append(x)
            attentions.append(probs)
        pooled = self.pooler(x) if self.pooler is not None else None
        return x, pooled, hidden, attentions


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size, device=c.device)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps, device=c.device)

    def forward(self, x):
        return self.LayerNorm(F.gelu(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transform = BertPredictionHeadTransform(c)
        self.decoder = nn.Linear(c.hidden_size, c.vocab_size, bias=False, device=c.device)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size, device=c.device))
        self.decoder.bias = self.bias

    def forward(self, x):
        return self.decoder(self.transform(x))


class BertOnlyMLMHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.predictions = BertLMPredictionHead(c)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.predictions = BertLMPredictionHead(c)
        self.seq_relationship = nn.Linear(c.hidden_size, 2, device=c.device)


class BertWithHeads(nn.Module):
    """transformers' BertFor* classes in one: the heads by `arch`."""

    def __init__(self, c, arch):
        super().__init__()
        self.arch = arch
        pooler = arch in ("BertForPreTraining", "BertForSequenceClassification")
        self.bert = BertModel(c, add_pooling_layer=pooler)
        if arch == "BertForPreTraining":
            self.cls = BertPreTrainingHeads(c)
        elif arch == "BertForMaskedLM":
            self.cls = BertOnlyMLMHead(c)
        else:
            self.dropout = nn.Dropout(c.hidden_dropout_prob)
            self.classifier = nn.Linear(c.hidden_size, c.num_labels, device=c.device)
        if hasattr(self, "cls"):   # transformers' tie_weights
            self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(self, input_ids, token_type_ids, attention_mask):
        x, pooled, hidden, attentions = self.bert(input_ids, token_type_ids, attention_mask)
        out = {"last_hidden_state": x}
        if pooled is not None:
            out["pooler_output"] = pooled
        if hasattr(self, "cls"):
            out["prediction_logits"] = self.cls.predictions(x)
            if self.arch == "BertForPreTraining":
                out["seq_relationship_logits"] = self.cls.seq_relationship(pooled)
        else:
            src = pooled if self.arch == "BertForSequenceClassification" else x
            out["logits"] = self.classifier(self.dropout(src))
        return out, hidden, attentions


def build(config, arch):
    c = Cfg(config)
    return BertModel(c) if arch == "BertModel" else BertWithHeads(c, arch)


def _randomize(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.05)
            else:
                p.copy_(torch.randn_like(p) * 0.05)


def _layout(sd, layout):
    """The state dict as a checkpoint of this layout would hold it (see the module docstring)."""
    out = {}
    for k, v in sd.items():
        if not layout.get("prefix", True) and k.startswith("bert."):
            k = k[len("bert."):]
        if k.endswith("cls.predictions.decoder.weight") and not layout.get("decoder_weight", True):
            continue
        if k.endswith("cls.predictions.decoder.bias") and not layout.get("decoder_bias", True):
            continue
        if k.endswith("embeddings.position_ids") and not layout.get("position_ids", True):
            continue
        if layout.get("legacy", False) and ".LayerNorm." in k:
            k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        out[k] = v
    return out


def _file(sd, layout):
    if not layout.get("bin", False):
        # model.safetensors as transformers saves it: every tensor its own (no aliases).
        return pth_to_safetensors.serialize({k: v.clone() for k, v in sd.items()})
    with tempfile.TemporaryDirectory() as d:
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
        with open(os.devnull, "w") as null:
            old, sys.stdout = sys.stdout, null
            try:
                pth_to_safetensors.main([os.path.join(d, "pytorch_model.bin"), os.path.join(d, "model.safetensors")])
            finally:
                sys.stdout = old
        with open(os.path.join(d, "model.safetensors"), "rb") as f:
            return f.read()


def _hf_config(config, arch):
    j = {"architectures": [arch], "model_type": "bert", "hidden_act": "gelu", "pad_token_id": 0,
         "position_embedding_type": "absolute", "initializer_range": 0.02, "classifier_dropout": None,
         "transformers_version": "4.30.0", "use_cache": True}
    j.update({k: v for k, v in config.items() if k != "device"})
    return j


def model(inp, args):
    torch.manual_seed(args["seed"])
    arch = args["architecture"]
    m = build(args["config"], arch)
    _randomize(m)
    sd = _layout(m.state_dict(), args.get("layout", {}))
    res = {"file": _bytes(_file(sd, args.get("layout", {}))),
           "config": _bytes(json.dumps(_hf_config(args["config"], arch), indent=2).encode())}
    ids, types, mask = inp["input_ids"], inp["token_type_ids"], inp["attention_mask"]
    m.eval()
    with torch.no_grad():
        if arch == "BertModel":
            x, pooled, hidden, attentions = m(ids, types, mask)
            out = {"last_hidden_state": x, "pooler_output": pooled}
        else:
            out, hidden, attentions = m(ids, types, mask)
    res.update(out)
    if args.get("extras", False):
        res["hidden_states"] = torch.stack(hidden)
        res["attentions"] = torch.stack(attentions)
    if args.get("grad", False):
        m.train()
        m.zero_grad()
        out, _, _ = m(ids, types, mask)
        logits = out["logits"] if "logits" in out else out["prediction_logits"]
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), inp["labels"].reshape(-1))
        loss.backward()
        res["loss"] = loss.detach().reshape(1)
        for k, p in m.named_parameters():
            res["grad." + k] = p.grad
    return res


def count(inp, args):
    cfg = dict(args["config"], device="meta")
    base = BertModel(Cfg(cfg))
    full = BertWithHeads(Cfg(cfg), "BertForPreTraining")
    n = [sum(p.numel() for p in base.parameters()), sum(p.numel() for p in full.parameters())]
    return {"counts": torch.tensor(n, dtype=torch.int64)}


def pipelines(inp, args):
    res = model(inp, dict(args, extras=True))
    ids, mask = inp["input_ids"], inp["attention_mask"]
    if "prediction_logits" in res:
        at = (ids == args["mask_id"]).nonzero(as_tuple=True)
        probs = res["prediction_logits"][at].softmax(dim=-1)
        scores, top = probs.topk(args["topk"])
        res["fill.scores"], res["fill.ids"] = scores, top
    x = res["last_hidden_state"]
    m = mask.unsqueeze(-1).expand(x.size()).float()
    res["pool.mean"] = torch.sum(x * m, 1) / torch.clamp(m.sum(1), min=1e-9)
    res["pool.cls"] = x[:, 0].contiguous()
    if "pooler_output" in res:
        res["pool.pooler"] = res["pooler_output"]
    return res


def pretrain(inp, args):
    torch.manual_seed(args["seed"])
    m = build(args["config"], "BertForPreTraining")
    _randomize(m)
    res = {"file": _bytes(_file(m.state_dict(), {})),
           "config": _bytes(json.dumps(_hf_config(args["config"], "BertForPreTraining"), indent=2).encode())}
    m.train()
    m.zero_grad()
    out, _, _ = m(inp["input_ids"], inp["token_type_ids"], inp["attention_mask"])
    logits = out["prediction_logits"]
    mlm = F.cross_entropy(logits.reshape(-1, logits.size(-1)), inp["mlm_labels"].reshape(-1), ignore_index=-100)
    nsp = F.cross_entropy(out["seq_relationship_logits"], inp["nsp_labels"])
    loss = mlm + nsp
    loss.backward()
    res["loss"], res["mlm_loss"], res["nsp_loss"] = loss.detach().reshape(1), mlm.detach().reshape(1), nsp.detach().reshape(1)
    for k, p in m.named_parameters():
        res["grad." + k] = p.grad
    return res
