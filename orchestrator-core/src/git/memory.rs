//! [`MemoryGit`]: a fake [`GitOperations`] for tests (placeholder until the full fake lands).
