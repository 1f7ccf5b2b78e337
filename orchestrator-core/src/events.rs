//! Typed events for observers: every transition, phase, log line and plan status change.

use std::fmt::{self, Debug};
use std::sync::Arc;

use tokio::sync::broadcast;

use crate::ids::{NodeId, NodeIndex, PlanId};
use crate::runner::LogStream;
use crate::state::{NodeStatus, Phase, PhaseStatus, PlanStatus};

/// Something that happened in the orchestrator.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OrchestratorEvent {
    /// A plan was created.
    PlanCreated {
        /// Plan.
        plan: PlanId,
        /// Its name.
        name: String,
    },
    /// The plan's jobs or options were edited (scaffolding, reshape): node indices may have
    /// changed and statuses were re-derived; read the plan's state again.
    PlanReshaped {
        /// Plan.
        plan: PlanId,
        /// Number of nodes now.
        nodes: usize,
    },
    /// A plan's derived status changed.
    PlanStatusChanged {
        /// Plan.
        plan: PlanId,
        /// Previous status.
        from: PlanStatus,
        /// New status.
        to: PlanStatus,
    },
    /// A node changed status.
    NodeTransition {
        /// Plan.
        plan: PlanId,
        /// Node index.
        node: NodeIndex,
        /// Node id.
        node_id: NodeId,
        /// Previous status.
        from: NodeStatus,
        /// New status.
        to: NodeStatus,
    },
    /// A phase started.
    PhaseStarted {
        /// Plan.
        plan: PlanId,
        /// Node.
        node: NodeIndex,
        /// Phase.
        phase: Phase,
        /// Attempt.
        attempt: u32,
    },
    /// A phase ended.
    PhaseEnded {
        /// Plan.
        plan: PlanId,
        /// Node.
        node: NodeIndex,
        /// Phase.
        phase: Phase,
        /// Attempt.
        attempt: u32,
        /// Outcome.
        status: PhaseStatus,
        /// Error, when failed.
        error: Option<String>,
    },
    /// An output line of a running phase.
    Log {
        /// Plan.
        plan: PlanId,
        /// Node.
        node: NodeIndex,
        /// Phase.
        phase: Phase,
        /// Attempt.
        attempt: u32,
        /// Stream.
        stream: LogStream,
        /// The line, without newline.
        line: String,
    },
    /// A runner reported metrics (usage) for an attempt.
    Metrics {
        /// Plan.
        plan: PlanId,
        /// Node.
        node: NodeIndex,
        /// The metrics.
        metrics: serde_json::Value,
    },
    /// A finished attempt took the plan's usage to its budget (SPEC §12): the plan was paused
    /// (nothing running was stopped) until a person resumes it.
    BudgetReached {
        /// Plan.
        plan: PlanId,
        /// The plan's usage now.
        usage: crate::usage::Usage,
        /// The budget it reached.
        budget: crate::usage::Budget,
    },
    /// A job started waiting for a person or a condition (SPEC §12): a host tells someone.
    AttentionNeeded {
        /// Plan.
        plan: PlanId,
        /// Node.
        node: NodeIndex,
        /// Node id.
        node_id: NodeId,
        /// The job's producerId.
        producer_id: String,
        /// What it waits for (and since when, a deadline, a question).
        waiting: crate::state::Waiting,
    },
}

impl OrchestratorEvent {
    /// The plan the event belongs to.
    pub fn plan(&self) -> &PlanId {
        match self {
            OrchestratorEvent::PlanCreated { plan, .. }
            | OrchestratorEvent::PlanStatusChanged { plan, .. }
            | OrchestratorEvent::PlanReshaped { plan, .. }
            | OrchestratorEvent::NodeTransition { plan, .. }
            | OrchestratorEvent::PhaseStarted { plan, .. }
            | OrchestratorEvent::PhaseEnded { plan, .. }
            | OrchestratorEvent::Log { plan, .. }
            | OrchestratorEvent::Metrics { plan, .. }
            | OrchestratorEvent::AttentionNeeded { plan, .. }
            | OrchestratorEvent::BudgetReached { plan, .. } => plan,
        }
    }
}

/// A callback subscriber.
pub type EventCallback = Arc<dyn Fn(&OrchestratorEvent) + Send + Sync>;

/// Fan-out of events to broadcast subscribers and callbacks. Events are only built when someone
/// listens, so an unobserved orchestrator pays nothing for them.
#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<OrchestratorEvent>,
    callbacks: Arc<[EventCallback]>,
}

impl Debug for EventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventBus")
            .field("subscribers", &self.tx.receiver_count())
            .field("callbacks", &self.callbacks.len())
            .finish()
    }
}

impl EventBus {
    /// A bus whose subscribers each buffer up to `capacity` events (slow ones skip ahead).
    pub fn new(capacity: usize) -> Self {
        EventBus::with_callbacks(capacity, Vec::new())
    }

    /// A bus with callbacks.
    pub fn with_callbacks(capacity: usize, callbacks: Vec<EventCallback>) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        EventBus {
            tx,
            callbacks: callbacks.into(),
        }
    }

    /// Whether anyone listens.
    pub fn is_observed(&self) -> bool {
        !self.callbacks.is_empty() || self.tx.receiver_count() > 0
    }

    /// Publishes the event `make` builds, if anyone listens.
    pub fn emit_with(&self, make: impl FnOnce() -> OrchestratorEvent) {
        if !self.is_observed() {
            return;
        }
        let event = make();
        for cb in self.callbacks.iter() {
            cb(&event);
        }
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(event);
        }
    }

    /// A new broadcast subscription.
    pub fn subscribe(&self) -> broadcast::Receiver<OrchestratorEvent> {
        self.tx.subscribe()
    }
}
