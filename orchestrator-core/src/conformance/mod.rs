//! Conformance suites: one entry point per plug-in trait that every implementation runs in its
//! own tests, so a new backend cannot silently skip a case.

pub mod capacity;
pub mod git;
pub mod repository;
