# The Python extension svdq._C (nanobind over the public C++ API), installed into the wheel's svdq/ package by
# scikit-build-core. nanobind comes from pip (a build requirement in pyproject.toml).
find_package(Python 3.10 REQUIRED COMPONENTS Interpreter Development.Module)
execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir OUTPUT_VARIABLE nanobind_ROOT
                OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
find_package(nanobind CONFIG REQUIRED)
# The stable ABI (one wheel for CPython >= 3.12) where the interpreter allows it; nanobind builds a
# version-specific extension for 3.10 / 3.11.
nanobind_add_module(_C STABLE_ABI NB_STATIC src/python/svdq_ext.cpp src/python/arrays.cpp)
target_include_directories(_C PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(_C PRIVATE svdq)
# The C++ runtime linked in and every symbol but the module's entry point kept private: exported, they would bind to
# the process's shared libstdc++ (torch loads one globally), whose locale facets differ by version, and every number
# the library writes to a std::ostream (the rendered kernel units) would silently come out as nothing.
file(WRITE ${CMAKE_BINARY_DIR}/svdq_ext.map "{\n  global: PyInit__C;\n  local: *;\n};\n")
target_link_options(_C PRIVATE -static-libstdc++ -static-libgcc -Wl,--exclude-libs,ALL
                    -Wl,--version-script=${CMAKE_BINARY_DIR}/svdq_ext.map)
# NVRTC is a shared library: found next to the system toolkit, or in the pip wheel torch itself depends on
# (site-packages/nvidia/cu13/lib), relative to svdq/.
set_target_properties(_C PROPERTIES INSTALL_RPATH "$ORIGIN/../nvidia/cu13/lib;$ORIGIN/../nvidia/cuda_nvrtc/lib;${CUDAToolkit_LIBRARY_DIR}")
install(TARGETS _C LIBRARY DESTINATION svdq COMPONENT python)
