"""The local engine: transformers on this machine, in this process or in a generation child
process (ZeroGPU)."""
