"""Gates several benchmarks share (the camera gate). Imports core only; plugins may import it, as they do formats/."""
