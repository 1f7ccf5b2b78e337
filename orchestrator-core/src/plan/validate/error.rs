//! The error types of validation: one [`ValidationError`] per problem, all of them in
//! [`ValidationErrors`].

use std::fmt;

use crate::plan::JobSpec;

/// One problem in a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// producerId of the job (or `jobs[i]` when it has none); `None` for plan-level fields.
    pub job: Option<String>,
    /// Field path inside the job (or plan), e.g. `work.cwd`, `dependencies[1]`.
    pub field: String,
    /// The offending value.
    pub value: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl ValidationError {
    /// A problem in `job` (or the plan, with `None`).
    pub fn new(
        job: Option<&JobSpec>,
        field: impl Into<String>,
        value: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ValidationError {
            job: job.map(|j| j.producer_id.clone()),
            field: field.into(),
            value: value.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.job {
            Some(job) => write!(f, "job `{job}`, field `{}`", self.field)?,
            None => write!(f, "plan field `{}`", self.field)?,
        }
        if !self.value.is_empty() {
            write!(f, " = {:?}", self.value)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// All problems of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl ValidationErrors {
    /// The problems.
    pub fn errors(&self) -> &[ValidationError] {
        &self.0
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "{n} problem{} in the plan:",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationErrors {}
