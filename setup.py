"""Builds torchutil (distribution torch-utilization) and its one extension, torchutil._C,
against the installed torch.

    pip install --no-build-isolation .

The extension is compiled against one torch's C++ ABI and runs under that torch only, so the
wheel requires torch==<the version it was built with> and `import torchutil` checks the full
version (local suffix like +cu130 included). An isolated build (`pip install .` without
--no-build-isolation) would build against a torch fetched into a throwaway environment, not the
one the extension will run under: it stops at once with the fix. The sdist needs no torch: it is
the same archive for every torch (`python -m build --sdist`, isolated or not).

CUDA support (CUDA-graph timing, device properties) is compiled in when torch has CUDA and the
CUDA toolkit headers of the same major version are found (CUDA_HOME); CUPTI kernel tracing when
cupti.h is found too. Neither is required: without them the build is CPU-only, and
torchutil.build_info() says what was compiled in. Set TORCHUTIL_CUDA=0 to build without CUDA.

Every source is compiled once into build/ext (ninja: a second build of an unchanged tree compiles
nothing), and build/ext/torchutil.cmake records what was compiled and how: CMakeLists.txt links
the GoogleTest suite against those same objects.
"""
import glob
import os
import re
import sys

from setuptools import Extension, find_packages, setup

REBUILD = "pip install --no-build-isolation ."
ROOT = os.path.dirname(os.path.abspath(__file__))
# One build folder for every build of this tree (pip's editable install would take a new
# temporary one each time, and recompile everything), so ninja reuses what is up to date.
BUILD_TEMP = os.path.join(ROOT, "build", "ext")
# csrc's folders; cuda and cupti are compiled only where the build has CUDA/CUPTI (energy loads
# NVML at run time, so it needs neither).
CSRC_DIRS = ("core", "libtorch", "ops", "python", "energy", "cuda", "cupti")
# The commands that build the extension or write a wheel's metadata (its torch pin).
BUILDING_COMMANDS = {"build", "build_ext", "bdist", "bdist_wheel", "bdist_egg", "dist_info", "editable_wheel",
                     "install", "develop"}


def _makes_only_the_sdist():
    """True when setup.py runs to make the sdist or its metadata: PEP 517's
    get_requires_for_build_sdist runs `setup.py egg_info`, build_sdist runs `setup.py sdist`, in an
    isolated environment that has no torch. The sdist is the same for every torch, so these need
    none; every command that builds (or writes a wheel's metadata) uses the environment's torch."""
    words = [a for a in sys.argv[1:] if not a.startswith("-")]
    return bool(words) and words[0] in ("egg_info", "sdist") and not BUILDING_COMMANDS & set(words)


def _import_torch():
    """The environment's torch. SystemExit with one line naming what is missing and the fix:
    without torch, or in an isolated build (pip's and `python -m build`'s PEP 517 build
    environments, pip-build-env-*/ and build-env-*/, see only the build requirements, which name
    no torch; or a second torch fetched into them)."""
    try:
        import torch
    except ModuleNotFoundError:
        torch = None
    if torch is not None and "build-env-" not in torch.__file__:
        return torch
    if torch is not None:
        raise SystemExit(f"torchutil: this isolated build environment fetched its own torch {torch.__version__} "
                         f"({os.path.dirname(torch.__file__)}), not the torch the extension will run with; "
                         f"build in the environment that has your torch: {REBUILD}")
    # pip's and build's hook runners (pyproject_hooks) name the backend in the environment;
    # pip's isolated environment is a PYTHONPATH overlay, build's a venv.
    if {"PEP517_BUILD_BACKEND", "_PYPROJECT_HOOKS_BUILD_BACKEND"} & set(os.environ):
        paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        where = next((os.path.dirname(p) for p in paths if "build-env-" in p), sys.prefix)
        raise SystemExit(f"torchutil: the build environment ({where}) has no torch: an isolated build "
                         "(pip install . without --no-build-isolation, python -m build without --no-isolation) "
                         "sees only the build requirements, which name no torch, since the extension must be "
                         f"compiled against the torch it will run with. With torch installed: {REBUILD}")
    raise SystemExit(f"torchutil: torch is not installed in {sys.executable}; install torch (https://pytorch.org), "
                     f"then: {REBUILD}")


def _relative(paths):
    return sorted(os.path.relpath(p, ROOT) for p in paths)


def _sources(with_cuda, with_cupti):
    dirs = [d for d in CSRC_DIRS if (d != "cuda" or with_cuda) and (d != "cupti" or with_cupti)]
    return _relative(f for d in dirs for f in glob.glob(os.path.join(ROOT, "csrc", d, "*.cpp")))


# The unity build: csrc/'s units are compiled a few translation units at a time, so torch's
# headers (10-20 s of parsing each time a unit includes them) are parsed once per group rather
# than once per file, and the templates every unit instantiates are compiled once per group. A
# group never mixes folders that CMakeLists.txt links apart: the torch-free core, the Python
# module (python/), and the torch layer (libtorch/, ops/, cuda/); energy/ and cupti/ (small, and
# linked by the tests file by file) stay one object per file. TORCHUTIL_UNITY=0 compiles every
# file on its own (as a developer bisecting a compile error may want).
# Longest first (ninja starts them in this order): the torch layer, the Python module, the core.
UNITY_GROUPS = {"libtorch": ("libtorch", "ops", "cuda"), "python": ("python",), "core": ("core",)}
# How many translation units each group is cut into: the two cores of a small machine each take
# one of the torch layer's halves, then the Python module and the core. The torch-free core parses
# no torch header, so cutting it in three costs little and keeps the rebuild after an edit of one
# of its files short (a third of the core, not all of it).
UNITY_PARTS = {"libtorch": 2, "python": 1, "core": 3}
UNITY_DIR = os.path.join("build", "unity")


def _unity_sources(sources):
    """Sources with each unity group's files replaced by generated build/unity/csrc/<group>/
    unity_<i>.cpp files that #include them (the objects keep csrc/<group>/ in their paths, which
    is how CMakeLists.txt sorts them). A generated file is rewritten only when its text changes,
    so ninja rebuilds a part only when one of its sources (or their headers, through the
    compiler's depfiles) changed."""
    if os.environ.get("TORCHUTIL_UNITY", "1") == "0":
        return sources
    rest = [s for s in sources if not any(s.split(os.sep)[1] in dirs for dirs in UNITY_GROUPS.values())]
    out = []
    for group, dirs in UNITY_GROUPS.items():
        members = [s for s in sources if s.split(os.sep)[1] in dirs]
        parts = min(UNITY_PARTS[group], len(members))
        # Dealt in turn by name: a part's members change only when a file is added or removed,
        # never because a file grew (names private to two files of one part would clash then).
        for i, part in enumerate(sorted(members)[p::parts] for p in range(parts)):
            path = os.path.join(UNITY_DIR, "csrc", group, f"unity_{i}.cpp")
            text = "// Generated by setup.py (the unity build): compiles these units as one.\n" + "".join(
                f'#include "{os.path.relpath(s, "csrc")}"\n' for s in sorted(part))
            full = os.path.join(ROOT, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if not os.path.exists(full) or open(full).read() != text:
                with open(full, "w") as f:
                    f.write(text)
            out.append(path)
    return out + rest


def _headers():
    """Every header of csrc/, as the extension's depends: the sdist ships them (ninja follows the
    includes itself, through the compiler's depfiles)."""
    return _relative(glob.glob(os.path.join(ROOT, "csrc", "*", "*.h")))


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


def _extension():
    with_cuda, why = _cuda_wanted()
    print(f"torchutil: CUDA support {'on' if with_cuda else 'off'} ({why})")
    cupti = _cupti() if with_cuda else None
    print(f"torchutil: CUPTI kernel tracing {'on' if cupti else 'off'}"
          + (f" (cupti.h in {cupti[0]})" if cupti else ""))
    define_macros = [("TORCHUTIL_TORCH_VERSION", f'"{torch.__version__}"')]
    # libtorch is built with NDEBUG, and some of its classes (at::RecordFunction) change layout
    # without it: the extension must match or it reads the wrong fields. -g0: Python's own
    # CFLAGS may carry -g (pyenv's do), and debug info for torch's headers doubles a file's
    # compile time and makes its object 20x larger. -std=c++20: what torch's headers need
    # (cpp_extension adds it where no -std is given; named here for the CMake record).
    cxx_flags = ["-O2", "-DNDEBUG", "-fvisibility=hidden", "-g0", "-std=c++20"]
    kwargs = dict(
        name="torchutil._C",
        sources=_unity_sources(_sources(with_cuda, cupti is not None)),
        depends=_headers(),
        include_dirs=[os.path.join(ROOT, "csrc")],
        define_macros=define_macros,
        extra_compile_args={"cxx": cxx_flags},
        # libdl: NVML is loaded at run time (csrc/energy).
        extra_link_args=["-ldl"],
    )
    if with_cuda:
        define_macros.append(("TORCHUTIL_WITH_CUDA", None))
        kwargs["include_dirs"] += _cuda_include_dirs()
        if cupti:
            define_macros.append(("TORCHUTIL_WITH_CUPTI", None))
            kwargs["include_dirs"].append(cupti[0])
            # libdl also serves the counter reader, which finds cuCtxGetCurrent in the driver
            # torch loaded.
            kwargs["extra_link_args"] = cupti[1] + kwargs["extra_link_args"]
        return cpp_extension.CUDAExtension(**kwargs)
    return cpp_extension.CppExtension(**kwargs)


def _torch_requirement():
    """torch==<the public version this build is compiled against>: the local suffix (+cu130,
    +cpu) is not a package index version; import torchutil checks it (torchutil/_ops.py)."""
    return f"torch=={torch.__version__.split('+')[0]}"


def _cmake_list(name, values):
    """A CMake set() of values as bracket arguments (no escaping: flags carry quotes)."""
    return f"set({name}" + "".join(f"\n    [=[{v}]=]" for v in values) + ")\n"


def _write_cmake_record(build_ext, ext):
    """<build_temp>/torchutil.cmake: the objects this build compiled and the flags and libraries
    it compiled and linked them with. CMakeLists.txt links the GoogleTests against these objects,
    so CTest tests what ships and nothing in csrc/ is compiled twice. Rewritten only when it
    changes (CMake re-reads it then)."""
    objects = build_ext.compiler.object_filenames(ext.sources, output_dir=build_ext.build_temp)
    missing = [o for o in objects if not os.path.exists(o)]
    if missing:
        raise SystemExit(f"torchutil: the build left no {missing[0]}; setuptools or torch now names objects "
                         "differently than setup.py expects (_write_cmake_record)")
    flags = ext.extra_compile_args["cxx"]
    link_dirs = ext.library_dirs + [a[2:] for a in ext.extra_link_args if a.startswith("-L")]
    text = "# Written by setup.py (build_ext) for CMakeLists.txt: what torchutil._C was built from.\n" + "".join([
        _cmake_list("TORCHUTIL_EXT_PYTHON", [sys.executable]),
        _cmake_list("TORCHUTIL_EXT_TORCH_VERSION", [torch.__version__]),
        _cmake_list("TORCHUTIL_EXT_OBJECTS", [os.path.abspath(o) for o in objects]),
        _cmake_list("TORCHUTIL_EXT_INCLUDE_DIRS", [os.path.abspath(d) for d in ext.include_dirs]),
        _cmake_list("TORCHUTIL_EXT_DEFINITIONS", [n if v is None else f"{n}={v}" for n, v in ext.define_macros]),
        _cmake_list("TORCHUTIL_EXT_COMPILE_OPTIONS", flags),
        _cmake_list("TORCHUTIL_EXT_LINK_DIRS", link_dirs),
        # libtorch_python is for a module loaded by Python; the tests are programs of their own.
        _cmake_list("TORCHUTIL_EXT_LIBRARIES", [lib for lib in ext.libraries if lib != "torch_python"]),
        _cmake_list("TORCHUTIL_EXT_LINK_OPTIONS", ext.extra_link_args),
    ])
    path = os.path.join(build_ext.build_temp, "torchutil.cmake")
    if not os.path.exists(path) or open(path).read() != text:
        with open(path, "w") as f:
            f.write(text)


def _build_ext_class():
    class BuildExt(cpp_extension.BuildExtension.with_options(use_ninja=True)):
        """torch's BuildExtension (ninja), compiling into one folder per tree, BUILD_TEMP, and
        leaving the record CMakeLists.txt reads."""

        def finalize_options(self):
            if self.build_temp is None:  # not given on the command line
                self.build_temp = BUILD_TEMP
            super().finalize_options()

        def build_extension(self, ext):
            # With ninja, BuildExtension always hands the sources to ninja (it sets force), which
            # recompiles what changed, headers included (the compiler's depfiles), and nothing else.
            super().build_extension(ext)
            _write_cmake_record(self, ext)

    return BuildExt


if _makes_only_the_sdist():
    # Every source and header, whichever of them a build compiles; the wheel pins the torch it
    # is built with (and setuptools marks Requires-Dist dynamic in the sdist's PKG-INFO).
    ext_module = Extension("torchutil._C", sources=_sources(True, True), depends=_headers(), language="c++")
    torch_requirement, cmdclass = "torch", {}
else:
    torch = _import_torch()
    # torch.utils.cpp_extension guesses CUDA_HOME from the nvcc on PATH; where that nvcc is a
    # link outside the toolkit (/usr/local/bin/nvcc), point it at the toolkit itself.
    if "CUDA_HOME" not in os.environ and os.path.exists("/usr/local/cuda/include/cuda_runtime_api.h"):
        os.environ["CUDA_HOME"] = "/usr/local/cuda"
    from torch.utils import cpp_extension  # (reads CUDA_HOME on import)

    ext_module, torch_requirement = _extension(), _torch_requirement()
    cmdclass = {"build_ext": _build_ext_class()}

setup(
    # The import name stays torchutil; "torchutil" on PyPI is an unrelated project.
    name="torch-utilization",
    version=_version(),
    description="GPU utilization of PyTorch inference: FLOPs counted in the dispatcher, "
    "kernels traced with CUPTI, utilization as tensors",
    # The package index shows the README (its links into docs/ are relative to the repository).
    long_description=open(os.path.join(ROOT, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["torchutil", "torchutil.*"]),
    # The NATS-Bench accuracy table, the packaged H200 sweep (nas correlate/search --db
    # builtin:h200-auto) and their source/license note (torchutil/nas/data), listed
    # here for wheels and sdists alike. include_package_data stays off: with it on, setuptools
    # takes the data folder for an undeclared package and warns that it would be ignored.
    package_data={"torchutil": ["py.typed"], "torchutil.nas": ["data/*.csv", "data/*.csv.gz", "data/*.md"]},
    include_package_data=False,
    python_requires=">=3.10",
    license_expression="BSD-3-Clause",
    license_files=["LICENSE"],
    # numpy: torchutil.nas (rank statistics) and the NAS studies.
    install_requires=[torch_requirement, "numpy"],
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
        # The reward inside the search engines (torchutil.nas.engines, docs/engines.md): Optuna's
        # objective, and Ray for Ray Tune's trainable and `nas evaluate --ray` over a cluster.
        # Extras: the profiler needs neither, and Ray alone is a ~75 MB wheel.
        "optuna": ["optuna>=4"],
        "ray": ["ray[tune]>=2.40"],
    },
    entry_points={"console_scripts": ["torchutil = torchutil.studies.cli:main"]},
    ext_modules=[ext_module],
    cmdclass=cmdclass,
)
