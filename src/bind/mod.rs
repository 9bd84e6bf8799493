//! Pure BIND knowledge: rendering, command lines, parsers. No Kubernetes in here.
