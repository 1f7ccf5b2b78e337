//! Conformance suite for GitOperations.
