//! Node and plan state: statuses, the transition table, records and the journal of changes.

mod machine;
mod record;
mod status;

pub use machine::{OutboxEntry, PlanMachine};
pub(crate) use record::fresh_nodes;
pub use record::{
    ApplyError, Attempt, AttemptExtra, AttemptStatus, Heal, NodeExtra, NodeState, PhaseRecord,
    PlanRecord, PlanState, StateChange, StatusCounts, ToolState, Waiting, WaitingFor,
    SCHEMA_VERSION,
};
pub use status::{FailureReason, NodeStatus, Phase, PhaseStatus, PlanStatus};
