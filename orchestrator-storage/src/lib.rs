//! File store (work in progress).
