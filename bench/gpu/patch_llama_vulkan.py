#!/usr/bin/env python3
"""Guards llama.cpp's one use of VK_EXT_layer_settings (its validation option)
so that its Vulkan backend builds with Debian 12's Vulkan headers (1.3.239,
which lack the extension), as ../shared/peers/README.md says to. Applied to the
unpacked copy in build-kit/; idempotent. Usage: patch_llama_vulkan.py LLAMA_DIR
"""
import pathlib
import sys

path = pathlib.Path(sys.argv[1]) / "ggml/src/ggml-vulkan/ggml-vulkan.cpp"
text = path.read_text()
start = text.index("    VkBool32 enable_best_practice = layer_settings;")
end_marker = "&layer_setting_info);\n"
end = text.index(end_marker, start) + len(end_marker)
if "#ifdef VK_EXT_layer_settings\n    VkBool32" not in text:
    text = (text[:start] + "#ifdef VK_EXT_layer_settings\n" + text[start:end] + "#else\n"
            "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);\n"
            "#endif\n" + text[end:])
    path.write_text(text)
