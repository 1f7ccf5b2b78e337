#![doc = include_str!("../README.md")]

pub use orchestrator_core as core;

pub mod synthetic;
