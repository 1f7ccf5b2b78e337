//! Conformance suites: one entry point per plug-in trait that every implementation runs in its
//! own tests, so a new backend cannot silently skip a case.
//!
//! Compiled only with the `testing` feature: enable it in the `[dev-dependencies]` of the crate
//! whose tests run a suite.

pub mod capacity;
pub mod git;
pub mod repository;
pub mod runner;
