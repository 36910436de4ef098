# What the runtime libraries (lathe_core, lathe_runtime, lathe_text,
# lathe_image, lathe_generate) and a model executable link against: included by lathe's
# own build (Dependencies.cmake) and by the installed package
# (latheConfig.cmake), so a project that links the installed libraries finds
# the same packages.
find_package(Threads REQUIRED)
find_package(Vulkan REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
# Tokenizers: PCRE2 runs the pre-tokenizer patterns, utf8proc the Unicode
# normalizers (Qwen2's NFC), libsentencepiece reads .model files. GLOBAL:
# the toolchain of `lathe build` (cmake/Package.cmake) names their libraries.
find_package(PkgConfig REQUIRED)
pkg_check_modules(LATHE_PCRE2 REQUIRED IMPORTED_TARGET GLOBAL libpcre2-8)
pkg_check_modules(LATHE_UTF8PROC REQUIRED IMPORTED_TARGET GLOBAL libutf8proc)
pkg_check_modules(LATHE_SENTENCEPIECE REQUIRED IMPORTED_TARGET GLOBAL sentencepiece)
# The server's HTTP (Debian's libcpp-httplib-dev: a compiled library, whose
# .pc file carries the defines its header must be read with).
pkg_check_modules(LATHE_HTTPLIB REQUIRED IMPORTED_TARGET GLOBAL cpp-httplib)
# Images in (lathe_image): Debian's libpng and libjpeg-turbo decode PNG and
# JPEG files.
find_package(PNG REQUIRED)
find_package(JPEG REQUIRED)
# Open MPI (Debian's libopenmpi-dev), when installed: a model executable
# then runs a model split over machines, a rank a pipeline stage
# (`mpirun -np 2 <model> generate …`). Without it every other command works.
pkg_check_modules(LATHE_MPI QUIET IMPORTED_TARGET GLOBAL mpi-c)
