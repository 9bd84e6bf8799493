//! Custom resource types for group `bind.unkin.net`, version `v1alpha1`.
