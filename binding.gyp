{
  "targets": [
    {
      "target_name": "skylark",
      "sources": ["<!@(node native/sources.cjs)"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "native", "native/third_party/llhttp"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_c": ["-O3", "-fvisibility=hidden", "-Wno-unused-parameter"],
      "cflags_cc!": ["-std=gnu++17", "-std=gnu++1y", "-fno-exceptions"],
      "cflags_cc": ["-std=c++20", "-fvisibility=hidden", "-O3", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "xcode_settings": {
        "CLANG_CXX_LANGUAGE_STANDARD": "c++20",
        "GCC_SYMBOLS_PRIVATE_EXTERN": "YES"
      }
    }
  ]
}
