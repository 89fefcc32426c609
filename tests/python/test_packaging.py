"""What gets shipped: the wheel's contents, and the C++ install tree a CMake user consumes with find_package(svdq)."""
import glob
import os
import subprocess
import zipfile

import pytest

import svdq
from conftest import BUILD_DIR

WHEEL_DIR = os.environ.get("SVDQ_WHEEL_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build", "wheel"))


def test_the_installed_package_is_the_wheel_not_the_source_tree():
    # scripts/test.sh installs the wheel it built into a fresh venv and runs pytest from outside the sources.
    assert os.path.basename(os.path.dirname(svdq.__file__)) == "svdq"
    assert glob.glob(os.path.join(os.path.dirname(svdq.__file__), "_C*.so"))


def test_the_extension_exports_no_cxx_runtime_symbols():
    # The extension links libstdc++ statically; an exported copy binds, in a process where torch has loaded the shared
    # libstdc++ globally, partly to that one, and numbers written to std::ostream (the NVRTC units) come out empty.
    so = glob.glob(os.path.join(os.path.dirname(svdq.__file__), "_C*.so"))[0]
    syms = subprocess.run(["nm", "-D", "--defined-only", so], check=True, capture_output=True, text=True).stdout.split()
    std = [s for s in syms if s.startswith(("_ZNSt", "_ZNKSt", "_ZSt", "_ZTVSt", "_ZTISt", "_ZTSSt"))]
    assert not std, f"{len(std)} C++ runtime symbols exported, e.g. {std[:3]}"
    assert "PyInit__C" in syms


def test_wheel_holds_the_extension_and_the_package():
    wheels = glob.glob(os.path.join(WHEEL_DIR, "svdq-*.whl"))
    if not wheels:
        pytest.skip(f"no wheel in {WHEEL_DIR} (scripts/test.sh builds one)")
    names = zipfile.ZipFile(sorted(wheels)[-1]).namelist()
    for f in ("svdq/__init__.py", "svdq/_api.py", "svdq/_torch_ops.py", "svdq/nn.py", "svdq/quant.py",
              "svdq/checkpoint.py", "svdq/_safetensors.py"):
        assert f in names
    assert any(n.startswith("svdq/_C") and n.endswith(".so") for n in names)
    assert not any(n.startswith(("include/", "lib/")) for n in names)  # the C++ install tree stays out of the wheel
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(sorted(wheels)[-1]).read(meta).decode()
    assert f"Version: {svdq.__version__}" in text


def test_cmake_consumer_builds_against_the_install_tree(tmp_path):
    if not os.path.exists(os.path.join(BUILD_DIR, "CMakeCache.txt")):
        pytest.skip(f"no configured C++ build in {BUILD_DIR} (scripts/test.sh builds one)")
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", str(prefix), "--component", "dev"], check=True,
                   capture_output=True)
    assert (prefix / "include" / "svdq" / "svdq.hpp").exists()
    assert (prefix / "lib" / "cmake" / "svdq" / "svdqConfig.cmake").exists()
    app = tmp_path / "app"
    app.mkdir()
    (app / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.24)\nproject(app LANGUAGES CXX)\nset(CMAKE_CXX_STANDARD 17)\n"
        "find_package(svdq 0.1 REQUIRED)\nadd_executable(app main.cpp)\ntarget_link_libraries(app PRIVATE svdq::svdq)\n")
    (app / "main.cpp").write_text(
        "#include <svdq/svdq.hpp>\n#include <cstdio>\n"
        "int main() {\n  std::printf(\"%lld\\n\", (long long)svdq::svdquant_linear_workspace_size(4096, 3072, 32));\n"
        "  try { svdq::svdquant_linear_workspace_size(1, 48, 32); } catch (const svdq::Error& e) {\n"
        "    std::printf(\"%s\\n\", e.what()); }\n  return 0;\n}\n")
    env = dict(os.environ, CMAKE_PREFIX_PATH=str(prefix))
    cuda = "/usr/local/cuda"
    subprocess.run(["cmake", "-S", str(app), "-B", str(app / "build"), f"-DCUDAToolkit_ROOT={cuda}"], check=True,
                   capture_output=True, env=env)
    subprocess.run(["cmake", "--build", str(app / "build")], check=True, capture_output=True)
    out = subprocess.run([str(app / "build" / "app")], check=True, capture_output=True, text=True).stdout.splitlines()
    assert out[0] == str(svdq.svdquant_linear_workspace_size(4096, 3072, 32))
    assert "argument 'k' = 48" in out[1]


def test_cubin_wheel_for_one_arch_is_found_and_checked(tmp_path):
    import sys

    cli = os.path.join(BUILD_DIR, "svdq")
    if not os.path.exists(cli):
        pytest.skip(f"no svdq CLI in {BUILD_DIR} (scripts/test.sh builds one)")
    tool = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "build_cubin_wheel.py")
    tag = svdq._C.cuda_tag()
    out = tmp_path / "dist"
    r = subprocess.run([sys.executable, tool, "--svdq", cli, "--cuda", tag, "--arch-list", "9.0a", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    wheel = out / f"svdq_cubin_{tag}-{svdq.__version__}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert f"svdq_cubin_{tag}/package/build.json" in names and f"svdq_cubin_{tag}/CENSUS.txt" in names
    meta = zipfile.ZipFile(wheel).read(f"svdq_cubin_{tag}-{svdq.__version__}.dist-info/METADATA").decode()
    assert f"Requires-Dist: svdq=={svdq.__version__}" in meta
    # What it packs passes the census gate by itself.
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)], check=True)
    pkg = site / f"svdq_cubin_{tag}" / "package"
    assert subprocess.run([cli, "census", str(pkg), "--expect"], capture_output=True).returncode == 0
    # svdq finds it by itself and searches it first.
    probe = "import os, svdq; print(svdq.cubin_package); print(os.environ['SVDQ_AOT_DIR'])"
    # (The site in front of whatever PYTHONPATH already holds: svdq itself may be installed through it.)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    env.pop("SVDQ_AOT_DIR", None)
    lines = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert lines[0] == str(pkg) and lines[1].split(":")[0] == str(pkg)
    _run_with_jit_disabled(pkg, env, tmp_path)
    # A wheel of another version is reported and not used.
    other = tmp_path / "other"
    r = subprocess.run([sys.executable, tool, "--svdq", cli, "--cuda", tag, "--arch-list", "9.0a", "--out", str(other),
                        "--package", str(pkg), "--version", "0.0.1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    site2 = tmp_path / "site2"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site2),
                    str(other / f"svdq_cubin_{tag}-0.0.1-py3-none-any.whl")], check=True)
    r = subprocess.run([sys.executable, "-W", "always", "-c", "import svdq; print(svdq.cubin_package)"],
                       env=dict(env, PYTHONPATH=env["PYTHONPATH"].replace(str(site), str(site2), 1)), capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "None"
    assert "does not match svdq" in r.stderr


# On an sm_90 GPU with torch: the layer (decode and small-M routes) and the GEMM alone run in a fresh process with
# SVDQ_DISABLE_JIT=1 and an empty disk cache (so nothing can be compiled: every module comes from the cubin wheel,
# found by itself), with the bytes of this process's calls.
_JIT_OFF_PROBE = """
import sys, torch, svdq, svdq.nn
case = torch.load(sys.argv[1])
layer = svdq.nn.SVDQuantLinear(512, 256, rank=32, bias=True, device="cuda")
layer.load_state_dict({k: v.cuda() for k, v in case["state"].items()})
torch.save([layer(x.cuda()).cpu() for x in case["xs"]], sys.argv[2])
"""


def _run_with_jit_disabled(pkg, env, tmp_path):
    import sys

    try:
        import torch
    except ImportError as e:
        print(f"JIT-disabled run skipped: torch not importable: {e}")
        return
    import svdq.nn  # (binds the name svdq in this function: before its first use)

    if not (svdq.gpu_available()[0] and torch.cuda.is_available()):
        print(f"JIT-disabled run skipped: no CUDA device: {svdq.gpu_available()[1]}")
        return
    if torch.cuda.get_device_capability() != (9, 0):
        print(f"JIT-disabled run skipped: the wheel holds 9.0a, the GPU is {torch.cuda.get_device_capability()}")
        return
    torch.manual_seed(3)
    lin = torch.nn.Linear(512, 256).to(torch.bfloat16).cuda()
    xs = [torch.randn(m, 512, dtype=torch.bfloat16) for m in (1, 8, 100, 600)]
    layer = svdq.nn.SVDQuantLinear.from_linear(lin, rank=32, input_amax=4.0)
    want = [layer(x.cuda()).cpu() for x in xs]
    case, got_path = tmp_path / "case.pt", tmp_path / "got.pt"
    torch.save({"state": {k: v.cpu() for k, v in layer.state_dict().items()}, "xs": xs}, case)
    (tmp_path / "probe.py").write_text(_JIT_OFF_PROBE)
    cache = tmp_path / "empty_cache"
    cache.mkdir()
    run_env = dict(env, SVDQ_DISABLE_JIT="1", SVDQ_CACHE_DIR=str(cache))
    r = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(case), str(got_path)], env=run_env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    got = torch.load(got_path)
    for g, w in zip(got, want):
        assert torch.equal(g.view(torch.int16), w.view(torch.int16))
