//! The seeds' precise rules as pure functions of reply text: task assignments, sentinels,
//! evaluator scores and the quality trend, stall detection, and the signed contract. Replies
//! are only ever parsed here, never executed.

pub mod assign;
pub mod contract;
pub mod score;
pub mod sentinel;
pub mod stall;

pub use assign::{match_worker, parse_assignments, Assignment};
pub use contract::{parse_contract, Contract, ContractStatus, Role, Verdict};
pub use score::{parse_best, parse_score, trend, Evaluation, Trend};
pub use sentinel::{find_sentinel, Sentinel};
pub use stall::{jaccard, StallCheck};
