//! Conformance suite for PlanRepository.
