"""The peers of scripts/bench.py, fetched from package registries (never committed):
llama.cpp, built from the source vendored in the pinned llama-cpp-python sdist on PyPI, cmake
from PyPI when none is installed, ONNX Runtime and NumPy from PyPI in the harness's own virtual
environment (`ensure_harness_python`), and PyTorch from PyPI in a virtual environment of its own
(its Linux wheel is the CUDA build; the CPU runs it without a GPU). Everything lands under
$SAMEBITS_CACHE/peers."""
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile

CACHE = os.environ.get("SAMEBITS_CACHE", os.path.expanduser("~/.cache/samebits"))
PEERS = os.path.join(CACHE, "peers")
# llama-cpp-python 0.3.36: its sdist vendors the llama.cpp source it binds to.
LLAMA_SDIST = ("llama-cpp-python", "0.3.36",
               "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e")
CMAKE_PIN = "cmake==4.4.4"
# What bench.py itself imports (NumPy) and the ONNX Runtime peer, for the harness's own venv.
HARNESS_PINS = ["numpy==2.4.6", "onnxruntime==1.31.1", "typing_extensions==4.15.0"]
HARNESS_VENV = os.path.join(PEERS, "venv")
# PyTorch for the float32 SmolLM2 peer on the CPU, with what benchlib/float32_llm.py imports.
TORCH_PINS = ["torch==2.15.0", "numpy", "gguf"]
# Top-level parts of the llama.cpp tree a CPU or CUDA build of llama-bench and libllama needs
# (the GPU machine gets only these: one call carries at most 64 MiB).
LLAMA_BUILD_PARTS = ["CMakeLists.txt", "cmake", "common", "ggml", "include", "src", "tools", "vendor",
                     "licenses", "LICENSE", "gguf-py", "scripts/ui-assets.cmake"]


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def llama_sdist():
    """The unpacked llama-cpp-python sdist (downloaded and checked once): its folder."""
    name, version, expected = LLAMA_SDIST
    src = os.path.join(PEERS, "src")
    folder = os.path.join(src, f"llama_cpp_python-{version}")
    if os.path.exists(os.path.join(folder, ".complete")):
        return folder
    os.makedirs(src, exist_ok=True)
    tarball = os.path.join(src, f"llama_cpp_python-{version}.tar.gz")
    if not os.path.exists(tarball):
        log(f"fetching {name}=={version} (sdist) from PyPI")
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", name, "-d", src, f"{name}=={version}"], check=True)
    actual = sha256(tarball)
    if actual != expected:
        raise SystemExit(f"bench.py: {tarball} has sha256 {actual}, expected {expected}")
    with tarfile.open(tarball) as t:
        t.extractall(src, filter="data")
    open(os.path.join(folder, ".complete"), "w").close()
    return folder


def llama_source(sdist):
    return os.path.join(sdist, "vendor", "llama.cpp")


def ensure_harness_python(modules):
    """Re-executes the running script in $SAMEBITS_CACHE/peers/venv (made once, with
    HARNESS_PINS from PyPI) unless this Python already imports every module in `modules`; the
    GPU machine, which reaches no registry, has them installed and never gets here."""
    try:
        for module in modules:
            __import__(module)
        return
    except ImportError:
        pass
    python = os.path.join(HARNESS_VENV, "bin", "python")
    # sys.prefix, not the interpreter's path: a venv's python is a link to the system's.
    if os.path.realpath(sys.prefix) == os.path.realpath(HARNESS_VENV):
        raise SystemExit(f"bench: {HARNESS_VENV} lacks one of {modules}; delete it to rebuild it")
    if not os.path.exists(os.path.join(HARNESS_VENV, ".complete")):
        log(f"installing {' '.join(HARNESS_PINS)} from PyPI into {HARNESS_VENV}")
        subprocess.run([sys.executable, "-m", "venv", HARNESS_VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", *HARNESS_PINS], check=True)
        open(os.path.join(HARNESS_VENV, ".complete"), "w").close()
    os.execv(python, [python, *sys.argv])


def torch_python():
    """A Python that imports PyTorch: the running one if it does, else the virtual environment
    $SAMEBITS_CACHE/peers/torch-venv, made once with the pinned torch from PyPI (minutes, ~5 GB:
    the wheel pulls NVIDIA's CUDA libraries, unused on the CPU)."""
    try:
        import torch  # noqa: F401
        return sys.executable
    except ImportError:
        pass
    venv = os.path.join(PEERS, "torch-venv")
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(os.path.join(venv, ".complete")):
        return python
    log(f"installing {TORCH_PINS[0]} from PyPI into {venv}; minutes")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", *TORCH_PINS], check=True)
    open(os.path.join(venv, ".complete"), "w").close()
    return python


def cmake():
    """A cmake executable: the installed one, else cmake from PyPI."""
    found = shutil.which("cmake")
    if found:
        return found
    log(f"installing {CMAKE_PIN} from PyPI")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", CMAKE_PIN], check=True)
    return shutil.which("cmake") or os.path.join(os.path.dirname(sys.executable), "cmake")


def build_llama(source, build_dir, cuda, jobs):
    """Builds llama-bench and the shared libllama (for the ctypes bindings) into build_dir/bin;
    CPU: -DGGML_NATIVE=ON without AMX; CUDA: sm_90 only, FlashAttention kernels off (build time)."""
    flags = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DBUILD_SHARED_LIBS=ON",
             "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF",
             "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF"]
    if shutil.which("ninja"):
        flags += ["-G", "Ninja"]
    if platform.machine() in ("x86_64", "AMD64"):
        # -march=native turns on AMX where the CPU lists it, but a VM may list AMX without
        # granting its register state: llama-bench then dies of SIGILL at `tilezero`
        # (seen here). samebits does not use AMX either.
        no_amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
        flags += [f"-DCMAKE_C_FLAGS={no_amx}", f"-DCMAKE_CXX_FLAGS={no_amx}"]
    if cuda:
        flags += ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90", "-DGGML_CUDA_FA=OFF",
                  "-DGGML_CUDA_NCCL=OFF"]
    stamp = os.path.join(build_dir, ".samebits-flags")
    binary = os.path.join(build_dir, "bin", "llama-bench")
    if os.path.exists(binary) and os.path.exists(stamp) and open(stamp).read() == " ".join(flags):
        return os.path.dirname(binary)
    exe = cmake()
    log(f"building llama.cpp ({'CUDA' if cuda else 'CPU'}) in {build_dir}; minutes")
    subprocess.run([exe, "-S", source, "-B", build_dir, *flags], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([exe, "--build", build_dir, "--target", "llama-bench", "llama", "-j", str(jobs)],
                   check=True, stdout=subprocess.DEVNULL)
    with open(stamp, "w") as f:
        f.write(" ".join(flags))
    return os.path.dirname(binary)


def pack_llama_source(sdist, out_tar):
    """The parts of the sdist a GPU-machine build needs, as one .tar.xz (bindings included)."""
    base = os.path.basename(sdist)
    with tarfile.open(out_tar, "w:xz") as t:
        t.add(os.path.join(sdist, "llama_cpp"), arcname=f"{base}/llama_cpp")
        for part in LLAMA_BUILD_PARTS:
            t.add(os.path.join(llama_source(sdist), part), arcname=f"{base}/vendor/llama.cpp/{part}")
    return out_tar
