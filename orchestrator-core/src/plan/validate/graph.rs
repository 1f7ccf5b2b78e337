//! Graph checks: the dependency problems [`PlanGraph::build`](crate::plan::PlanGraph::build)
//! finds (unknown dependency, self-dependency, cycles), placed at the job they are about.

use crate::plan::graph::producers::Producers;
use crate::plan::{JobSpec, PlanSpec};

use super::{job_label, Position, Section, ValidationError, ValidationErrors, Validator};

impl Validator<'_> {
    /// Adds the graph's problems at their jobs.
    pub(super) fn merge_graph_errors(
        &mut self,
        spec: &PlanSpec,
        producers: &Producers,
        errors: ValidationErrors,
    ) {
        let mut cursor = Cursor::default();
        for mut error in errors.0 {
            let index = graph_error_job(spec, producers, &error, &mut cursor);
            if let Some((i, job)) = index.and_then(|i| Some((i, spec.jobs.get(i)?))) {
                error.job = Some(job_label(i, job));
            }
            let position = Position {
                slot: index.map_or(0, |i| i + 1),
                section: Section::Dependencies,
            };
            self.problems.push((position, error));
        }
    }
}

/// The index of the job a graph error is about. The graph names jobs by producerId only; with
/// duplicate producerIds the job is the one whose `dependencies[d]` holds the reported value.
fn graph_error_job(
    spec: &PlanSpec,
    producers: &Producers,
    error: &ValidationError,
    cursor: &mut Cursor,
) -> Option<usize> {
    let id = error.job.as_deref()?;
    let first = producers.get(id)?;
    let Some(d) = dependency_entry(&error.field) else {
        // A cycle: reported at the first job with the id.
        return Some(first);
    };
    let owns =
        |job: &JobSpec| job.producer_id == id && job.dependencies.get(d) == Some(&error.value);
    let found = spec
        .jobs
        .iter()
        .enumerate()
        .skip(cursor.next_search(d).max(first))
        .find(|(_, job)| owns(job))
        .map(|(i, _)| i);
    match found {
        Some(i) => {
            *cursor = Cursor {
                job: i,
                entry: Some(d),
            };
            Some(i)
        }
        None => Some(first),
    }
}

/// Where the last dependency problem was found. The graph reports dependency entries in
/// (job, entry) order, so each search resumes here: linear even when every job shares one
/// producerId.
#[derive(Debug, Default)]
struct Cursor {
    job: usize,
    entry: Option<usize>,
}

impl Cursor {
    /// The first job that can hold entry `d` of the next problem.
    fn next_search(&self, d: usize) -> usize {
        match self.entry {
            Some(last) if d <= last => self.job + 1,
            _ => self.job,
        }
    }
}

/// `d` of a `dependencies[d]` field.
fn dependency_entry(field: &str) -> Option<usize> {
    field
        .strip_prefix("dependencies[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}
