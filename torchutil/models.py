"""The models torchutil's commands build.

build_model: any model the commands know by name, with its input size: a CNN of this module
(torch alone; resnet18_cifar needs torchvision), a torchvision classification model, or a timm
model as "timm:<name>". A name it does not know is answered with the near names (known_models).
build_classifier: the torchvision or timm model alone, with random weights. DTYPES: the dtype
names the commands accept. Setup: where and how a network and its input are placed (device,
dtype, memory format), for the commands, the NAS cells (torchutil.nas.cells) and the benchmarks.

Small CNNs for the FoldedCNN experiments (RQ2):

specialized_cnn: CNNs in the spirit of NoScope's specialized networks and those FoldedCNNs
folds (Kosaian et al., ICML 2021): a few conv layers, small inputs (32x32 or 64x64), few
classes. They are ours, not the papers' exact networks: conv-BN-ReLU blocks, each but the last
followed by 2x2 max pooling, then global average pooling and one Linear.

noscope_cnn: NoScope's own specialized networks (Kang et al., VLDB 2017; generate_conv_net in
its repository's noscope/Models.py, which FoldedCNNs folds): 50x50 inputs; one to three stages
of two conv3x3-ReLU layers (nb_filters, 2x, 4x) each ending in 2x2 max pooling; then Flatten,
Linear(nb_dense)-ReLU and Linear(classes). Its Dropout layers are left out (no-ops at inference).
NoScope searched nb_filters in {16, 32}, stages in {1, 2}, nb_dense in {32, 64, 128}.

resnet18_cifar: ResNet-18 for CIFAR (32x32, 10 classes): torchvision's ResNet with BasicBlocks
[2, 2, 2, 2], a 3x3 stride-1 stem and no stem max pooling (the usual CIFAR adaptation).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import difflib

import torch
from torch import nn

__all__ = ["DTYPES", "DTYPE_ALIASES", "dtype_name", "FOLD_BENCH_MODELS", "NEEDS_TORCHVISION", "SPECIALIZED", "Setup",
           "TORCHVISION_CLASSIFIERS", "build", "build_classifier", "build_model", "check_name", "classifier_image_size",
           "has_torchvision", "known_models", "noscope_cnn", "resnet18_cifar", "specialized_cnn", "torchvision_hint"]

#: dtype names the commands accept (the survey adds "tf32": float32 with TF32 allowed).
DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}
#: The other spellings of DTYPES' names, in any case, that torchutil.peak_flops accepts too
#: (csrc/core/PeakTable.cpp, parsePeakDtype): the commands' --dtype takes the same.
DTYPE_ALIASES = {"fp64": "float64", "double": "float64", "fp32": "float32", "float": "float32",
                 "fp16": "float16", "half": "float16", "bf16": "bfloat16"}


def dtype_name(text: str) -> str:
    """The DTYPES name of a spelling of DTYPE_ALIASES or of a DTYPES name, in any case; any
    other text as it was (for the caller's list of names to refuse)."""
    low = text.lower()
    return DTYPE_ALIASES.get(low, low if low in DTYPES else text)


#: torchvision's classification models (torchvision.models.list_models(module=torchvision.models)
#: of torchvision 0.29), so that a machine without torchvision still tells a torchvision name
#: from a typo; tests/test_models.py checks it against the installed torchvision.
TORCHVISION_CLASSIFIERS = (
    "alexnet", "convnext_base", "convnext_large", "convnext_small", "convnext_tiny", "densenet121", "densenet161",
    "densenet169", "densenet201", "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3",
    "efficientnet_b4", "efficientnet_b5", "efficientnet_b6", "efficientnet_b7", "efficientnet_v2_l",
    "efficientnet_v2_m", "efficientnet_v2_s", "googlenet", "inception_v3", "maxvit_t", "mnasnet0_5", "mnasnet0_75",
    "mnasnet1_0", "mnasnet1_3", "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small", "regnet_x_16gf",
    "regnet_x_1_6gf", "regnet_x_32gf", "regnet_x_3_2gf", "regnet_x_400mf", "regnet_x_800mf", "regnet_x_8gf",
    "regnet_y_128gf", "regnet_y_16gf", "regnet_y_1_6gf", "regnet_y_32gf", "regnet_y_3_2gf", "regnet_y_400mf",
    "regnet_y_800mf", "regnet_y_8gf", "resnet101", "resnet152", "resnet18", "resnet34", "resnet50",
    "resnext101_32x8d", "resnext101_64x4d", "resnext50_32x4d", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
    "shufflenet_v2_x1_5", "shufflenet_v2_x2_0", "squeezenet1_0", "squeezenet1_1", "swin_b", "swin_s", "swin_t",
    "swin_v2_b", "swin_v2_s", "swin_v2_t", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19",
    "vgg19_bn", "vit_b_16", "vit_b_32", "vit_h_14", "vit_l_16", "vit_l_32", "wide_resnet101_2", "wide_resnet50_2",
)


def has_torchvision() -> bool:
    """Whether torchvision can be imported (the CPU wheel of torch comes without it)."""
    try:
        import torchvision  # noqa: F401
    except ImportError:
        return False
    return True


def torchvision_hint() -> str:
    """The pip line for the torchvision release built against the installed torch: torchvision
    0.(N+15) goes with torch 2.N."""
    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    if major != 2:
        return "pip install the torchvision release that matches your torch"
    return f"pip install torchvision==0.{minor + 15}.*"


def _torchvision_names() -> list[str]:
    """TORCHVISION_CLASSIFIERS, with any the installed torchvision adds."""
    names = set(TORCHVISION_CLASSIFIERS)
    if has_torchvision():
        import torchvision

        names.update(torchvision.models.list_models(module=torchvision.models))
    return sorted(names)


def check_name(name: str) -> None:
    """ValueError for a name no command can build on this machine: a name torchutil does not
    know (with the near names of known_models()), or a torchvision name where torchvision is not
    installed (with the pip line). timm:<name> is left to timm."""
    if name.startswith("timm:"):
        return
    known = known_models()
    if name not in known:
        near = difflib.get_close_matches(name, known, n=4)
        hint = (f"did you mean {', '.join(near)}?" if near else
                f"the names are {', '.join(FOLD_BENCH_MODELS)} and torchvision's classifiers (resnet50, ...)")
        raise ValueError(f"torchutil: unknown model {name!r}; {hint} (timm models: timm:<name>)")
    if name in NEEDS_TORCHVISION and not has_torchvision():
        raise ValueError(f"torchutil: {name} needs torchvision ({torchvision_hint()}); without it: "
                         f"{', '.join(SPECIALIZED)}")


@dataclass(frozen=True)
class Setup:
    """Where and how a study runs a network and its input: device, dtype, memory format.

        setup = Setup.on("cuda", torch.float16)          # channels_last: on for CUDA
        model, x = setup.model(net), setup.input(256, 3, 224, 224)
    """

    device: torch.device
    dtype: torch.dtype
    channels_last: bool

    @classmethod
    def on(cls, device: torch.device | str, dtype: torch.dtype, channels_last: bool | None = None) -> "Setup":
        """channels_last None: on for CUDA (cuDNN's fast layout for convolutions), off elsewhere."""
        device = torch.device(device)
        return cls(device, dtype, device.type == "cuda" if channels_last is None else channels_last)

    def model(self, model: torch.nn.Module) -> torch.nn.Module:
        """model in eval mode, moved (in place, as nn.Module.to does) to the device, dtype and
        memory format."""
        model = model.eval().to(device=self.device, dtype=self.dtype)
        return model.to(memory_format=torch.channels_last) if self.channels_last else model

    def input(self, *shape: int) -> torch.Tensor:
        """A standard-normal input of `shape` (4-D with channels_last) on the device, in the dtype
        and memory format."""
        x = torch.randn(*shape, device=self.device, dtype=self.dtype)
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    def classifier(self, name: str, batch: int, image_size: int | None = None
                   ) -> tuple[torch.nn.Module, torch.Tensor]:
        """The classifier `name` of torchutil.models.build_classifier (random weights) placed as
        model() places it, and a batch of `batch` images of its input size
        (classifier_image_size, unless image_size is given) placed as input() places it."""
        size = image_size or classifier_image_size(name)
        return self.model(build_classifier(name)), self.input(batch, 3, size, size)


def build_classifier(name: str) -> nn.Module:
    """A classification model with random weights: a torchvision name, or "timm:<name>"."""
    if name.startswith("timm:"):
        try:
            import timm
        except ImportError:
            raise ValueError(f"torchutil: {name} needs timm (pip install timm: the timm extra)") from None
        return timm.create_model(name.removeprefix("timm:"), pretrained=False)
    check_name(name)
    if name in FOLD_BENCH_MODELS:
        raise ValueError(f"torchutil: {name} is a CNN of torchutil.models, not a torchvision classifier: "
                         f"build_model({name!r}) builds it")
    import torchvision

    # Their auxiliary heads only train; init_weights=False skips a slow scipy initialization.
    kwargs = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
    return torchvision.models.get_model(name, weights=None, **kwargs)


def classifier_image_size(name: str) -> int:
    """The input height and width a model of build_model is made for: its own for the CNNs of
    this module, 299 for inception_v3, 224 for the others."""
    if name in FOLD_BENCH_MODELS:
        return FOLD_BENCH_MODELS[name][1]
    return 299 if name == "inception_v3" else 224


def specialized_cnn(channels: Sequence[int] = (32, 64), classes: int = 2,
                    in_channels: int = 3) -> nn.Sequential:
    """conv3x3-BN-ReLU per entry of `channels` (2x2 max pooling after each but the last),
    global average pooling, Linear(channels[-1], classes). Any input size works."""
    if not channels:
        raise ValueError("torchutil: specialized_cnn needs at least one conv layer, got channels=()")
    layers: list[nn.Module] = []
    c_in = in_channels
    for i, c in enumerate(channels):
        layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
        if i + 1 < len(channels):
            layers.append(nn.MaxPool2d(2))
        c_in = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, classes)]
    return nn.Sequential(*layers)


def noscope_cnn(nb_filters: int = 16, stages: int = 1, nb_dense: int = 128, classes: int = 2,
                image_size: int = 50, in_channels: int = 3) -> nn.Sequential:
    """NoScope's generate_conv_net (see the module docstring) for image_size x image_size inputs."""
    if not 1 <= stages <= 3:
        raise ValueError(f"torchutil: noscope_cnn has 1 to 3 stages, got {stages}")
    layers: list[nn.Module] = []
    c_in, size = in_channels, image_size
    for i in range(stages):
        c = nb_filters * 2 ** i
        layers += [nn.Conv2d(c_in, c, 3, padding=1), nn.ReLU(inplace=True),
                   nn.Conv2d(c, c, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
        c_in, size = c, size // 2
    layers += [nn.Flatten(), nn.Linear(c_in * size * size, nb_dense), nn.ReLU(inplace=True),
               nn.Linear(nb_dense, classes)]
    return nn.Sequential(*layers)


def resnet18_cifar(classes: int = 10) -> nn.Module:
    """ResNet-18 for 32x32 inputs (see the module docstring)."""
    try:
        from torchvision.models.resnet import BasicBlock, ResNet
    except ImportError:
        raise ValueError(f"torchutil: resnet18_cifar needs torchvision ({torchvision_hint()})") from None

    model = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=classes)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


# name -> (constructor, image size, classes)
SPECIALIZED: dict[str, tuple[Callable[[], nn.Module], int, int]] = {
    "spec_2conv_32": (lambda: specialized_cnn((16, 32), classes=2), 32, 2),
    "spec_3conv_32": (lambda: specialized_cnn((32, 64, 64), classes=2), 32, 2),
    "spec_4conv_64": (lambda: specialized_cnn((32, 64, 128, 128), classes=4), 64, 4),
    "noscope_16x1": (lambda: noscope_cnn(16, 1, 128), 50, 2),
    "noscope_32x1": (lambda: noscope_cnn(32, 1, 128), 50, 2),
    "noscope_32x2": (lambda: noscope_cnn(32, 2, 128), 50, 2),
}
FOLD_BENCH_MODELS: dict[str, tuple[Callable[[], nn.Module], int, int]] = {
    **SPECIALIZED,
    "resnet18_cifar": (resnet18_cifar, 32, 10),
}


#: The names that need torchvision installed.
NEEDS_TORCHVISION = frozenset({"resnet18_cifar", *TORCHVISION_CLASSIFIERS})


def known_models() -> list[str]:
    """Every name build_model knows: the CNNs of this module, then torchvision's classifiers
    (whether or not torchvision is installed: check_name says what a name needs)."""
    return [*FOLD_BENCH_MODELS, *_torchvision_names()]


def build(name: str) -> tuple[nn.Module, int, int]:
    """(model in eval mode, image size, classes) for a name of FOLD_BENCH_MODELS."""
    if name not in FOLD_BENCH_MODELS:
        near = difflib.get_close_matches(name, list(FOLD_BENCH_MODELS), n=4)
        raise ValueError(f"torchutil: unknown model {name!r}; "
                         + (f"did you mean {', '.join(near)}? " if near else "")
                         + f"choose from {', '.join(FOLD_BENCH_MODELS)}")
    check_name(name)
    ctor, size, classes = FOLD_BENCH_MODELS[name]
    return ctor().eval(), size, classes


def build_model(name: str) -> tuple[nn.Module, int]:
    """(model with random weights, its input height and width) for any name of known_models() or
    "timm:<name>". ValueError, before anything is built, for a name check_name refuses."""
    if name in FOLD_BENCH_MODELS:
        model, size, _ = build(name)
        return model, size
    return build_classifier(name), classifier_image_size(name)
