"""Builds torchutil (distribution torch-utilization) and its one extension, torchutil._C,
against the installed torch.

    pip install --no-build-isolation .

The extension is compiled against one torch's C++ ABI and runs under that torch only, so the
wheel requires torch==<the version it was built with> and `import torchutil` checks the full
version (local suffix like +cu130 included). An isolated build (`pip install .` without
--no-build-isolation) would build against a torch fetched into a throwaway environment, not the
one the extension will run under: it stops at once with the fix.

CUDA support (CUDA-graph timing, device properties) is compiled in when torch has CUDA and the
CUDA toolkit headers of the same major version are found (CUDA_HOME); CUPTI kernel tracing when
cupti.h is found too. Neither is required: without them the build is CPU-only, and
torchutil.build_info() says what was compiled in. Set TORCHUTIL_CUDA=0 to build without CUDA.
"""
import glob
import os
import re
import sys

from setuptools import find_packages, setup

REBUILD = "pip install --no-build-isolation ."


def _import_torch():
    """The environment's torch. SystemExit with the one-line fix without torch, or in an isolated
    build: pip's and `python -m build`'s PEP 517 build environments (pip-build-env-*/,
    build-env-*/) see no torch, or a second one fetched into them."""
    try:
        import torch
    except ModuleNotFoundError:
        torch = None
    paths = [sys.prefix, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    isolated = "PEP517_BUILD_BACKEND" in os.environ and any("build-env-" in p for p in paths)
    if torch is not None and "build-env-" not in torch.__file__:
        return torch
    if torch is not None or isolated:
        found = f"torch {torch.__version__} in it" if torch else "no torch in it"
        raise SystemExit(f"torchutil: an isolated build environment ({found}) cannot build the extension for "
                         f"the torch it will run with; install torch, then: {REBUILD}")
    raise SystemExit(f"torchutil: torch is not installed; install torch (https://pytorch.org), then: {REBUILD}")


torch = _import_torch()

# torch.utils.cpp_extension guesses CUDA_HOME from the nvcc on PATH; where that nvcc is a link
# outside the toolkit (/usr/local/bin/nvcc), point it at the toolkit itself.
if "CUDA_HOME" not in os.environ and os.path.exists("/usr/local/cuda/include/cuda_runtime_api.h"):
    os.environ["CUDA_HOME"] = "/usr/local/cuda"

from torch.utils import cpp_extension  # noqa: E402  (reads CUDA_HOME on import)

ROOT = os.path.dirname(os.path.abspath(__file__))


def _version():
    """torchutil/_version.py's __version__, read as text: importing torchutil needs the extension
    this script builds."""
    with open(os.path.join(ROOT, "torchutil", "_version.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M).group(1)


def _cuda_toolkit_major(cuda_home):
    header = os.path.join(cuda_home, "include", "cuda_runtime_api.h")
    if not os.path.exists(header):
        return None
    match = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", open(header).read())
    return int(match.group(1)) // 1000 if match else None


def _nvidia_wheel_dirs(sub):
    """Header or library folders of the nvidia-* wheels that CUDA builds of torch bring."""
    site = os.path.dirname(os.path.dirname(torch.__file__))
    major = torch.version.cuda.split(".")[0] if torch.version.cuda else "0"
    found = glob.glob(os.path.join(site, "nvidia", f"cu{major}", sub))  # CUDA 13 layout
    found += glob.glob(os.path.join(site, "nvidia", "*", sub))  # CUDA 12 layout
    return sorted(set(d for d in found if os.path.isdir(d)))


def _find_header(name, dirs):
    return next((d for d in dirs if os.path.exists(os.path.join(d, name))), None)


def _cuda_include_dirs():
    """Folders holding the CUDA headers that ATen's CUDA headers include, or None."""
    dirs = [os.path.join(cpp_extension.CUDA_HOME, "include")] if cpp_extension.CUDA_HOME else []
    dirs += _nvidia_wheel_dirs("include")
    needed = ["cuda_runtime_api.h", "cublas_v2.h", "cusparse.h"]
    found = [_find_header(h, dirs) for h in needed]
    return None if None in found else sorted(set(found), key=dirs.index)


def _cuda_wanted():
    if os.environ.get("TORCHUTIL_CUDA", "1") == "0":
        return False, "disabled by TORCHUTIL_CUDA=0"
    if torch.version.cuda is None:
        return False, "torch has no CUDA"
    cuda_home = cpp_extension.CUDA_HOME
    if cuda_home is None:
        return False, "no CUDA toolkit found (set CUDA_HOME)"
    toolkit = _cuda_toolkit_major(cuda_home)
    torch_major = int(torch.version.cuda.split(".")[0])
    if toolkit != torch_major:
        return False, f"CUDA toolkit {toolkit} at {cuda_home} does not match torch's CUDA {torch_major}"
    if _cuda_include_dirs() is None:
        return False, "cuBLAS/cuSPARSE headers not found in CUDA_HOME or the nvidia wheels"
    return True, f"CUDA {torch.version.cuda} from {cuda_home}"


def _cupti():
    """(include dir, link arguments) for CUPTI, from the toolkit or the nvidia-cuda-cupti wheel,
    or None. Links by soname, so the libcupti that torch already loaded is the one used."""
    home = cpp_extension.CUDA_HOME
    toolkit = [os.path.join(home, "include"), os.path.join(home, "extras", "CUPTI", "include")]
    include = _find_header("cupti.h", toolkit + _nvidia_wheel_dirs("include"))
    lib_dirs = [os.path.join(home, "lib64"), os.path.join(home, "extras", "CUPTI", "lib64")]
    lib_dirs += _nvidia_wheel_dirs("lib")
    for d in lib_dirs:
        libs = sorted(glob.glob(os.path.join(d, "libcupti.so*")), key=len)
        if include and libs:
            return include, [f"-L{d}", f"-l:{os.path.basename(libs[0])}"]
    return None


def _sources(with_cuda, with_cupti):
    patterns = ["csrc/core/*.cpp", "csrc/libtorch/*.cpp", "csrc/ops/*.cpp", "csrc/python/*.cpp"]
    if with_cuda:
        patterns.append("csrc/cuda/*.cpp")
    if with_cupti:
        patterns.append("csrc/cupti/*.cpp")
    return sorted(f for p in patterns for f in glob.glob(os.path.join(ROOT, p)))


def _extension():
    with_cuda, why = _cuda_wanted()
    print(f"torchutil: CUDA support {'on' if with_cuda else 'off'} ({why})")
    cupti = _cupti() if with_cuda else None
    print(f"torchutil: CUPTI kernel tracing {'on' if cupti else 'off'}"
          + (f" (cupti.h in {cupti[0]})" if cupti else ""))
    define_macros = [("TORCHUTIL_TORCH_VERSION", f'"{torch.__version__}"')]
    # libtorch is built with NDEBUG, and some of its classes (at::RecordFunction) change layout
    # without it: the extension must match or it reads the wrong fields.
    cxx_flags = ["-O2", "-DNDEBUG", "-fvisibility=hidden"]
    kwargs = dict(
        name="torchutil._C",
        sources=[os.path.relpath(s, ROOT) for s in _sources(with_cuda, cupti is not None)],
        include_dirs=[os.path.join(ROOT, "csrc")],
        define_macros=define_macros,
        extra_compile_args={"cxx": cxx_flags},
    )
    if with_cuda:
        define_macros.append(("TORCHUTIL_WITH_CUDA", None))
        kwargs["include_dirs"] += _cuda_include_dirs()
        if cupti:
            define_macros.append(("TORCHUTIL_WITH_CUPTI", None))
            kwargs["include_dirs"].append(cupti[0])
            # libdl: the counter reader finds cuCtxGetCurrent in the driver torch loaded.
            kwargs["extra_link_args"] = cupti[1] + ["-ldl"]
        return cpp_extension.CUDAExtension(**kwargs)
    return cpp_extension.CppExtension(**kwargs)


def _torch_requirement():
    """torch==<the public version this build is compiled against>: the local suffix (+cu130,
    +cpu) is not a package index version; import torchutil checks it (torchutil/_ops.py)."""
    return f"torch=={torch.__version__.split('+')[0]}"


setup(
    # The import name stays torchutil; "torchutil" on PyPI is an unrelated project.
    name="torch-utilization",
    version=_version(),
    description="GPU utilization of PyTorch inference: FLOPs counted in the dispatcher, "
    "kernels traced with CUPTI, utilization as tensors",
    packages=find_packages(include=["torchutil", "torchutil.*"]),
    # The NATS-Bench accuracy table, the packaged H200 sweep (nas correlate/search --db
    # builtin:h200-auto) and their source/license note (torchutil/nas/data), listed
    # here for wheels and sdists alike. include_package_data stays off: with it on, setuptools
    # takes the data folder for an undeclared package and warns that it would be ignored.
    package_data={"torchutil": ["py.typed"], "torchutil.nas": ["data/*.csv", "data/*.csv.gz", "data/*.md"]},
    include_package_data=False,
    python_requires=">=3.10",
    # numpy: torchutil.nas (rank statistics) and the NAS studies.
    install_requires=[_torch_requirement(), "numpy"],
    extras_require={
        # torchvision's classifiers: the command line's model names (profile, survey), the
        # fold benchmark's resnet18_cifar. An extra, not a requirement: pip would replace an
        # installed torch with the one the newest torchvision pins; install the torchvision
        # that matches your torch.
        "vision": ["torchvision"],
        # timm:<name> models in the command line and the survey.
        "timm": ["timm"],
        # The studies' plots (survey, nas correlate, nas search) need matplotlib; tqdm draws
        # their progress bars when present (else a plain text line). Neither is needed to profile.
        "plot": ["matplotlib", "tqdm"],
        # torchutil.coded's default data set, scikit-learn's handwritten digits (1,797 8x8
        # images read from a CSV inside the package: nothing is downloaded), so that
        # `torchutil coded train` runs on a fresh machine with no data.
        "coded": ["scikit-learn"],
        # torchutil.profile_generate on Hugging Face causal LMs (DynamicCache, StaticCache).
        "transformers": ["transformers>=5"],
    },
    entry_points={"console_scripts": ["torchutil = torchutil.studies.cli:main"]},
    ext_modules=[_extension()],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True)},
)
