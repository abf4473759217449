// The source of sacplan_torch_pch (cmake/TorchPrecompiledHeader.cmake): a
// target needs one to build its precompiled header; it defines nothing.
