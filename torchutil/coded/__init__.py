"""Learned coded computation: resilient inference with learned codes and parity models.

A deployed classifier F serves queries on k workers; a code adds one parity query per group of
k so that an unavailable prediction can be reconstructed from the others (Kosaian, Rashmi,
Venkataraman, "Learning a Code", arXiv 1806.01259; ParM, SOSP 2019).

    from torchutil import coded
    data = coded.load_dataset("digits")                       # ships with scikit-learn
    # or load_dataset("fashion"): from /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist)
    f = coded.build_base_model("mlp", data.shape)
    coded.train_base(f, data, epochs=30)
    code = coded.build_code("learned", 2, f, data.shape, data.classes)   # or "parity"
    coded.train_code(code, f, data, epochs=100, loss="kl")
    coded.evaluate(code, f, data)                             # reconstruction / degraded accuracy

torchutil.coded.cost measures what the redundancy costs with torchutil.profile,
torchutil.coded.sim (numpy only) simulates tail latency under stragglers, and
torchutil.coded.serve measures it: a frontend and k + 1 worker processes, stragglers made by
CPU-burning processes, the simulation of the same service times beside it.
"""
from torchutil.coded.codes import (ENCODERS, PARADIGMS, Code, ConcatEncoder, ConvEncoder, MLPDecoder, MLPEncoder,
                                   SubtractionDecoder, SumEncoder, build_code, check_k)
from torchutil.coded.data import (CLASSES, DATASETS, DEFAULT_DIRS, Dataset, default_data_dir, load_dataset,
                                  read_cifar10_batch, read_idx)
from torchutil.coded.evaluate import CodedMetrics, base_accuracy, evaluate
from torchutil.coded.models import BASE_MODELS, ResNet, build_base_model, default_base_model, mlp
from torchutil.coded.train import LOSSES, code_epoch, base_epoch, reconstruction_loss, train_base, train_code

__all__ = ["BASE_MODELS", "CLASSES", "Code", "CodedMetrics", "ConcatEncoder", "ConvEncoder", "DATASETS", "DEFAULT_DIRS", "Dataset",
           "ENCODERS", "LOSSES", "MLPDecoder", "MLPEncoder", "PARADIGMS", "ResNet", "SubtractionDecoder",
           "SumEncoder", "base_accuracy", "base_epoch", "build_base_model", "build_code", "check_k", "code_epoch",
           "default_base_model", "default_data_dir", "evaluate", "load_dataset", "mlp", "read_cifar10_batch", "read_idx",
           "reconstruction_loss", "train_base", "train_code"]
