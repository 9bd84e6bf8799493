//! The `bind-operator` binary: parses flags and wires the library together.

fn main() {}
