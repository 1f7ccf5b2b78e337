//! Status answers: a plan's status document and text, as every tool that changes a plan
//! answers, and [`OrchestratorMcp::drive`], the shape of the tools that drive a whole plan.

use orchestrator_core::PlanId;
use serde_json::Value;

use super::{Failure, OrchestratorMcp};
use crate::report;

impl OrchestratorMcp {
    /// The plan's status: the document and the text.
    pub(crate) async fn status_doc(&self, id: &PlanId) -> Result<(Value, String), Failure> {
        let view = self.record(id).await?;
        Ok((view.to_json(), report::plan_text(&view)))
    }

    /// The plan's status after a tool changed it, the text led by `done` (what happened).
    pub(super) async fn status_after(
        &self,
        id: &PlanId,
        done: &str,
    ) -> Result<(Value, String), Failure> {
        let (doc, text) = self.status_doc(id).await?;
        Ok((doc, format!("{done}\n{text}")))
    }

    /// A tool that drives a whole plan: resolves the plan (an id or a unique prefix) and takes
    /// it over, runs `op` on it, and answers with the plan's status. `done` adds what `op`
    /// returned to the status document and says what happened (the text's first line), if
    /// anything.
    pub(super) async fn drive<R>(
        &self,
        plan: &str,
        op: impl AsyncFnOnce(&PlanId) -> orchestrator_core::Result<R>,
        done: impl FnOnce(&PlanId, R, &mut Value) -> Option<String>,
    ) -> Result<(Value, String), Failure> {
        let id = self.owned_plan(plan).await?;
        let outcome = op(&id).await?;
        let (mut doc, text) = self.status_doc(&id).await?;
        let text = match done(&id, outcome, &mut doc) {
            Some(done) => format!("{done}\n{text}"),
            None => text,
        };
        Ok((doc, text))
    }
}
