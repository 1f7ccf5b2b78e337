//! GitOperations on git2 (work in progress).
